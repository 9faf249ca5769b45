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
// from clock (nil: the real time); the driver is closed when t ends. Every
// case opens its own driver and works on a stream of its own, named
// apart from those of other runs on the same database.
type Opener func(t *testing.T, clock driver.Clock) driver.Driver

// Run runs every case as a subtest of t: "outcomes" (what nil, Retry,
// Reject, an error and a panic do), "leases" (renewal, a lost lease),
// "lifecycle" (Stop, StopAndCancel, Start's checks, Partitions, a
// wakeup), "typed" (worker.Typed) and "ordered" (groups ordered by key
// and by partition).
func Run(t *testing.T, open Opener) {
	t.Run("outcomes", func(t *testing.T) { outcomesCases(t, open) })
	t.Run("leases", func(t *testing.T) { leasesCases(t, open) })
	t.Run("lifecycle", func(t *testing.T) { lifecycleCases(t, open) })
	t.Run("typed", func(t *testing.T) { typedCases(t, open) })
	t.Run("ordered", func(t *testing.T) { orderedCases(t, open) })
}

// WaitTimeout bounds every wait for something that must happen, counted
// from the last progress a Recorder saw.
const WaitTimeout = 30 * time.Second

// leaseDuration is the lease of the cases, on the fake clock.
const leaseDuration = 10 * time.Second

