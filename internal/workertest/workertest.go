// Package workertest holds the worker's behavioural test cases, run on
// every driver as the conformance suite is (driver/drivertest): the
// worker package's own tests run them on SQLite and PostgreSQL, and a
// driver of its own module (driver/redis) runs them on its database.
//
//	func TestWorker(t *testing.T) {
//		workertest.Run(t, func(t *testing.T, clock driver.Clock) driver.Driver {
//			return openMyDriver(t, clock)
//		})
//	}
//
// The cases need nothing beyond driver.Driver: no transactions, no SQL.
// They drive the worker with a fake clock (rheotest.Clock) given to both
// the worker and the driver, and never sleep to wait out a lease.
package workertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/rheotest"
	"github.com/rheo-go/rheo/worker"
)

// Opener opens a driver on a database of the test's own, reading time
// from clock (never nil here); the driver is closed when t ends. Every
// case opens its own driver and works on a stream of its own, named
// apart from those of other runs on the same database.
type Opener func(t *testing.T, clock driver.Clock) driver.Driver

// Run runs every case as a subtest of t: "outcomes" (what nil, Retry,
// Reject, an error and a panic do) and "leases" (renewal, a lost
// lease).
func Run(t *testing.T, open Opener) {
	t.Run("outcomes", func(t *testing.T) { outcomesCases(t, open) })
	t.Run("leases", func(t *testing.T) { leasesCases(t, open) })
}

// waitTimeout bounds every wait for something that must happen, counted
// from the last progress the recorder saw.
const waitTimeout = 30 * time.Second

// leaseDuration is the lease of the cases, on the fake clock.
const leaseDuration = 10 * time.Second

// bundle is what a case works with.
type bundle struct {
	drv    driver.Driver
	clock  *rheotest.Clock
	rec    *recorder
	stream string
	group  string
}

// setup opens a driver on a fake clock, with a stream of one partition
// and a group of maxAttempts.
func setup(t *testing.T, open Opener, maxAttempts int) *bundle {
	t.Helper()
	clock := rheotest.NewClock(time.Time{})
	drv := open(t, clock)
	stream, group := newStream(t, drv, 1, maxAttempts)
	return &bundle{drv: drv, clock: clock, rec: &recorder{}, stream: stream, group: group}
}

// config is a worker config on the bundle's stream with its fake clock.
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
	info, err := bd.drv.GroupInfo(context.Background(), bd.stream, bd.group)
	require.NoError(t, err)
	return info
}

// runID sets this test binary's stream names apart from those of other
// runs on the same database (a shared Redis, say).
var runID = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// streamSeq makes stream names unique within a test binary run.
var streamSeq atomic.Int64

// newStream creates a stream with a group on drv and returns their names.
func newStream(t testing.TB, drv driver.Driver, partitions, maxAttempts int) (stream, group string) {
	t.Helper()
	ctx := context.Background()
	stream = fmt.Sprintf("worker-%s-%d", runID, streamSeq.Add(1))
	group = "g"
	require.NoError(t, drv.CreateStream(ctx, stream, partitions))
	require.NoError(t, drv.CreateGroup(ctx, stream, group, &rheo.CreateGroupOptions{MaxAttempts: maxAttempts}))
	return stream, group
}

