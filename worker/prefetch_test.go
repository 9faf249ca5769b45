package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/worker"
)

// blocking is a handler that reports each lease it starts on started
// and returns once release is closed.
type blocking struct {
	started chan rheo.Lease
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{started: make(chan rheo.Lease, 100), release: make(chan struct{})}
}

func (b *blocking) handle(_ context.Context, l rheo.Lease) error {
	b.started <- l
	<-b.release
	return nil
}

// fetchedCount is how many leases the recorded fetches returned.
func fetchedCount(s recorded) int {
	n := 0
	for _, f := range s.Fetched {
		n += f.Count
	}
	return n
}

func TestPrefetch(t *testing.T) {
	t.Parallel()
	const concurrency, maxDemand = 2, 4
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("leases are queued up to MaxDemand, renewed while queued, and given back on stop", func(t *testing.T) {
			bd := setup(t, b, 5)
			events := appendN(t, bd.drv, bd.stream, 10)
			h := newBlocking()
			cfg := bd.config(h.handle)
			cfg.Concurrency, cfg.MaxDemand = concurrency, maxDemand
			w := workertest.StartWorker(t, bd.drv, cfg)

			running := map[string]bool{}
			for range concurrency {
				running[workertest.Receive(t, "a handler start", h.started).LeaseID] = true
			}
			s := bd.rec.WaitFor(t, "MaxDemand leases fetched", func(s recorded) bool { return fetchedCount(s) >= maxDemand })
			assert.Equal(t, maxDemand, fetchedCount(s), "the queue is bounded by MaxDemand")

			// Twice past half the lease: every lease held is renewed each
			// time, the queued ones too, so none expires unhandled.
			for round := 1; round <= 2; round++ {
				bd.clock.Advance(leaseDuration/2 + time.Second)
				bd.rec.WaitFor(t, "the renewals", func(s recorded) bool { return len(s.Renewed) >= round*maxDemand })
			}
			renewed := map[string]int{}
			for _, r := range bd.rec.Snapshot().Renewed {
				require.NoError(t, r.Err)
				renewed[r.Lease.LeaseID]++
			}
			require.Len(t, renewed, maxDemand, "the running and the queued leases are renewed")
			var queued []string
			for id, n := range renewed {
				assert.Equal(t, 2, n, "lease %s renewed once per half lease", id)
				if !running[id] {
					queued = append(queued, id)
				}
			}
			require.Len(t, queued, maxDemand-concurrency)
			workertest.Never(t, bd.clock, "no fetch while MaxDemand leases are held", cfg.PollInterval, 4, func() bool {
				return fetchedCount(bd.rec.Snapshot()) != maxDemand
			})

			// Past the first leases' expiry, another consumer finds only the
			// events the worker does not hold.
			other, err := bd.drv.Fetch(context.Background(), bd.stream, bd.group, &rheo.FetchOptions{MaxCount: 10})
			require.NoError(t, err)
			assert.Len(t, other, len(events)-maxDemand)
			for _, l := range other {
				_, held := renewed[l.LeaseID]
				assert.False(t, held)
				assert.Equal(t, 1, l.Attempt)
				require.NoError(t, bd.drv.Ack(context.Background(), l.LeaseID))
			}

			// A stop gives the queued leases back at once, while the running
			// handlers are still waited for.
			stopped := make(chan error, 1)
			go func() { stopped <- w.Stop(context.Background()) }()
			s = bd.rec.WaitFor(t, "the queued leases given back", func(s recorded) bool { return len(s.Retried) == len(queued) })
			for _, r := range s.Retried {
				assert.Contains(t, queued, r.Lease.LeaseID)
				assert.Zero(t, r.Delay)
				assert.Equal(t, "not processed: the worker stopped", r.Reason)
			}
			close(h.release)
			require.NoError(t, workertest.Receive(t, "the stop", stopped))
			s = bd.rec.Snapshot()
			assert.Len(t, s.Handled, concurrency, "queued leases are not handled after a stop")
			assert.Len(t, s.Acked, concurrency)

			again, err := bd.drv.Fetch(context.Background(), bd.stream, bd.group, &rheo.FetchOptions{MaxCount: 10})
			require.NoError(t, err)
			require.Len(t, again, len(queued), "the given-back events are claimable again")
			for _, l := range again {
				assert.Equal(t, 2, l.Attempt)
			}
			assert.Empty(t, workertest.DeadLetters(t, bd.drv, bd.stream, bd.group))
		})

		t.Run("a queued lease that renewal finds lost is not handled", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 2)
			h := newBlocking()
			cfg := bd.config(h.handle)
			cfg.Concurrency, cfg.MaxDemand = 1, 2
			workertest.StartWorker(t, bd.drv, cfg)
			first := workertest.Receive(t, "the first handler", h.started)
			bd.rec.WaitFor(t, "both leases fetched", func(s recorded) bool { return fetchedCount(s) == 2 })

			// The replay makes both leases stale; renewal finds out.
			from := int64(0)
			_, err := bd.drv.Replay(context.Background(), bd.stream, bd.group, &rheo.ReplayOptions{FromSequence: &from})
			require.NoError(t, err)
			bd.clock.Advance(leaseDuration/2 + time.Second)
			s := bd.rec.WaitFor(t, "both leases lost", func(s recorded) bool { return len(s.LeaseLost) == 2 })
			lost := map[string]bool{}
			for _, l := range s.LeaseLost {
				lost[l.Lease.LeaseID] = true
			}
			require.True(t, lost[first.LeaseID])

			close(h.release)
			// The replayed events come back under new leases and are handled.
			bd.rec.WaitFor(t, "the replayed events acked", func(s recorded) bool { return len(s.Acked) == 2 })
			s = bd.rec.Snapshot()
			for _, x := range s.Handled {
				if x.Lease.LeaseID == first.LeaseID {
					assert.Equal(t, worker.OutcomeDiscarded, x.Outcome)
					continue
				}
				assert.False(t, lost[x.Lease.LeaseID], "the lost queued lease %s was not handled", x.Lease.LeaseID)
			}
			assert.Len(t, s.Handled, 3, "the first lease's handler, and the two replayed events")
		})
	})
}

