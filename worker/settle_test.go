package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/worker"
)

func TestWorkerSettlePolicy(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("a stale ack is dropped", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			started, release := make(chan struct{}), make(chan struct{})
			var calls atomic.Int32
			workertest.StartWorker(t, bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error {
				if calls.Add(1) == 1 {
					close(started)
					<-release
				}
				return nil
			}))
			workertest.Receive(t, "the handler", started)
			require.NoError(t, bd.drv.ResetGroup(context.Background(), bd.stream, bd.group, &rheo.ResetOptions{Confirm: true}))
			close(release)

			s := bd.rec.WaitFor(t, "the failed ack", func(s recorded) bool { return len(s.SettleFailed) == 1 })
			f := s.SettleFailed[0]
			assert.Equal(t, "ack", f.Op)
			assert.Equal(t, worker.ActionDropped, f.Action)
			assert.ErrorIs(t, f.Err, rheo.ErrStaleLease)
			assert.Empty(t, s.Acked)
			assert.Empty(t, s.Retried)
		})

		for _, tc := range []struct {
			name string
			err  error
		}{
			{"an ack whose outcome is unknown leaves the lease to expire", &rheo.AmbiguousError{Op: "ack_batch", Err: errors.New("connection lost")}},
			{"an ack that cannot reach the database leaves the lease to expire", rheo.Errorf(rheo.ErrBackendUnavailable, "connection refused")},
		} {
			t.Run(tc.name, func(t *testing.T) {
				bd := setup(t, b, 5)
				faulty := newFaultyDriver(bd.drv)
				faulty.failOn("ack_batch", 1, tc.err)
				appendN(t, bd.drv, bd.stream, 1)
				workertest.StartWorker(t, faulty, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))

				s := bd.rec.WaitFor(t, "the failed ack", func(s recorded) bool { return len(s.SettleFailed) == 1 })
				assert.Equal(t, worker.ActionLeftToExpire, s.SettleFailed[0].Action)
				assert.ErrorIs(t, s.SettleFailed[0].Err, tc.err)
				assert.Equal(t, int64(1), bd.info(t).InFlight, "the lease is left as it is")

				bd.clock.Advance(leaseDuration + time.Second)
				s = bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
				assert.Equal(t, 2, s.Acked[0].Lease.Attempt)
				assert.Empty(t, s.Retried)
			})
		}

		t.Run("an ack that definitely failed retries the event at once", func(t *testing.T) {
			bd := setup(t, b, 5)
			faulty := newFaultyDriver(bd.drv)
			failure := &rheo.FailedError{Op: "ack_batch", Err: errors.New("deadlock detected")}
			faulty.failOn("ack_batch", 1, failure)
			appendN(t, bd.drv, bd.stream, 1)
			workertest.StartWorker(t, faulty, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))

			s := bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
			require.Len(t, s.SettleFailed, 1)
			assert.Equal(t, worker.ActionRetried, s.SettleFailed[0].Action)
			require.Len(t, s.Retried, 1)
			assert.Contains(t, s.Retried[0].Reason, "deadlock detected")
			assert.Equal(t, 2, s.Acked[0].Lease.Attempt)
		})

		for _, op := range []string{"retry", "reject"} {
			t.Run("a failed "+op+" leaves the lease to expire", func(t *testing.T) {
				bd := setup(t, b, 5)
				faulty := newFaultyDriver(bd.drv)
				unavailable := rheo.Errorf(rheo.ErrBackendUnavailable, "connection refused")
				faulty.failOn(op, 1, unavailable)
				appendN(t, bd.drv, bd.stream, 1)
				workertest.StartWorker(t, faulty, bd.config(func(ctx context.Context, l rheo.Lease) error {
					if l.Attempt > 1 {
						return nil
					}
					if op == "retry" {
						return errors.New("try again")
					}
					return worker.Reject(errors.New("poison"))
				}))

				s := bd.rec.WaitFor(t, "the failed "+op, func(s recorded) bool { return len(s.SettleFailed) == 1 })
				assert.Equal(t, op, s.SettleFailed[0].Op)
				assert.Equal(t, worker.ActionLeftToExpire, s.SettleFailed[0].Action)
				assert.Equal(t, int64(1), bd.info(t).InFlight)

				bd.clock.Advance(leaseDuration + time.Second)
				s = bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
				assert.Equal(t, 2, s.Acked[0].Lease.Attempt)
				assert.Empty(t, workertest.DeadLetters(t, bd.drv, bd.stream, bd.group))
			})
		}

		t.Run("fetch errors back off, doubling with jitter, and reset on success", func(t *testing.T) {
			bd := setup(t, b, 5)
			faulty := newFaultyDriver(bd.drv)
			unavailable := rheo.Errorf(rheo.ErrBackendUnavailable, "connection refused")
			for _, n := range []int{1, 2, 3, 5} {
				faulty.failOn("fetch", n, unavailable)
			}
			appendN(t, bd.drv, bd.stream, 1)
			workertest.StartWorker(t, faulty, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))

			s := bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
			require.Len(t, s.FetchFailed, 3)
			// ±20% around 100ms, 200ms, 400ms: the ranges do not overlap,
			// so each wait is a step up.
			for i, nominal := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
				workertest.AssertJittered(t, nominal, s.FetchFailed[i].Backoff, "fetch error %d", i+1)
				assert.ErrorIs(t, s.FetchFailed[i].Err, rheo.ErrBackendUnavailable)
			}

			// Fetch 4 succeeded; fetch 5, the next poll, fails afresh.
			bd.clock.Advance(time.Second)
			s = bd.rec.WaitFor(t, "another fetch error", func(s recorded) bool { return len(s.FetchFailed) == 4 })
			workertest.AssertJittered(t, 100*time.Millisecond, s.FetchFailed[3].Backoff, "the fetch error after a success")
			nominal := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 100 * time.Millisecond}
			jittered := false
			for i, f := range s.FetchFailed {
				jittered = jittered || f.Backoff != nominal[i]
			}
			assert.True(t, jittered, "the waits are jittered, not all exactly nominal (odds of that by chance: 1 in 400^4)")
		})
	})
}

