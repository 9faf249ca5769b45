package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/worker"
)

// startConsumer starts a consumer on the bundle's stream and stops it when
// t ends.
func startConsumer(t *testing.T, bd *bundle, maxDemand int) *worker.Consumer {
	t.Helper()
	c, err := worker.NewConsumer(bd.drv, &worker.Config{
		Stream: bd.stream, Group: bd.group, MaxDemand: maxDemand,
		LeaseDuration: leaseDuration, Clock: bd.clock, Hooks: []any{bd.rec},
	})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.Stop(ctx)
	})
	return c
}

// take returns the first lease the consumer yields and ends the
// iteration; the lease stays held.
func take(t *testing.T, c *worker.Consumer) *worker.Lease {
	t.Helper()
	for l, err := range c.Leases(context.Background()) {
		require.NoError(t, err)
		return l
	}
	require.FailNow(t, "the iteration ended without a lease")
	return nil
}

func TestConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("the caller settles leases with Ack, Retry and Reject", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 3)
			c := startConsumer(t, bd, 0)

			acked, rejected := 0, 0
			for l, err := range c.Leases(ctx) {
				require.NoError(t, err)
				switch n := workertest.PayloadN(t, l.Lease); {
				case n == 0 || (n == 1 && l.Attempt == 2):
					require.NoError(t, l.Ack(ctx))
					acked++
				case n == 1:
					out, err := l.Retry(ctx, 0, "again")
					require.NoError(t, err)
					assert.Equal(t, rheo.Retrying, out)
				case n == 2:
					require.NoError(t, l.Reject(ctx, "bad"))
					rejected++
				}
				if acked == 2 && rejected == 1 {
					break
				}
			}
			assert.Equal(t, int64(0), bd.info(t).Lag)
			dls := workertest.DeadLetters(t, bd.drv, bd.stream, bd.group)
			require.Len(t, dls, 1)
			assert.Equal(t, "bad", dls[0].Reason)
			s := bd.rec.Snapshot()
			assert.Len(t, s.Acked, 2)
			assert.Len(t, s.Retried, 1)
			assert.Len(t, s.DeadLettered, 1)
		})

		t.Run("demand is bounded by MaxDemand", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 10)
			c := startConsumer(t, bd, 3)

			iterCtx, cancel := context.WithCancel(ctx)
			leases, ended := make(chan *worker.Lease), make(chan struct{})
			go func() {
				defer close(ended)
				for l, err := range c.Leases(iterCtx) {
					if err != nil {
						continue
					}
					select {
					case leases <- l:
					case <-iterCtx.Done():
						return
					}
				}
			}()
			var held []*worker.Lease
			for range 3 {
				held = append(held, workertest.Receive(t, "a lease", leases))
			}
			fetched := func() (n int) {
				for _, f := range bd.rec.Snapshot().Fetched {
					n += f.Count
				}
				return n
			}
			assert.Equal(t, 3, fetched())
			assert.Equal(t, int64(3), bd.info(t).InFlight)

			require.NoError(t, held[0].Ack(ctx))
			held = append(held[1:], workertest.Receive(t, "a fourth lease", leases))
			assert.Equal(t, 4, fetched(), "one settle makes room for one more")
			assert.LessOrEqual(t, bd.info(t).InFlight, int64(3))

			for _, l := range held {
				require.NoError(t, l.Ack(ctx))
			}
			cancel()
			workertest.Receive(t, "the end of the iteration", ended)
		})

		t.Run("unsettled leases are renewed until settled", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			c := startConsumer(t, bd, 0)
			l := take(t, c)

			bd.clock.Advance(6 * time.Second)
			bd.rec.WaitFor(t, "a renewal", func(s recorded) bool { return len(s.Renewed) == 1 })
			bd.clock.Advance(6 * time.Second)
			bd.rec.WaitFor(t, "a second renewal", func(s recorded) bool { return len(s.Renewed) == 2 })
			assert.Equal(t, int64(1), bd.info(t).InFlight)

			require.NoError(t, l.Ack(ctx))
			assert.Equal(t, int64(0), bd.info(t).Lag)
			assert.ErrorIs(t, context.Cause(l.Context()), context.Canceled, "a settled lease's context is done")
			assert.ErrorIs(t, l.Ack(ctx), rheo.ErrStaleLease, "a second settle")
		})

		t.Run("a lost lease's context is cancelled and its settle is stale", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			c := startConsumer(t, bd, 0)
			l := take(t, c)

			require.NoError(t, bd.drv.ResetGroup(ctx, bd.stream, bd.group, &rheo.ResetOptions{Confirm: true}))
			bd.clock.Advance(6 * time.Second)
			workertest.Receive(t, "the lease's context", l.Context().Done())
			assert.ErrorIs(t, context.Cause(l.Context()), rheo.ErrStaleLease)
			assert.Len(t, bd.rec.Snapshot().LeaseLost, 1)
			assert.ErrorIs(t, l.Ack(ctx), rheo.ErrStaleLease)
		})

		t.Run("Stop waits for unsettled leases", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			c := startConsumer(t, bd, 0)
			l := take(t, c)

			stopped := make(chan error, 1)
			go func() { stopped <- c.Stop(ctx) }()
			require.NoError(t, l.Ack(ctx))
			require.NoError(t, workertest.Receive(t, "Stop", stopped))
			assert.Equal(t, int64(0), bd.info(t).Lag)
		})

		t.Run("Stop gives up on unsettled leases when its context ends", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			c := startConsumer(t, bd, 0)
			l := take(t, c)

			ended, cancel := context.WithCancel(ctx)
			cancel()
			assert.ErrorIs(t, c.Stop(ended), context.Canceled)
			assert.ErrorIs(t, context.Cause(l.Context()), worker.ErrStopped)
			require.NoError(t, l.Ack(ctx), "a settle after the stop still reaches the database")
			assert.Equal(t, int64(0), bd.info(t).Lag)
			for l, err := range c.Leases(ctx) {
				require.FailNow(t, fmt.Sprintf("a stopped consumer yielded %v, %v", l, err))
			}
		})

		t.Run("breaking out of the loop gives back the leases not yet yielded", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 5)
			c := startConsumer(t, bd, 5)
			l := take(t, c)

			info := bd.info(t)
			assert.Equal(t, int64(1), info.InFlight)
			assert.Equal(t, int64(4), info.PendingRetry)
			require.NoError(t, l.Ack(ctx))
		})

		t.Run("a fetch error is yielded and the iteration goes on", func(t *testing.T) {
			bd := setup(t, b, 5)
			faulty := newFaultyDriver(bd.drv)
			faulty.failOn("fetch", 1, rheo.Errorf(rheo.ErrBackendUnavailable, "connection refused"))
			appendN(t, bd.drv, bd.stream, 1)
			c, err := worker.NewConsumer(faulty, &worker.Config{Stream: bd.stream, Group: bd.group, Clock: bd.clock})
			require.NoError(t, err)
			require.NoError(t, c.Start(ctx))
			var errs []error
			for l, err := range c.Leases(ctx) {
				if err != nil {
					errs = append(errs, err)
					continue
				}
				require.NoError(t, l.Ack(ctx))
				break
			}
			require.Len(t, errs, 1)
			assert.ErrorIs(t, errs[0], rheo.ErrBackendUnavailable)
			require.NoError(t, c.Stop(ctx))
			assert.Equal(t, int64(0), bd.info(t).Lag)
		})

		t.Run("Leases yields an error before Start and during another iteration", func(t *testing.T) {
			bd := setup(t, b, 5)
			c, err := worker.NewConsumer(bd.drv, &worker.Config{Stream: bd.stream, Group: bd.group, Clock: bd.clock})
			require.NoError(t, err)
			for l, err := range c.Leases(ctx) {
				assert.Nil(t, l)
				assert.ErrorIs(t, err, rheo.ErrInvalidArgument)
			}
			require.NoError(t, c.Start(ctx))
			appendN(t, bd.drv, bd.stream, 1)
			for l, err := range c.Leases(ctx) {
				require.NoError(t, err)
				for l2, err := range c.Leases(ctx) {
					assert.Nil(t, l2)
					assert.ErrorIs(t, err, rheo.ErrInvalidArgument)
				}
				require.NoError(t, l.Ack(ctx))
				break
			}
			require.NoError(t, c.Stop(ctx))
		})
	})
}