func TestPrefetchLastAttempt(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("a stop handles the queued leases at their last attempt instead of giving them back", func(t *testing.T) {
			ctx := context.Background()
			bd := setup(t, b, 2)
			events := appendN(t, bd.drv, bd.stream, 4)
			// Events 0 to 2 are retried once, so their next lease is their
			// last attempt; event 3's is its first.
			first, err := bd.drv.Fetch(ctx, bd.stream, bd.group, &rheo.FetchOptions{MaxCount: 3})
			require.NoError(t, err)
			for _, l := range first {
				_, err := bd.drv.Retry(ctx, l.LeaseID, nil)
				require.NoError(t, err)
			}

			h := newBlocking()
			cfg := bd.config(h.handle)
			cfg.Concurrency, cfg.MaxDemand = 2, 4
			w := workertest.StartWorker(t, bd.drv, cfg)
			for range 2 {
				running := workertest.Receive(t, "a handler start", h.started)
				require.Contains(t, []string{events[0].ID, events[1].ID}, running.Event.ID)
			}
			// Queued: event 2 at its last attempt, event 3 at its first.
			bd.rec.WaitFor(t, "every event fetched", func(s recorded) bool { return fetchedCount(s) == 4 })

			stopped := make(chan error, 1)
			go func() { stopped <- w.Stop(ctx) }()
			s := bd.rec.WaitFor(t, "the first attempt given back", func(s recorded) bool { return len(s.Retried) == 1 })
			assert.Equal(t, events[3].ID, s.Retried[0].Lease.Event.ID)
			assert.Equal(t, 1, s.Retried[0].Lease.Attempt)
			close(h.release)
			require.NoError(t, workertest.Receive(t, "the stop", stopped))

			s = bd.rec.Snapshot()
			var handled []string
			for _, x := range s.Handled {
				assert.Equal(t, worker.OutcomeAck, x.Outcome)
				assert.Equal(t, 2, x.Lease.Attempt)
				handled = append(handled, x.Lease.Event.ID)
			}
			assert.ElementsMatch(t, []string{events[0].ID, events[1].ID, events[2].ID}, handled, "the last attempts are handled")
			assert.Len(t, s.Acked, 3)
			assert.Len(t, s.Retried, 1)
			assert.Empty(t, workertest.DeadLetters(t, bd.drv, bd.stream, bd.group), "no event is dead-lettered by the stop")
		})
	})
}
