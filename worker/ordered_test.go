package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testlog"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/worker"
)

// TestWorkerOrderedInProcess: under key and partition ordering a
// re-delivery of an event whose lost lease's handler still runs waits for
// that handler, while the database no longer holds the key for it.
func TestWorkerOrderedInProcess(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		for _, o := range []rheo.Ordering{rheo.OrderingKey, rheo.OrderingPartition} {
			// A lost lease's handler keeps its key until it returns.
			t.Run(string(o), func(t *testing.T) {
				ctx := context.Background()
				bd := setup(t, b, 5)
				bd.group = "ordered-" + string(o)
				require.NoError(t, bd.drv.CreateGroup(ctx, bd.stream, bd.group, &rheo.CreateGroupOptions{Ordering: o}))
				_, err := bd.drv.Append(ctx, bd.stream, json.RawMessage(`{"n": 0}`), &rheo.AppendOptions{Key: "k"})
				require.NoError(t, err)

				var mu sync.Mutex
				running, most := 0, 0
				h := newBlocking()
				cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
					mu.Lock()
					running++
					most = max(most, running)
					mu.Unlock()
					defer func() {
						mu.Lock()
						running--
						mu.Unlock()
					}()
					return h.handle(ctx, l)
				})
				cfg.Concurrency = 2
				workertest.StartWorker(t, bd.drv, cfg)
				first := workertest.Receive(t, "the first handler", h.started)

				// A replay makes the lease stale; renewal finds out, and the
				// handler, which ignores its context, goes on.
				from := int64(0)
				_, err = bd.drv.Replay(ctx, bd.stream, bd.group, &rheo.ReplayOptions{FromSequence: &from})
				require.NoError(t, err)
				bd.clock.Advance(leaseDuration/2 + time.Second)
				bd.rec.WaitFor(t, "the lease lost", func(s recorded) bool { return len(s.LeaseLost) == 1 })
				// The poll fetches the event again, for the idle slot.
				bd.clock.Advance(cfg.PollInterval)
				bd.rec.WaitFor(t, "the event fetched again", func(s recorded) bool { return fetchedCount(s) == 2 })
				workertest.Never(t, bd.clock, "the second lease waits for the first one's handler", cfg.PollInterval, 3, func() bool {
					return len(h.started) > 0
				})

				close(h.release)
				second := workertest.Receive(t, "the second handler", h.started)
				assert.Equal(t, first.Event.ID, second.Event.ID)
				assert.NotEqual(t, first.LeaseID, second.LeaseID)
				bd.rec.WaitFor(t, "the second lease acked", func(s recorded) bool { return len(s.Acked) == 1 })
				mu.Lock()
				defer mu.Unlock()
				assert.Equal(t, 1, most, "never two handlers of the key at once")
			})
		}
	})
}

// TestWorkerOrderedRetryDelay: a lease handed out before a set_ordering
// waits, in the worker's queue, for the delay of an earlier event of its
// key that was retried.
func TestWorkerOrderedRetryDelay(t *testing.T) {
	t.Parallel()
	const delay = 10 * time.Second
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		// A retry's delay holds its key.
		ctx := context.Background()
		bd := setup(t, b, 5)
		for i := range 2 {
			_, err := bd.drv.Append(ctx, bd.stream, json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), &rheo.AppendOptions{Key: "k"})
			require.NoError(t, err)
		}
		logs := testlog.New()
		starts := make(chan rheo.Lease, 10)
		retry := make(chan struct{})
		cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
			starts <- l
			if workertest.PayloadN(t, l) == 0 && l.Attempt == 1 {
				<-retry
				return worker.Retry(delay, errors.New("later"))
			}
			return nil
		})
		cfg.Concurrency, cfg.MaxDemand, cfg.Logger = 1, 2, logs.Logger()
		workertest.StartWorker(t, bd.drv, cfg)
		// Under 'none' both events are fetched: 0 runs, 1 is queued.
		first := workertest.Receive(t, "event 0's handler", starts)
		require.Equal(t, 0, workertest.PayloadN(t, first))
		bd.rec.WaitFor(t, "both events fetched", func(s recorded) bool { return fetchedCount(s) == 2 })

		require.NoError(t, bd.drv.SetOrdering(ctx, bd.stream, bd.group, rheo.OrderingKey))
		bd.clock.Advance(cfg.PollInterval)
		logs.WaitCount(t, waitTimeout, 1, slog.LevelInfo, "group ordering changed")

		close(retry)
		bd.rec.WaitFor(t, "event 0 retried", func(s recorded) bool { return len(s.Retried) == 1 })
		workertest.Never(t, bd.clock, "event 1 waits for event 0's delay", time.Second, int(delay/time.Second)-1, func() bool {
			return len(starts) > 0
		})

		// Past the delay event 0 is claimable again, and its key free in
		// the worker: event 1 runs (it was leased first), then event 0.
		bd.clock.Advance(2 * time.Second)
		assert.Equal(t, 1, workertest.PayloadN(t, workertest.Receive(t, "event 1's handler", starts)))
		again := workertest.Receive(t, "event 0's second handler", starts)
		assert.Equal(t, 0, workertest.PayloadN(t, again))
		assert.Equal(t, 2, again.Attempt)
	})
}