func TestWorkerTransactional(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		txConfig := func(bd *bundle, h worker.TxHandler) *worker.Config {
			cfg := bd.config(nil)
			cfg.TxHandler = h
			return cfg
		}
		insert := func(ctx context.Context, tx driver.Tx, l rheo.Lease) error {
			return execTx(ctx, tx, "INSERT INTO side (event_id) VALUES ("+b.Placeholder+")", l.Event.ID)
		}

		t.Run("the handler's writes commit with the ack", func(t *testing.T) {
			bd := setup(t, b, 5)
			createSideTable(t, bd.drv)
			events := appendN(t, bd.drv, bd.stream, 3)
			workertest.StartWorker(t, bd.drv, txConfig(bd, insert))

			bd.rec.WaitFor(t, "3 acks", func(s recorded) bool { return len(s.Acked) == 3 })
			for _, e := range events {
				assert.Equal(t, 1, sideRows(t, b, bd.drv, e.ID))
			}
			assert.Equal(t, int64(0), bd.info(t).Lag)
		})

		for _, tc := range []struct {
			name   string
			fail   func() error // the first attempt's end, after its write
			reason string
		}{
			{"a handler error rolls its writes back and retries", func() error { return errors.New("undo") }, "undo"},
			{"a panic rolls the writes back and retries", func() error { panic("kaboom") }, "panic: kaboom"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				bd := setup(t, b, 5)
				createSideTable(t, bd.drv)
				events := appendN(t, bd.drv, bd.stream, 1)
				workertest.StartWorker(t, bd.drv, txConfig(bd, func(ctx context.Context, tx driver.Tx, l rheo.Lease) error {
					if err := insert(ctx, tx, l); err != nil {
						return err
					}
					if l.Attempt == 1 {
						return tc.fail()
					}
					return nil
				}))

				s := bd.rec.WaitFor(t, "the retry", func(s recorded) bool { return len(s.Retried) == 1 })
				assert.Equal(t, tc.reason, s.Retried[0].Reason)
				assert.Equal(t, worker.DefaultRetryPolicy(s.Retried[0].Lease, nil), s.Retried[0].Delay, "the default back-off")
				assert.Equal(t, 0, sideRows(t, b, bd.drv, events[0].ID), "the first attempt's write rolled back")

				bd.clock.Advance(2 * time.Second) // past the delay and the poll
				bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
				assert.Equal(t, 1, sideRows(t, b, bd.drv, events[0].ID))
			})
		}

		t.Run("a stale ack rolls the handler's writes back", func(t *testing.T) {
			if !concurrentWriters(b) {
				t.Skip("SQLite's transaction holds the only write lock: nothing can take the lease while the handler runs")
			}
			bd := setup(t, b, 5)
			createSideTable(t, bd.drv)
			events := appendN(t, bd.drv, bd.stream, 1)
			started, release := make(chan struct{}), make(chan struct{})
			workertest.StartWorker(t, bd.drv, txConfig(bd, func(ctx context.Context, tx driver.Tx, l rheo.Lease) error {
				if err := insert(ctx, tx, l); err != nil {
					return err
				}
				if l.Attempt == 1 {
					close(started)
					<-release
				}
				return nil
			}))
			workertest.Receive(t, "the handler", started)
			require.NoError(t, bd.drv.ResetGroup(context.Background(), bd.stream, bd.group, &rheo.ResetOptions{Confirm: true}))
			close(release)

			s := bd.rec.WaitFor(t, "the failed ack", func(s recorded) bool { return len(s.SettleFailed) == 1 })
			assert.Equal(t, worker.ActionDropped, s.SettleFailed[0].Action)
			assert.ErrorIs(t, s.SettleFailed[0].Err, rheo.ErrStaleLease)
			assert.Empty(t, s.Acked)
			assert.Equal(t, 0, sideRows(t, b, bd.drv, events[0].ID), "the write rolled back with the ack")
		})

		t.Run("a lease lost while the handler runs rolls its writes back", func(t *testing.T) {
			if !concurrentWriters(b) {
				t.Skip("SQLite's transaction holds the only write lock: nothing can take the lease while the handler runs")
			}
			bd := setup(t, b, 5)
			createSideTable(t, bd.drv)
			events := appendN(t, bd.drv, bd.stream, 1)
			started, release := make(chan struct{}), make(chan struct{})
			var calls atomic.Int32
			workertest.StartWorker(t, bd.drv, txConfig(bd, func(ctx context.Context, tx driver.Tx, l rheo.Lease) error {
				if err := insert(ctx, tx, l); err != nil {
					return err
				}
				if calls.Add(1) == 1 {
					close(started)
					<-release // ignores ctx, and reports success
				}
				return nil
			}))
			workertest.Receive(t, "the handler", started)
			require.NoError(t, bd.drv.ResetGroup(context.Background(), bd.stream, bd.group, &rheo.ResetOptions{Confirm: true}))
			bd.clock.Advance(6 * time.Second)
			bd.rec.WaitFor(t, "the lost lease", func(s recorded) bool { return len(s.LeaseLost) == 1 })
			close(release)

			// The reset made the event claimable again, and the poll
			// that the advance fired delivers it anew.
			s := bd.rec.WaitFor(t, "the discarded outcome and the new delivery's ack", func(s recorded) bool {
				return len(workertest.Outcomes(s, worker.OutcomeDiscarded)) == 1 && len(s.Acked) == 1
			})
			assert.Empty(t, s.SettleFailed)
			assert.Equal(t, 1, sideRows(t, b, bd.drv, events[0].ID), "the lost delivery's write rolled back")
		})
	})
}

// concurrentWriters reports whether the backend lets a second connection
// change a lease while a transaction is open (PostgreSQL does, SQLite does
// not).
func concurrentWriters(b *testbackend.Backend) bool { return b.Name == "postgres" }