// bundle is what a case works with.
type bundle struct {
	drv    driver.Driver
	clock  *rheotest.Clock
	rec    *Recorder
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
	return &bundle{drv: drv, clock: clock, rec: &Recorder{}, stream: stream, group: group}
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

// outcomesCases checks what each handler outcome does to the event.
func outcomesCases(t *testing.T, open Opener) {
	t.Run("nil acks the event", func(t *testing.T) {
		bd := setup(t, open, 5)
		appendN(t, bd.drv, bd.stream, 3)
		StartWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))

		s := bd.rec.WaitFor(t, "3 acks", func(s Recorded) bool { return len(s.Acked) == 3 })
		for _, h := range s.Handled {
			assert.Equal(t, worker.OutcomeAck, h.Outcome)
			assert.NoError(t, h.Err)
		}
		assert.Equal(t, int64(0), bd.info(t).Lag)
	})

	t.Run("Retry makes the event claimable again after its delay", func(t *testing.T) {
		bd := setup(t, open, 5)
		appendN(t, bd.drv, bd.stream, 1)
		StartWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
			if l.Attempt == 1 {
				return worker.Retry(5*time.Second, errors.New("later"))
			}
			return nil
		}))

		s := bd.rec.WaitFor(t, "a retry", func(s Recorded) bool { return len(s.Retried) == 1 })
		assert.Equal(t, 5*time.Second, s.Retried[0].Delay)
		assert.Equal(t, "later", s.Retried[0].Reason)
		info := bd.info(t)
		assert.Equal(t, int64(1), info.PendingRetry)
		assert.Equal(t, int64(0), info.InFlight)

		bd.clock.Advance(5 * time.Second)
		s = bd.rec.WaitFor(t, "the ack", func(s Recorded) bool { return len(s.Acked) == 1 })
		require.Len(t, s.Redelivered, 1)
		assert.Equal(t, 2, s.Redelivered[0].Lease.Attempt)
		assert.Equal(t, int64(0), bd.info(t).Lag)
	})

	t.Run("Retry dead-letters at the attempt limit", func(t *testing.T) {
		bd := setup(t, open, 2)
		appendN(t, bd.drv, bd.stream, 1)
		StartWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
			return worker.Retry(0, errors.New("nope"))
		}))

		s := bd.rec.WaitFor(t, "a dead letter", func(s Recorded) bool { return len(s.DeadLettered) == 1 })
		assert.Len(t, s.Retried, 1)
		dls := DeadLetters(t, bd.drv, bd.stream, bd.group)
		require.Len(t, dls, 1)
		assert.Equal(t, "nope", dls[0].Reason)
		assert.Equal(t, 2, dls[0].Attempt)
	})

	t.Run("Reject dead-letters the event at once", func(t *testing.T) {
		bd := setup(t, open, 5)
		appendN(t, bd.drv, bd.stream, 1)
		StartWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
			return worker.Reject(errors.New("poison"))
		}))

		s := bd.rec.WaitFor(t, "a dead letter", func(s Recorded) bool { return len(s.DeadLettered) == 1 })
		assert.Empty(t, s.Retried)
		assert.Equal(t, worker.OutcomeReject, s.Handled[0].Outcome)
		dls := DeadLetters(t, bd.drv, bd.stream, bd.group)
		require.Len(t, dls, 1)
		assert.Equal(t, "poison", dls[0].Reason)
		assert.Equal(t, 1, dls[0].Attempt)
		assert.Equal(t, int64(0), bd.info(t).Lag)
	})

	t.Run("any other error is retried after the retry policy's delay, with the error as the reason", func(t *testing.T) {
		bd := setup(t, open, 5)
		appendN(t, bd.drv, bd.stream, 1)
		StartWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
			if l.Attempt == 1 {
				return errors.New("flaky")
			}
			return nil
		}))

		s := bd.rec.WaitFor(t, "the retry", func(s Recorded) bool { return len(s.Retried) == 1 })
		assert.Equal(t, "flaky", s.Retried[0].Reason)
		AssertJittered(t, time.Second, s.Retried[0].Delay, "the first back-off")
		assert.Equal(t, worker.DefaultRetryPolicy(s.Retried[0].Lease, nil), s.Retried[0].Delay)
		assert.Equal(t, worker.OutcomeRetry, s.Handled[0].Outcome)
		assert.Equal(t, int64(1), bd.info(t).PendingRetry)

		bd.clock.Advance(2 * time.Second) // past the delay and the poll
		s = bd.rec.WaitFor(t, "the ack", func(s Recorded) bool { return len(s.Acked) == 1 })
		assert.Equal(t, 2, s.Acked[0].Lease.Attempt)
	})

	t.Run("a panic is recovered and retried with the panic as the reason", func(t *testing.T) {
		bd := setup(t, open, 2)
		appendN(t, bd.drv, bd.stream, 2)
		StartWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
			if PayloadN(t, l) == 0 {
				panic("kaboom")
			}
			return nil
		}))

		s := bd.rec.WaitFor(t, "the retry and the other event's ack", func(s Recorded) bool {
			return len(s.Retried) == 1 && len(s.Acked) == 1
		})
		assert.Equal(t, "panic: kaboom", s.Retried[0].Reason)
		assert.Equal(t, worker.DefaultRetryPolicy(s.Retried[0].Lease, nil), s.Retried[0].Delay, "panics back off like errors")
		assert.Empty(t, s.DeadLettered)

		bd.clock.Advance(2 * time.Second) // past the delay and the poll
		s = bd.rec.WaitFor(t, "a dead letter", func(s Recorded) bool { return len(s.DeadLettered) == 1 })
		var panics int
		for _, h := range s.Handled {
			var p *worker.PanicError
			if errors.As(h.Err, &p) {
				panics++
				assert.Equal(t, "kaboom", p.Value)
				assert.NotEmpty(t, p.Stack)
				assert.Equal(t, worker.OutcomeRetry, h.Outcome)
			}
		}
		assert.Equal(t, 2, panics)
		dls := DeadLetters(t, bd.drv, bd.stream, bd.group)
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
		StartWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
			close(started)
			<-release
			return nil
		}))
		Receive(t, "the handler", started)

		// 12s of a 10s lease: only renewal keeps it.
		bd.clock.Advance(6 * time.Second)
		bd.rec.WaitFor(t, "a renewal", func(s Recorded) bool { return len(s.Renewed) == 1 })
		bd.clock.Advance(6 * time.Second)
		s := bd.rec.WaitFor(t, "a second renewal", func(s Recorded) bool { return len(s.Renewed) == 2 })
		for _, r := range s.Renewed {
			assert.NoError(t, r.Err)
		}
		assert.WithinDuration(t, bd.clock.Now().Add(leaseDuration), s.Renewed[1].ExpiresAt, 0)
		assert.Equal(t, int64(1), bd.info(t).InFlight)

		close(release)
		s = bd.rec.WaitFor(t, "the ack", func(s Recorded) bool { return len(s.Acked) == 1 })
		assert.Empty(t, s.Redelivered)
		assert.Empty(t, s.LeaseLost)
		assert.Equal(t, int64(0), bd.info(t).Lag)
	})

	t.Run("a lost lease cancels the handler and its outcome is discarded", func(t *testing.T) {
		bd := setup(t, open, 5)
		appendN(t, bd.drv, bd.stream, 1)
		causes := make(chan error, 1)
		var called atomic.Bool
		StartWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
			if called.Swap(true) {
				return nil
			}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return errors.New("interrupted")
		}))
		bd.rec.WaitFor(t, "the fetch", func(s Recorded) bool { return len(s.Fetched) > 0 && s.Fetched[0].Count == 1 })

		require.NoError(t, bd.drv.ResetGroup(context.Background(), bd.stream, bd.group, &rheo.ResetOptions{Confirm: true}))
		bd.clock.Advance(6 * time.Second)

		cause := Receive(t, "the handler's cancellation", causes)
		assert.ErrorIs(t, cause, rheo.ErrStaleLease)
		s := bd.rec.WaitFor(t, "the discarded outcome", func(s Recorded) bool {
			return len(Outcomes(s, worker.OutcomeDiscarded)) == 1
		})
		assert.Equal(t, "interrupted", Outcomes(s, worker.OutcomeDiscarded)[0].Err.Error())
		require.Len(t, s.LeaseLost, 1)
		assert.ErrorIs(t, s.LeaseLost[0].Err, rheo.ErrStaleLease)
		assert.Empty(t, s.Retried, "a discarded outcome is not settled")
		assert.Empty(t, s.SettleFailed)

		// The reset made the event claimable again; the worker
		// handles it anew.
		bd.clock.Advance(time.Second)
		bd.rec.WaitFor(t, "the ack", func(s Recorded) bool { return len(s.Acked) == 1 })
		assert.Equal(t, int64(0), bd.info(t).Lag)
	})
}

