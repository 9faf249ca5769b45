package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testskip"
	"github.com/rheo-go/rheo/rheotest"
	"github.com/rheo-go/rheo/worker"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(testskip.Wrap(m))
}

// leaseDuration is the lease of the tests that drive a fake clock.
const leaseDuration = 10 * time.Second

// bundle is what a worker test works with.
type bundle struct {
	backend *testbackend.Backend
	drv     driver.Driver
	clock   *rheotest.Clock
	rec     *recorder
	stream  string
	group   string
}

func setup(t *testing.T, b *testbackend.Backend, maxAttempts int) *bundle {
	t.Helper()
	clock := rheotest.NewClock(time.Time{})
	drv := b.Open(t, clock)
	stream, group := newStream(t, drv, 1, maxAttempts)
	return &bundle{backend: b, drv: drv, clock: clock, rec: &recorder{}, stream: stream, group: group}
}

// config is a worker config on the bundle's stream with a fake clock.
func (bd *bundle) config(h worker.Handler) *worker.Config {
	return &worker.Config{
		Stream:        bd.stream,
		Group:         bd.group,
		Handler:       h,
		LeaseDuration: leaseDuration,
		PollInterval:  time.Second,
		Clock:         bd.clock,
		Hooks:         []any{bd.rec},
	}
}

func (bd *bundle) info(t *testing.T) rheo.GroupInfo {
	t.Helper()
	return groupInfo(t, bd.drv, bd.stream, bd.group)
}

// payloadN is the "n" of an event appended by appendN.
func payloadN(t testing.TB, l rheo.Lease) int {
	var p struct{ N int }
	require.NoError(t, json.Unmarshal(l.Event.Payload, &p))
	return p.N
}

// outcomes returns the handler returns with outcome o.
func outcomes(s recorded, o worker.Outcome) []worker.HandleInfo {
	var out []worker.HandleInfo
	for _, h := range s.handled {
		if h.Outcome == o {
			out = append(out, h)
		}
	}
	return out
}

func TestWorkerOutcomes(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("nil acks the event", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 3)
			startWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))

			s := bd.rec.waitFor(t, "3 acks", func(s recorded) bool { return len(s.acked) == 3 })
			for _, h := range s.handled {
				assert.Equal(t, worker.OutcomeAck, h.Outcome)
				assert.NoError(t, h.Err)
			}
			assert.Equal(t, int64(0), bd.info(t).Lag)
		})

		t.Run("Retry makes the event claimable again after its delay", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			startWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
				if l.Attempt == 1 {
					return worker.Retry(5*time.Second, errors.New("later"))
				}
				return nil
			}))

			s := bd.rec.waitFor(t, "a retry", func(s recorded) bool { return len(s.retried) == 1 })
			assert.Equal(t, 5*time.Second, s.retried[0].Delay)
			assert.Equal(t, "later", s.retried[0].Reason)
			info := bd.info(t)
			assert.Equal(t, int64(1), info.PendingRetry)
			assert.Equal(t, int64(0), info.InFlight)

			bd.clock.Advance(5 * time.Second)
			s = bd.rec.waitFor(t, "the ack", func(s recorded) bool { return len(s.acked) == 1 })
			require.Len(t, s.redelivered, 1)
			assert.Equal(t, 2, s.redelivered[0].Lease.Attempt)
			assert.Equal(t, int64(0), bd.info(t).Lag)
		})

		t.Run("Retry dead-letters at the attempt limit", func(t *testing.T) {
			bd := setup(t, b, 2)
			appendN(t, bd.drv, bd.stream, 1)
			startWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
				return worker.Retry(0, errors.New("nope"))
			}))

			s := bd.rec.waitFor(t, "a dead letter", func(s recorded) bool { return len(s.deadLettered) == 1 })
			assert.Len(t, s.retried, 1)
			dls := deadLetters(t, bd.drv, bd.stream, bd.group)
			require.Len(t, dls, 1)
			assert.Equal(t, "nope", dls[0].Reason)
			assert.Equal(t, 2, dls[0].Attempt)
		})

		t.Run("Reject dead-letters the event at once", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			startWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
				return worker.Reject(errors.New("poison"))
			}))

			s := bd.rec.waitFor(t, "a dead letter", func(s recorded) bool { return len(s.deadLettered) == 1 })
			assert.Empty(t, s.retried)
			assert.Equal(t, worker.OutcomeReject, s.handled[0].Outcome)
			dls := deadLetters(t, bd.drv, bd.stream, bd.group)
			require.Len(t, dls, 1)
			assert.Equal(t, "poison", dls[0].Reason)
			assert.Equal(t, 1, dls[0].Attempt)
			assert.Equal(t, int64(0), bd.info(t).Lag)
		})

		t.Run("any other error is retried after the retry policy's delay, with the error as the reason", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			startWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
				if l.Attempt == 1 {
					return errors.New("flaky")
				}
				return nil
			}))

			s := bd.rec.waitFor(t, "the retry", func(s recorded) bool { return len(s.retried) == 1 })
			assert.Equal(t, "flaky", s.retried[0].Reason)
			assertJittered(t, time.Second, s.retried[0].Delay, "the first back-off")
			assert.Equal(t, worker.DefaultRetryPolicy(s.retried[0].Lease, nil), s.retried[0].Delay)
			assert.Equal(t, worker.OutcomeRetry, s.handled[0].Outcome)
			assert.Equal(t, int64(1), bd.info(t).PendingRetry)

			bd.clock.Advance(2 * time.Second) // past the delay and the poll
			s = bd.rec.waitFor(t, "the ack", func(s recorded) bool { return len(s.acked) == 1 })
			assert.Equal(t, 2, s.acked[0].Lease.Attempt)
		})

		t.Run("a panic is recovered and retried with the panic as the reason", func(t *testing.T) {
			bd := setup(t, b, 2)
			appendN(t, bd.drv, bd.stream, 2)
			startWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
				if payloadN(t, l) == 0 {
					panic("kaboom")
				}
				return nil
			}))

			s := bd.rec.waitFor(t, "the retry and the other event's ack", func(s recorded) bool {
				return len(s.retried) == 1 && len(s.acked) == 1
			})
			assert.Equal(t, "panic: kaboom", s.retried[0].Reason)
			assert.Equal(t, worker.DefaultRetryPolicy(s.retried[0].Lease, nil), s.retried[0].Delay, "panics back off like errors")
			assert.Empty(t, s.deadLettered)

			bd.clock.Advance(2 * time.Second) // past the delay and the poll
			s = bd.rec.waitFor(t, "a dead letter", func(s recorded) bool { return len(s.deadLettered) == 1 })
			var panics int
			for _, h := range s.handled {
				var p *worker.PanicError
				if errors.As(h.Err, &p) {
					panics++
					assert.Equal(t, "kaboom", p.Value)
					assert.NotEmpty(t, p.Stack)
					assert.Equal(t, worker.OutcomeRetry, h.Outcome)
				}
			}
			assert.Equal(t, 2, panics)
			dls := deadLetters(t, bd.drv, bd.stream, bd.group)
			require.Len(t, dls, 1)
			assert.Equal(t, "panic: kaboom", dls[0].Reason)
			assert.Equal(t, 2, dls[0].Attempt)
		})
	})
}