// appendN appends n events {"n": i} (i from 0) to stream.
func appendN(t testing.TB, drv driver.Driver, stream string, n int) {
	t.Helper()
	items := make([]rheo.BatchItem, n)
	for i := range items {
		items[i] = rheo.BatchItem{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	_, err := drv.AppendBatch(context.Background(), stream, items, nil)
	require.NoError(t, err)
}

func deadLetters(t testing.TB, drv driver.Driver, stream, group string) []rheo.DeadLetter {
	t.Helper()
	dls, err := drv.DeadLetters(context.Background(), stream, group, nil)
	require.NoError(t, err)
	return dls
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

// assertJittered checks a back-off delay: within ±20% of nominal, in
// whole milliseconds.
func assertJittered(t testing.TB, nominal, got time.Duration, format string, args ...any) {
	t.Helper()
	low, high := nominal*8/10, nominal*12/10
	if got < low || got >= high {
		assert.Failf(t, "delay out of its range", "%s is not in [%s, %s): %s", got, low, high, fmt.Sprintf(format, args...))
	}
	assert.Zero(t, got%time.Millisecond, "whole milliseconds: %s", got)
}

// startWorker starts a worker and stops it when t ends.
func startWorker(t testing.TB, drv driver.Driver, cfg *worker.Config) *worker.Worker {
	t.Helper()
	w, err := worker.New(drv, cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = w.StopAndCancel(ctx)
	})
	return w
}

// receive waits for a value from ch.
func receive[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		require.FailNow(t, fmt.Sprintf("timed out waiting for %s", what))
		panic("unreachable")
	}
}

// recorded is what a recorder was told.
type recorded struct {
	fetched      []worker.FetchInfo
	handled      []worker.HandleInfo
	acked        []worker.AckInfo
	retried      []worker.RetryInfo
	deadLettered []worker.DeadLetterInfo
	redelivered  []worker.RedeliveryInfo
	renewed      []worker.RenewInfo
	leaseLost    []worker.LeaseLostInfo
	settleFailed []worker.SettleErrorInfo
}

// count is the number of calls recorded.
func (s recorded) count() int {
	return len(s.fetched) + len(s.handled) + len(s.acked) + len(s.retried) + len(s.deadLettered) +
		len(s.redelivered) + len(s.renewed) + len(s.leaseLost) + len(s.settleFailed)
}

// recorder is a hook that records what the cases check.
type recorder struct {
	mu sync.Mutex
	r  recorded
}

// record appends v to the list of the recorder at list, under its lock.
func record[T any](r *recorder, list func(*recorded) *[]T, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := list(&r.r)
	*l = append(*l, v)
}

func (r *recorder) Fetched(_ context.Context, i worker.FetchInfo) {
	record(r, func(s *recorded) *[]worker.FetchInfo { return &s.fetched }, i)
}

func (r *recorder) Handled(_ context.Context, i worker.HandleInfo) {
	record(r, func(s *recorded) *[]worker.HandleInfo { return &s.handled }, i)
}

func (r *recorder) Acked(_ context.Context, i worker.AckInfo) {
	record(r, func(s *recorded) *[]worker.AckInfo { return &s.acked }, i)
}

func (r *recorder) Retried(_ context.Context, i worker.RetryInfo) {
	record(r, func(s *recorded) *[]worker.RetryInfo { return &s.retried }, i)
}

func (r *recorder) DeadLettered(_ context.Context, i worker.DeadLetterInfo) {
	record(r, func(s *recorded) *[]worker.DeadLetterInfo { return &s.deadLettered }, i)
}

func (r *recorder) Redelivered(_ context.Context, i worker.RedeliveryInfo) {
	record(r, func(s *recorded) *[]worker.RedeliveryInfo { return &s.redelivered }, i)
}

func (r *recorder) Renewed(_ context.Context, i worker.RenewInfo) {
	record(r, func(s *recorded) *[]worker.RenewInfo { return &s.renewed }, i)
}

func (r *recorder) LeaseLost(_ context.Context, i worker.LeaseLostInfo) {
	record(r, func(s *recorded) *[]worker.LeaseLostInfo { return &s.leaseLost }, i)
}

func (r *recorder) SettleFailed(_ context.Context, i worker.SettleErrorInfo) {
	record(r, func(s *recorded) *[]worker.SettleErrorInfo { return &s.settleFailed }, i)
}

// snapshot returns a copy of what the recorder was told.
func (r *recorder) snapshot() recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorded{
		fetched:      slices.Clone(r.r.fetched),
		handled:      slices.Clone(r.r.handled),
		acked:        slices.Clone(r.r.acked),
		retried:      slices.Clone(r.r.retried),
		deadLettered: slices.Clone(r.r.deadLettered),
		redelivered:  slices.Clone(r.r.redelivered),
		renewed:      slices.Clone(r.r.renewed),
		leaseLost:    slices.Clone(r.r.leaseLost),
		settleFailed: slices.Clone(r.r.settleFailed),
	}
}

// waitFor waits until cond holds for what the recorder was told, and
// returns that. It fails only when the recorder is told nothing new for
// waitTimeout: a loaded machine that is slow but moving is given the
// time it needs, a stalled one is not.
func (r *recorder) waitFor(t testing.TB, what string, cond func(s recorded) bool) recorded {
	t.Helper()
	last, deadline := -1, time.Now()
	for {
		s := r.snapshot()
		if cond(s) {
			return s
		}
		if n := s.count(); n != last {
			last, deadline = n, time.Now().Add(waitTimeout)
		}
		require.False(t, time.Now().After(deadline), "timed out waiting until %s: no progress for %s", what, waitTimeout)
		time.Sleep(5 * time.Millisecond)
	}
}

// outcomesCases checks what each handler outcome does to the event.
func outcomesCases(t *testing.T, open Opener) {
	t.Run("nil acks the event", func(t *testing.T) {
		bd := setup(t, open, 5)
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
		bd := setup(t, open, 5)
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
		bd := setup(t, open, 2)
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
		bd := setup(t, open, 5)
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
		bd := setup(t, open, 5)
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
		bd := setup(t, open, 2)
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
}

// leasesCases checks the worker's hold on its leases: renewal, and what a
// lost lease does to its handler.
func leasesCases(t *testing.T, open Opener) {
	t.Run("renewal keeps a slow handler's lease", func(t *testing.T) {
		bd := setup(t, open, 5)
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
		bd := setup(t, open, 5)
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
}