// lifecycleCases checks starting and stopping a worker: Stop and
// StopAndCancel, one worker per stream and group on a driver, Start's
// checks, Partitions, and wakeups.
func lifecycleCases(t *testing.T, open Opener) {
	t.Run("Stop lets running handlers finish, renews them meanwhile and writes their acks", func(t *testing.T) {
		bd := setup(t, open, 5)
		appendN(t, bd.drv, bd.stream, 2)
		started, release := make(chan struct{}, 2), make(chan struct{})
		cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
			started <- struct{}{}
			<-release
			return ctx.Err()
		})
		cfg.Concurrency = 2
		cfg.AckFlushInterval = time.Hour // only the stop writes the acks
		w := StartWorker(t, bd.drv, cfg)
		Receive(t, "the first handler", started)
		Receive(t, "the second handler", started)

		stopped := make(chan error, 1)
		go func() { stopped <- w.Stop(context.Background()) }()
		bd.clock.Advance(6 * time.Second)
		bd.rec.WaitFor(t, "the renewals", func(s Recorded) bool { return len(s.Renewed) == 2 })
		Never(t, bd.clock, "Stop waits while handlers run", time.Second, 3, func() bool { return len(stopped) > 0 })

		close(release)
		require.NoError(t, Receive(t, "Stop", stopped))
		s := bd.rec.Snapshot()
		assert.Len(t, s.Acked, 2)
		assert.Equal(t, int64(0), bd.info(t).Lag, "the acks were written before Stop returned")
		select {
		case <-w.Done():
		default:
			require.FailNow(t, "Done is not closed after Stop")
		}
	})

	t.Run("StopAndCancel cancels the handlers and retries their events", func(t *testing.T) {
		bd := setup(t, open, 5)
		appendN(t, bd.drv, bd.stream, 1)
		started, causes := make(chan struct{}, 1), make(chan error, 1)
		w := StartWorker(t, bd.drv, bd.config(blockingHandler(started, causes)))
		Receive(t, "the handler", started)

		require.NoError(t, w.StopAndCancel(context.Background()))
		assert.ErrorIs(t, Receive(t, "the cause", causes), worker.ErrStopped)
		s := bd.rec.Snapshot()
		require.Len(t, s.Retried, 1)
		assert.Equal(t, time.Duration(0), s.Retried[0].Delay, "a hard stop does not back off")
		info := bd.info(t)
		assert.Equal(t, int64(0), info.InFlight)
		assert.Equal(t, int64(1), info.PendingRetry, "the event is claimable again at once")
		assert.Empty(t, DeadLetters(t, bd.drv, bd.stream, bd.group))
	})

	t.Run("Stop cancels the handlers when its context ends", func(t *testing.T) {
		bd := setup(t, open, 5)
		appendN(t, bd.drv, bd.stream, 1)
		started, causes := make(chan struct{}, 1), make(chan error, 1)
		w := StartWorker(t, bd.drv, bd.config(blockingHandler(started, causes)))
		Receive(t, "the handler", started)

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.ErrorIs(t, w.Stop(ctx), context.Canceled)
		assert.ErrorIs(t, Receive(t, "the cause", causes), worker.ErrStopped)
		Receive(t, "the end of the worker", w.Done())
		s := bd.rec.Snapshot()
		require.Len(t, s.Retried, 1)
		assert.Equal(t, time.Duration(0), s.Retried[0].Delay, "a hard stop does not back off")
	})

	t.Run("a second worker of a stream and group on one driver is refused", func(t *testing.T) {
		bd := setup(t, open, 5)
		require.NoError(t, bd.drv.CreateGroup(context.Background(), bd.stream, "other", nil))
		nop := func(ctx context.Context, l rheo.Lease) error { return nil }
		first := StartWorker(t, bd.drv, bd.config(nop))

		second, err := worker.New(bd.drv, bd.config(nop))
		require.NoError(t, err)
		err = second.Start(context.Background())
		assert.ErrorIs(t, err, rheo.ErrAlreadyExists)
		consumer, err := worker.NewConsumer(bd.drv, &worker.Config{Stream: bd.stream, Group: bd.group})
		require.NoError(t, err)
		assert.ErrorIs(t, consumer.Start(context.Background()), rheo.ErrAlreadyExists)

		otherGroup := bd.config(nop)
		otherGroup.Group = "other"
		StartWorker(t, bd.drv, otherGroup)
		otherDriver := open(t, bd.clock)
		StartWorker(t, otherDriver, bd.config(nop))

		require.NoError(t, first.Stop(context.Background()))
		require.NoError(t, second.Start(context.Background()), "Stop releases the stream and group")
		require.NoError(t, second.Stop(context.Background()))
	})

	t.Run("Start checks the stream, group and partitions", func(t *testing.T) {
		bd := setup(t, open, 5)
		nop := func(ctx context.Context, l rheo.Lease) error { return nil }
		for _, tc := range []struct {
			name   string
			modify func(*worker.Config)
			want   error
		}{
			{"missing stream", func(c *worker.Config) { c.Stream = "missing" }, rheo.ErrStreamNotFound},
			{"missing group", func(c *worker.Config) { c.Group = "missing" }, rheo.ErrGroupNotFound},
			{"partition out of range", func(c *worker.Config) { c.Partitions = []int{3} }, rheo.ErrInvalidPartition},
		} {
			cfg := bd.config(nop)
			tc.modify(cfg)
			w, err := worker.New(bd.drv, cfg)
			require.NoError(t, err)
			assert.ErrorIs(t, w.Start(context.Background()), tc.want, tc.name)
		}

		w, err := worker.New(bd.drv, bd.config(nop))
		require.NoError(t, err)
		require.NoError(t, w.Start(context.Background()))
		assert.ErrorIs(t, w.Start(context.Background()), rheo.ErrInvalidArgument, "a second Start")
		require.NoError(t, w.Stop(context.Background()))
		assert.ErrorIs(t, w.Start(context.Background()), rheo.ErrInvalidArgument, "a Start after Stop")
	})

	t.Run("a worker stopped before it started never starts", func(t *testing.T) {
		bd := setup(t, open, 5)
		w, err := worker.New(bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))
		require.NoError(t, err)
		require.NoError(t, w.Stop(context.Background()))
		Receive(t, "Done", w.Done())
		assert.ErrorIs(t, w.Start(context.Background()), rheo.ErrInvalidArgument)
	})

	t.Run("Partitions limits the worker to its partitions", func(t *testing.T) {
		bd := setup(t, open, 5)
		stream, group := newStream(t, bd.drv, 2, 5)
		for _, p := range []int{0, 1, 0, 1, 1} {
			_, err := bd.drv.Append(context.Background(), stream, []byte(`{}`), &rheo.AppendOptions{Partition: &p})
			require.NoError(t, err)
		}
		cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
			if l.Event.Partition != 1 {
				return worker.Reject(nil)
			}
			return nil
		})
		cfg.Stream, cfg.Group, cfg.Partitions = stream, group, []int{1}
		StartWorker(t, bd.drv, cfg)

		s := bd.rec.WaitFor(t, "3 acks", func(s Recorded) bool { return len(s.Acked) == 3 })
		assert.Empty(t, s.DeadLettered)
		lag, err := bd.drv.Lag(context.Background(), stream, group, nil)
		require.NoError(t, err)
		assert.Equal(t, int64(2), lag.Partitions[0].Lag)
		assert.Equal(t, int64(0), lag.Partitions[1].Lag)
	})

	t.Run("an append wakes the worker long before the poll interval", func(t *testing.T) {
		drv := open(t, nil)
		stream, group := newStream(t, drv, 1, 5)
		rec := &Recorder{}
		handled := make(chan struct{}, 100)
		StartWorker(t, drv, &worker.Config{
			Stream: stream, Group: group, PollInterval: 10 * time.Minute, Hooks: []any{rec},
			Handler: func(ctx context.Context, l rheo.Lease) error {
				handled <- struct{}{}
				return nil
			},
		})
		rec.WaitFor(t, "the first, empty fetch", func(s Recorded) bool { return len(s.Fetched) == 1 })

		// Another client's append can reach the worker only through
		// the database's notifications; SQLite wakes the driver
		// that appended.
		appender := drv
		if drv.Capabilities().Notifications {
			appender = open(t, nil)
		}
		// The listener connects in the background: append again
		// until an event is handled.
		start := time.Now()
		deadline := time.After(WaitTimeout)
		for done := false; !done; {
			appendN(t, appender, stream, 1)
			select {
			case <-handled:
				done = true
			case <-time.After(200 * time.Millisecond):
			case <-deadline:
				require.FailNow(t, "no append woke the worker")
			}
		}
		latency := time.Since(start)
		t.Logf("append to handler: %s", latency)
		assert.Less(t, latency, 10*time.Second)
	})
}

