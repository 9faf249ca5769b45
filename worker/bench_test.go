package worker_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/worker"
)

// ackCounter is a hook that closes done after n acks.
type ackCounter struct {
	n, acked atomic.Int64
	done     chan struct{}
}

func (c *ackCounter) Acked(context.Context, worker.AckInfo) {
	if c.acked.Add(1) == c.n.Load() {
		close(c.done)
	}
}

// BenchmarkDrain drains b.N pre-appended events from 4 partitions: with
// one worker of concurrency 64, and for comparison with a bare loop of
// Fetch and AckBatch of 64 (what the database allows one client fetching
// as much as the worker's 64 free slots ask for). Run with a fixed count,
// e.g. -benchtime=20000x.
func BenchmarkDrain(b *testing.B) {
	ctx := context.Background()
	testbackend.Run(b, func(b *testing.B, be *testbackend.Backend) {
		b.Run("worker", func(b *testing.B) {
			drv := be.Open(b, nil)
			stream, group := newStream(b, drv, 4, 5)
			appendSpread(b, drv, stream, b.N)
			counter := &ackCounter{done: make(chan struct{})}
			counter.n.Store(int64(b.N))
			w, err := worker.New(drv, &worker.Config{
				Stream: stream, Group: group, Concurrency: 64, Hooks: []any{counter},
				Handler: func(context.Context, rheo.Lease) error { return nil },
			})
			require.NoError(b, err)

			b.ResetTimer()
			require.NoError(b, w.Start(ctx))
			<-counter.done
			b.StopTimer()
			require.NoError(b, w.Stop(ctx))
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})

		b.Run("fetch_ack_loop", func(b *testing.B) {
			drv := be.Open(b, nil)
			stream, group := newStream(b, drv, 4, 5)
			appendSpread(b, drv, stream, b.N)

			b.ResetTimer()
			for acked := 0; acked < b.N; {
				leases, err := drv.Fetch(ctx, stream, group, &rheo.FetchOptions{MaxCount: 64})
				require.NoError(b, err)
				ids := make([]string, len(leases))
				for i, l := range leases {
					ids[i] = l.LeaseID
				}
				_, err = drv.AckBatch(ctx, ids)
				require.NoError(b, err)
				acked += len(leases)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	})
}