func TestWorkerLeases(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("renewal keeps a slow handler's lease", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			started, release := make(chan struct{}), make(chan struct{})
			startWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
				close(started)
				<-release
				return nil
			}))
			receive(t, "the handler", started)

			// 12s of a 10s lease: only renewal keeps it.
			bd.clock.Advance(6 * time.Second)
			bd.rec.waitFor(t, "a renewal", func(s recorded) bool { return len(s.renewed) == 1 })
			bd.clock.Advance(6 * time.Second)
			s := bd.rec.waitFor(t, "a second renewal", func(s recorded) bool { return len(s.renewed) == 2 })
			for _, r := range s.renewed {
				assert.NoError(t, r.Err)
			}
			assert.WithinDuration(t, bd.clock.Now().Add(leaseDuration), s.renewed[1].ExpiresAt, 0)
			assert.Equal(t, int64(1), bd.info(t).InFlight)

			close(release)
			s = bd.rec.waitFor(t, "the ack", func(s recorded) bool { return len(s.acked) == 1 })
			assert.Empty(t, s.redelivered)
			assert.Empty(t, s.leaseLost)
			assert.Equal(t, int64(0), bd.info(t).Lag)
		})

		t.Run("a lost lease cancels the handler and its outcome is discarded", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			causes := make(chan error, 1)
			var called atomic.Bool
			startWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
				if called.Swap(true) {
					return nil
				}
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return errors.New("interrupted")
			}))
			bd.rec.waitFor(t, "the fetch", func(s recorded) bool { return len(s.fetched) > 0 && s.fetched[0].Count == 1 })

			require.NoError(t, bd.drv.ResetGroup(context.Background(), bd.stream, bd.group, &rheo.ResetOptions{Confirm: true}))
			bd.clock.Advance(6 * time.Second)

			cause := receive(t, "the handler's cancellation", causes)
			assert.ErrorIs(t, cause, rheo.ErrStaleLease)
			s := bd.rec.waitFor(t, "the discarded outcome", func(s recorded) bool {
				return len(outcomes(s, worker.OutcomeDiscarded)) == 1
			})
			assert.Equal(t, "interrupted", outcomes(s, worker.OutcomeDiscarded)[0].Err.Error())
			require.Len(t, s.leaseLost, 1)
			assert.ErrorIs(t, s.leaseLost[0].Err, rheo.ErrStaleLease)
			assert.Empty(t, s.retried, "a discarded outcome is not settled")
			assert.Empty(t, s.settleFailed)

			// The reset made the event claimable again; the worker
			// handles it anew.
			bd.clock.Advance(time.Second)
			bd.rec.waitFor(t, "the ack", func(s recorded) bool { return len(s.acked) == 1 })
			assert.Equal(t, int64(0), bd.info(t).Lag)
		})
	})
}
