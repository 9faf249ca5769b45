package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/rheotest"
	"github.com/rheo-go/rheo/worker"
)

// leaseIDs returns n distinct uuid-shaped lease ids, the same on every run.
func leaseIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i*2654435761%(1<<32), i%0x10000, i%0x1000, (i*7)%0x1000, i*104729)
	}
	return ids
}

func TestDefaultRetryPolicy(t *testing.T) {
	t.Parallel()
	ids := leaseIDs(500)

	t.Run("the delay doubles from 1s to a cap of 5 minutes, with ±20% jitter", func(t *testing.T) {
		for _, tc := range []struct {
			attempt int
			nominal time.Duration
		}{
			{0, time.Second}, // below 1 counts as 1
			{1, time.Second},
			{2, 2 * time.Second},
			{3, 4 * time.Second},
			{4, 8 * time.Second},
			{5, 16 * time.Second},
			{6, 32 * time.Second},
			{7, 64 * time.Second},
			{8, 128 * time.Second},
			{9, 256 * time.Second},
			{10, 5 * time.Minute},
			{11, 5 * time.Minute},
			{25, 5 * time.Minute},
			{math.MaxInt32, 5 * time.Minute},
		} {
			for _, id := range ids {
				got := worker.DefaultRetryPolicy(rheo.Lease{LeaseID: id, Attempt: tc.attempt}, errors.New("down"))
				workertest.AssertJittered(t, tc.nominal, got, "attempt %d, lease %s", tc.attempt, id)
			}
		}
	})

	t.Run("the same lease always gets the same delay, whatever the error", func(t *testing.T) {
		for _, id := range ids[:20] {
			l := rheo.Lease{LeaseID: id, Attempt: 3}
			first := worker.DefaultRetryPolicy(l, errors.New("a"))
			assert.Equal(t, first, worker.DefaultRetryPolicy(l, errors.New("b")))
			assert.Equal(t, first, worker.DefaultRetryPolicy(l, &worker.PanicError{Value: "kaboom"}))
			assert.Equal(t, first, worker.DefaultRetryPolicy(l, nil))
		}
	})

	t.Run("distinct leases spread over the whole jitter range", func(t *testing.T) {
		var lowest, highest, sum time.Duration
		var quarters [4]int // of [800ms, 1200ms)
		for i, id := range ids {
			d := worker.DefaultRetryPolicy(rheo.Lease{LeaseID: id, Attempt: 1}, nil)
			if i == 0 || d < lowest {
				lowest = d
			}
			highest = max(highest, d)
			sum += d
			quarters[min((d-800*time.Millisecond)/(100*time.Millisecond), 3)]++
		}
		assert.Less(t, lowest, 820*time.Millisecond, "some leases come back early")
		assert.Greater(t, highest, 1180*time.Millisecond, "some leases come back late")
		assert.InDelta(t, float64(time.Second), float64(sum)/float64(len(ids)), float64(20*time.Millisecond), "centred on the nominal delay")
		for i, n := range quarters {
			assert.InDelta(t, len(ids)/4, n, float64(len(ids))/10, "leases in quarter %d of the range: leases that failed together do not come back together", i+1)
		}
	})
}

// expectDue checks that the event the worker has just retried is claimable
// again exactly delay later: a fetch 1ms before then claims nothing, and
// the fetch at that time hands it to the handler. The worker must poll
// every millisecond of the fake clock (pollEveryMillisecond), so that each
// advance fires one fetch.
func (bd *bundle) expectDue(t *testing.T, delay time.Duration) {
	t.Helper()
	due := bd.clock.Now().Add(delay)
	s := bd.rec.Snapshot()
	fetches, handled := len(s.Fetched), len(s.Handled)

	bd.clock.Advance(delay - time.Millisecond)
	s = bd.rec.WaitFor(t, "a fetch 1ms before the event is due", func(s recorded) bool { return len(s.Fetched) > fetches })
	assert.Zero(t, s.Fetched[fetches].Count, "1ms before it is due the event is not claimable")
	eventually(t, "the next poll is set", func() bool { return bd.clock.Armed(due) })
	assert.Len(t, bd.rec.Snapshot().Handled, handled, "no delivery before the event is due")

	bd.clock.Advance(time.Millisecond)
	s = bd.rec.WaitFor(t, "the delivery when the event is due", func(s recorded) bool { return len(s.Handled) > handled })
	assert.WithinDuration(t, due, s.Handled[handled].Lease.LeasedAt, 0, "leased again at the due time")
}

