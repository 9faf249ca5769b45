package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/redis"
	"github.com/rheo-go/rheo/worker"
)

// TestWorker runs the worker on each deployment: eight handlers drain a
// stream of 8 partitions, every event handled to its end once, with one
// in ten retried once and one in fifty dead-lettered, and the lag drops
// to 0.
func TestWorker(t *testing.T) {
	for _, dep := range deployments {
		t.Run(dep.name, func(t *testing.T) {
			ctx := context.Background()
			d, err := redis.Open(ctx, dep.url(t), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Close() })
			s := uniqueStream("worker")
			require.NoError(t, d.CreateStream(ctx, s, 8))
			require.NoError(t, d.CreateGroup(ctx, s, "g", &rheo.CreateGroupOptions{MaxAttempts: 2}))
			const n = 400
			items := make([]rheo.BatchItem, n)
			for i := range items {
				items[i] = rheo.BatchItem{Payload: []byte(fmt.Sprintf(`{"n": %d}`, i)), Key: fmt.Sprintf("k%d", i%37), ID: fmt.Sprintf("e%d", i)}
			}
			_, err = d.AppendBatch(ctx, s, items, nil)
			require.NoError(t, err)

			var (
				mu       sync.Mutex
				attempts = map[string]int{}
				finished = 0
				done     = make(chan struct{})
			)
			finish := func() {
				finished++
				if finished == n {
					close(done)
				}
			}
			w, err := worker.New(d, &worker.Config{
				Stream:       s,
				Group:        "g",
				Concurrency:  8,
				PollInterval: 50 * time.Millisecond,
				Logger:       slog.New(slog.DiscardHandler),
				RetryPolicy:  func(rheo.Lease, error) time.Duration { return time.Millisecond },
				Handler: func(ctx context.Context, l rheo.Lease) error {
					mu.Lock()
					defer mu.Unlock()
					attempts[l.Event.ID]++
					var i int
					_, _ = fmt.Sscanf(l.Event.ID, "e%d", &i)
					switch {
					case i%50 == 0:
						finish()
						return worker.Reject(errors.New("poison"))
					case i%10 == 0 && l.Attempt == 1:
						return errors.New("try again")
					}
					finish()
					return nil
				},
			})
			require.NoError(t, err)
			require.NoError(t, w.Start(ctx))
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				require.FailNow(t, "the worker did not finish the stream")
			}
			require.NoError(t, w.Stop(ctx))

			for i := range n {
				want := 1
				if i%10 == 0 && i%50 != 0 {
					want = 2
				}
				require.Equal(t, want, attempts[fmt.Sprintf("e%d", i)], "event %d", i)
			}
			lag, err := d.Lag(ctx, s, "g", nil)
			require.NoError(t, err)
			require.Zero(t, lag.Total)
			letters, err := d.DeadLetters(ctx, s, "g", nil)
			require.NoError(t, err)
			require.Len(t, letters, n/50)
		})
	}
}