// blockingHandler reports each call on started, then waits for its context
// to end and reports the cause on causes.
func blockingHandler(started chan<- struct{}, causes chan<- error) worker.Handler {
	return func(ctx context.Context, l rheo.Lease) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}
}

// typedCases checks worker.Typed: the payload decoded, and one that does
// not decode dead-lettered at once.
func typedCases(t *testing.T, open Opener) {
	t.Run("Typed decodes the payload and acks on nil", func(t *testing.T) {
		bd := setup(t, open, 5)
		appendN(t, bd.drv, bd.stream, 3)
		got := make(chan int, 3)
		StartWorker(t, bd.drv, bd.config(worker.Typed(func(ctx context.Context, l rheo.Lease, c counted) error {
			got <- c.N
			return nil
		})))
		sum := 0
		for range 3 {
			sum += Receive(t, "a payload", got)
		}
		assert.Equal(t, 0+1+2, sum)
		bd.rec.WaitFor(t, "the acks", func(s Recorded) bool { return len(s.Acked) == 3 })
	})

	t.Run("a payload that does not decode is dead-lettered at once, naming the decode error", func(t *testing.T) {
		bd := setup(t, open, 5)
		ev := appendRaw(t, bd, `{"n": "three"}`)
		called := make(chan struct{}, 1)
		StartWorker(t, bd.drv, bd.config(worker.Typed(func(ctx context.Context, l rheo.Lease, c counted) error {
			called <- struct{}{}
			return nil
		})))
		bd.rec.WaitFor(t, "the dead letter", func(s Recorded) bool { return len(s.DeadLettered) == 1 })
		dls := DeadLetters(t, bd.drv, bd.stream, bd.group)
		require.Len(t, dls, 1)
		assert.Equal(t, ev.ID, dls[0].Event.ID)
		assert.Equal(t, 1, dls[0].Attempt, "no retries")
		assert.Contains(t, dls[0].Reason, "decode payload as workertest.counted: json: cannot unmarshal string")
		assert.Empty(t, called, "the handler never ran")
	})
}