// pollEveryMillisecond makes cfg poll at every millisecond of the fake
// clock.
func pollEveryMillisecond(cfg *worker.Config) *worker.Config {
	cfg.PollInterval = time.Millisecond
	return cfg
}

func TestWorkerRetryBackoff(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("a failing handler backs off by the schedule and is dead-lettered once its attempts are used up", func(t *testing.T) {
			bd := setup(t, b, 5)
			faulty := newFaultyDriver(bd.drv)
			appendN(t, bd.drv, bd.stream, 1)
			start := bd.clock.Now()
			workertest.StartWorker(t, faulty, pollEveryMillisecond(bd.config(func(ctx context.Context, l rheo.Lease) error {
				return errors.New("downstream down")
			})))

			nominal := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
			var waited time.Duration
			for i, step := range nominal {
				attempt := i + 1
				s := bd.rec.WaitFor(t, fmt.Sprintf("retry %d", attempt), func(s recorded) bool { return len(s.Retried) == attempt })
				r := s.Retried[i]
				assert.Equal(t, attempt, r.Lease.Attempt)
				assert.Equal(t, "downstream down", r.Reason)
				workertest.AssertJittered(t, step, r.Delay, "after attempt %d", attempt)
				assert.Equal(t, worker.DefaultRetryPolicy(r.Lease, nil), r.Delay)
				calls := faulty.retryCalls()
				require.Len(t, calls, attempt)
				assert.Equal(t, r.Delay, calls[i].Delay, "the delay the worker passed to the driver")
				assert.Equal(t, "downstream down", calls[i].Reason)
				assert.Empty(t, workertest.DeadLetters(t, bd.drv, bd.stream, bd.group), "not dead-lettered while attempts remain")
				info := bd.info(t)
				assert.Equal(t, int64(1), info.PendingRetry)
				assert.Equal(t, int64(0), info.InFlight)

				bd.expectDue(t, r.Delay)
				waited += r.Delay
			}

			// Attempt 5 is the group's last: its failure dead-letters.
			s := bd.rec.WaitFor(t, "the dead letter", func(s recorded) bool { return len(s.DeadLettered) == 1 })
			assert.Len(t, s.Retried, 4)
			assert.Len(t, s.Handled, 5)
			assert.Equal(t, "downstream down", s.DeadLettered[0].Reason)
			dls := workertest.DeadLetters(t, bd.drv, bd.stream, bd.group)
			require.Len(t, dls, 1)
			assert.Equal(t, "downstream down", dls[0].Reason)
			assert.Equal(t, 5, dls[0].Attempt)
			assert.Equal(t, bd.clock.Now(), start.Add(waited), "the clock moved only by the delays")
			assert.GreaterOrEqual(t, waited, 12*time.Second, "at least 80% of 1+2+4+8s")
			assert.Equal(t, int64(0), bd.info(t).Lag)
			assert.Empty(t, s.SettleFailed)
		})

		t.Run("a panic backs off by the same schedule", func(t *testing.T) {
			bd := setup(t, b, 3)
			faulty := newFaultyDriver(bd.drv)
			appendN(t, bd.drv, bd.stream, 1)
			workertest.StartWorker(t, faulty, pollEveryMillisecond(bd.config(func(ctx context.Context, l rheo.Lease) error {
				panic("kaboom")
			})))

			for i, step := range []time.Duration{time.Second, 2 * time.Second} {
				s := bd.rec.WaitFor(t, fmt.Sprintf("retry %d", i+1), func(s recorded) bool { return len(s.Retried) == i+1 })
				assert.Equal(t, "panic: kaboom", s.Retried[i].Reason)
				workertest.AssertJittered(t, step, s.Retried[i].Delay, "after attempt %d", i+1)
				assert.Equal(t, worker.DefaultRetryPolicy(s.Retried[i].Lease, nil), s.Retried[i].Delay)
				bd.expectDue(t, s.Retried[i].Delay)
			}
			bd.rec.WaitFor(t, "the dead letter", func(s recorded) bool { return len(s.DeadLettered) == 1 })
			dls := workertest.DeadLetters(t, bd.drv, bd.stream, bd.group)
			require.Len(t, dls, 1)
			assert.Equal(t, "panic: kaboom", dls[0].Reason)
			assert.Equal(t, 3, dls[0].Attempt)
		})

		t.Run("RetryPolicy replaces the default schedule", func(t *testing.T) {
			bd := setup(t, b, 3)
			faulty := newFaultyDriver(bd.drv)
			appendN(t, bd.drv, bd.stream, 1)
			var mu sync.Mutex
			var asked []string
			cfg := pollEveryMillisecond(bd.config(func(ctx context.Context, l rheo.Lease) error {
				return fmt.Errorf("down at attempt %d", l.Attempt)
			}))
			cfg.RetryPolicy = func(l rheo.Lease, err error) time.Duration {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, fmt.Sprintf("%d: %v", l.Attempt, err))
				return time.Duration(l.Attempt) * 3 * time.Second
			}
			workertest.StartWorker(t, faulty, cfg)

			for i, want := range []time.Duration{3 * time.Second, 6 * time.Second} {
				s := bd.rec.WaitFor(t, fmt.Sprintf("retry %d", i+1), func(s recorded) bool { return len(s.Retried) == i+1 })
				assert.Equal(t, want, s.Retried[i].Delay)
				assert.Equal(t, want, faulty.retryCalls()[i].Delay)
				bd.expectDue(t, want)
			}
			bd.rec.WaitFor(t, "the dead letter", func(s recorded) bool { return len(s.DeadLettered) == 1 })
			dls := workertest.DeadLetters(t, bd.drv, bd.stream, bd.group)
			require.Len(t, dls, 1)
			assert.Equal(t, "down at attempt 3", dls[0].Reason)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{"1: down at attempt 1", "2: down at attempt 2", "3: down at attempt 3"}, asked,
				"the policy is given each failed lease and its error")
		})

		t.Run("Retry keeps its own delay over RetryPolicy", func(t *testing.T) {
			bd := setup(t, b, 5)
			faulty := newFaultyDriver(bd.drv)
			appendN(t, bd.drv, bd.stream, 1)
			cfg := pollEveryMillisecond(bd.config(func(ctx context.Context, l rheo.Lease) error {
				if l.Attempt == 1 {
					return fmt.Errorf("wrapped: %w", worker.Retry(2*time.Second, errors.New("later")))
				}
				return nil
			}))
			var policyCalls atomic.Int32
			cfg.RetryPolicy = func(rheo.Lease, error) time.Duration {
				policyCalls.Add(1)
				return time.Hour
			}
			workertest.StartWorker(t, faulty, cfg)

			s := bd.rec.WaitFor(t, "the retry", func(s recorded) bool { return len(s.Retried) == 1 })
			assert.Equal(t, 2*time.Second, s.Retried[0].Delay)
			assert.Equal(t, 2*time.Second, faulty.retryCalls()[0].Delay)
			bd.expectDue(t, 2*time.Second)
			bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
			assert.Zero(t, policyCalls.Load())
		})

		t.Run("a negative delay from RetryPolicy retries at once", func(t *testing.T) {
			bd := setup(t, b, 5)
			faulty := newFaultyDriver(bd.drv)
			appendN(t, bd.drv, bd.stream, 1)
			cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
				if l.Attempt == 1 {
					return errors.New("flaky")
				}
				return nil
			})
			cfg.RetryPolicy = func(rheo.Lease, error) time.Duration { return -time.Second }
			workertest.StartWorker(t, faulty, cfg)

			// No clock advance: "at once" must not wait for a poll.
			s := bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
			require.Len(t, s.Retried, 1)
			assert.Equal(t, time.Duration(0), s.Retried[0].Delay)
			assert.Equal(t, time.Duration(0), faulty.retryCalls()[0].Delay)
			assert.Equal(t, 2, s.Acked[0].Lease.Attempt)
		})

		t.Run("a delay beyond the drivers' limit counts as the limit", func(t *testing.T) {
			bd := setup(t, b, 5)
			faulty := newFaultyDriver(bd.drv)
			appendN(t, bd.drv, bd.stream, 1)
			cfg := bd.config(func(ctx context.Context, l rheo.Lease) error { return errors.New("down") })
			cfg.RetryPolicy = func(rheo.Lease, error) time.Duration { return 1000 * time.Hour }
			workertest.StartWorker(t, faulty, cfg)

			s := bd.rec.WaitFor(t, "the retry", func(s recorded) bool { return len(s.Retried) == 1 })
			assert.Equal(t, math.MaxInt32*time.Millisecond, s.Retried[0].Delay)
			assert.Empty(t, s.SettleFailed, "the driver accepted the delay")
			info := bd.info(t)
			assert.Equal(t, int64(1), info.PendingRetry)
			assert.Equal(t, int64(0), info.InFlight)
		})
	})
}

