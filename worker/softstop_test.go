//go:build unix

package worker_test

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/worker"
)

// softStopTimeout is the tests' Config.SoftStopTimeout: well below half
// of leaseDuration, so that advancing the clock past it renews no lease,
// and unlike the poll interval, so that its timer is told apart.
const softStopTimeout = 1500 * time.Millisecond

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

// notClosed fails the test if ch is closed.
func notClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
		require.FailNow(t, fmt.Sprintf("%s is closed", what))
	default:
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

// armed waits until a timer of clock is set for at.
func armed(t *testing.T, bd *bundle, at time.Time) {
	t.Helper()
	eventually(t, "the soft stop's timer", func() bool { return bd.clock.Armed(at) })
}

func TestSoftStop(t *testing.T) {
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("SIGTERM through signal.NotifyContext lets the running handler finish and acks its event", func(t *testing.T) {
			bd := setup(t, b, 5)
			events := appendN(t, bd.drv, bd.stream, 2)
			started, release := make(chan struct{}, 2), make(chan struct{})
			handlerErr := make(chan error, 2)
			cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
				started <- struct{}{}
				<-release
				handlerErr <- context.Cause(ctx)
				return ctx.Err()
			})
			cfg.Concurrency = 1
			cfg.SoftStopTimeout = softStopTimeout
			w, err := worker.New(bd.drv, cfg)
			require.NoError(t, err)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
			defer stop()
			require.NoError(t, w.Start(ctx))
			workertest.Receive(t, "the first handler", started)
			bd.rec.WaitFor(t, "the second lease, queued", func(s recorded) bool {
				n := 0
				for _, f := range s.Fetched {
					n += f.Count
				}
				return n == 2
			})

			require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGTERM))
			workertest.Receive(t, "the signal", ctx.Done())
			bd.rec.WaitFor(t, "the queued lease, given back", func(s recorded) bool { return len(s.Retried) == 1 })
			notClosed(t, "Done, while the handler runs,", w.Done())

			close(release)
			workertest.Receive(t, "the end of the worker", w.Done())
			assert.NoError(t, workertest.Receive(t, "the handler's return", handlerErr), "the handler's context was not cancelled")
			s := bd.rec.Snapshot()
			require.Len(t, s.Acked, 1)
			assert.Equal(t, events[0].ID, s.Acked[0].Lease.Event.ID, "the running handler's event is acked")
			assert.Equal(t, events[1].ID, s.Retried[0].Lease.Event.ID, "the queued lease is given back")
			assert.Equal(t, "not processed: the worker stopped", s.Retried[0].Reason)
			assert.Len(t, s.Handled, 1, "no handler starts after the signal")
			info := bd.info(t)
			assert.Equal(t, int64(0), info.InFlight)
			assert.Equal(t, int64(1), info.PendingRetry, "the given-back event is claimable again at once")
		})

		t.Run("a soft stop turns hard after SoftStopTimeout", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			started, causes := make(chan struct{}, 1), make(chan error, 1)
			cfg := bd.config(blockingHandler(started, causes))
			cfg.SoftStopTimeout = softStopTimeout
			w, err := worker.New(bd.drv, cfg)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			require.NoError(t, w.Start(ctx))
			workertest.Receive(t, "the handler", started)

			at := bd.clock.Now().Add(softStopTimeout)
			cancel()
			armed(t, bd, at)
			workertest.Never(t, bd.clock, "Done stays open before the timeout", softStopTimeout/10, 9, closed(w.Done()))
			bd.clock.Advance(softStopTimeout)
			assert.ErrorIs(t, workertest.Receive(t, "the cause", causes), worker.ErrStopped)
			workertest.Receive(t, "the end of the worker", w.Done())
			s := bd.rec.Snapshot()
			require.Len(t, s.Retried, 1)
			assert.Equal(t, time.Duration(0), s.Retried[0].Delay, "a hard stop does not back off")
		})

		t.Run("cancelling a Consumer's Start context waits for the leases handed out", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			c, err := worker.NewConsumer(bd.drv, &worker.Config{
				Stream: bd.stream, Group: bd.group, LeaseDuration: leaseDuration,
				Clock: bd.clock, Hooks: []any{bd.rec}, SoftStopTimeout: softStopTimeout,
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			require.NoError(t, c.Start(ctx))
			leases := make(chan *worker.Lease)
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				for l, err := range c.Leases(context.Background()) {
					if err == nil {
						leases <- l
					}
				}
			}()
			l := workertest.Receive(t, "the lease", leases)

			cancel()
			workertest.Receive(t, "the end of the iteration", ended)
			notClosed(t, "Done, with a lease unsettled,", c.Done())
			require.NoError(t, l.Context().Err(), "the unsettled lease's context is live")
			require.NoError(t, l.Ack(context.Background()))
			workertest.Receive(t, "the end of the consumer", c.Done())
			assert.Equal(t, int64(0), bd.info(t).Lag, "the ack was written")
		})

		t.Run("a Consumer's soft stop turns hard after SoftStopTimeout", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			c, err := worker.NewConsumer(bd.drv, &worker.Config{
				Stream: bd.stream, Group: bd.group, LeaseDuration: leaseDuration,
				Clock: bd.clock, SoftStopTimeout: softStopTimeout,
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			require.NoError(t, c.Start(ctx))
			l := take(t, c)

			at := bd.clock.Now().Add(softStopTimeout)
			cancel()
			armed(t, bd, at)
			workertest.Never(t, bd.clock, "Done stays open before the timeout", softStopTimeout/10, 9, closed(c.Done()))
			bd.clock.Advance(softStopTimeout)
			workertest.Receive(t, "the end of the consumer", c.Done())
			assert.ErrorIs(t, context.Cause(l.Context()), worker.ErrStopped)
		})
	})
}