// counted is the payload of appendN's events.
type counted struct {
	N int `json:"n"`
}

// appendRaw appends one event with payload to the bundle's stream.
func appendRaw(t *testing.T, bd *bundle, payload string) rheo.Event {
	t.Helper()
	ev, err := bd.drv.Append(context.Background(), bd.stream, json.RawMessage(payload), nil)
	require.NoError(t, err)
	return ev
}

// orderedCases drains groups ordered by key and by partition
// on a clock that never moves, so that no poll ever fires, and with an
// hour's AckFlushInterval: each ack must be written at once, since the
// key's next event is not claimable before it is, and each settle makes
// that event claimable, which no wakeup announces, so the worker must
// fetch again on its own.
func orderedCases(t *testing.T, open Opener) {
	for _, o := range []rheo.Ordering{rheo.OrderingKey, rheo.OrderingPartition} {
		t.Run(string(o), func(t *testing.T) {
			bd := setup(t, open, 5)
			bd.group = "ordered-" + string(o)
			require.NoError(t, bd.drv.CreateGroup(context.Background(), bd.stream, bd.group,
				&rheo.CreateGroupOptions{Ordering: o}))
			items := make([]rheo.BatchItem, 4)
			for i := range items {
				items[i] = rheo.BatchItem{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), Key: "k"}
			}
			_, err := bd.drv.AppendBatch(context.Background(), bd.stream, items, nil)
			require.NoError(t, err)
			cfg := bd.config(func(context.Context, rheo.Lease) error { return nil })
			cfg.AckFlushInterval = time.Hour
			StartWorker(t, bd.drv, cfg)

			s := bd.rec.WaitFor(t, "4 acks", func(s Recorded) bool { return len(s.Acked) == 4 })
			for i, l := range s.Acked {
				assert.Equal(t, i, PayloadN(t, l.Lease), "in sequence order")
			}
		})
	}
}