func TestWorkerBacksOffThroughFaults(t *testing.T) {
	t.Parallel()
	const events = 60
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		// Flaky handlers and failed settles lose nothing and settle nothing stale.
		clock := rheotest.NewClock(time.Time{})
		drv := b.Open(t, clock)
		stream, group := newStream(t, drv, 2, 5)
		appended := appendSpread(t, drv, stream, events)
		faulty := newFaultyDriver(drv)
		unavailable := rheo.Errorf(rheo.ErrBackendUnavailable, "connection refused")
		for _, n := range []int{2, 5, 9} {
			faulty.failOn("retry", n, unavailable) // left to expire
		}
		faulty.failOn("ack_batch", 2, &rheo.AmbiguousError{Op: "ack_batch", Err: errors.New("connection lost")})
		faulty.failOn("fetch", 3, unavailable)

		rec := &recorder{}
		var mu sync.Mutex
		handled, succeeded := map[string]int{}, map[string]int{}
		workertest.StartWorker(t, faulty, &worker.Config{
			Stream: stream, Group: group, Concurrency: 4, LeaseDuration: leaseDuration,
			Clock: clock, Hooks: []any{rec},
			Handler: func(ctx context.Context, l rheo.Lease) error {
				mu.Lock()
				defer mu.Unlock()
				handled[l.Event.ID]++
				// Every third event fails its first two handlings: a
				// downstream that comes back.
				if l.Event.Sequence%3 == 0 && handled[l.Event.ID] <= 2 {
					return errors.New("downstream down")
				}
				succeeded[l.Event.ID]++
				return nil
			},
		})

		// Retries wait for their back-off and failed settles for their
		// lease to expire: move the clock on whenever nothing happens.
		last := -1
		progressing(t, "every event is terminal", func() (int, bool) {
			if groupInfo(t, drv, stream, group).Lag == 0 {
				return 0, true
			}
			n := len(rec.Snapshot().Handled)
			if n == last {
				clock.Advance(time.Second)
			}
			last = n
			time.Sleep(20 * time.Millisecond)
			return n, false
		})

		mu.Lock()
		defer mu.Unlock()
		for _, e := range appended {
			assert.GreaterOrEqual(t, succeeded[e.ID], 1, "event %s was handled successfully", e.ID)
		}
		assert.Empty(t, workertest.DeadLetters(t, drv, stream, group), "the back-off outlasted the failures")
		s := rec.Snapshot()
		require.NotEmpty(t, s.Retried)
		for _, r := range s.Retried {
			workertest.AssertJittered(t, time.Second<<(r.Lease.Attempt-1), r.Delay, "the retry of attempt %d", r.Lease.Attempt)
		}
		failed := map[string]int{}
		for _, f := range s.SettleFailed {
			assert.NotErrorIs(t, f.Err, rheo.ErrStaleLease, "no settle of a lease someone else holds (%s)", f.Op)
			assert.Equal(t, worker.ActionLeftToExpire, f.Action)
			failed[f.Op]++
		}
		assert.Equal(t, 3, failed["retry"], "the injected retry failures")
		assert.GreaterOrEqual(t, failed["ack"], 1, "the leases of the failed ack batch")
	})
}
