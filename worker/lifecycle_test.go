package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/worker"
)

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

func TestWorkerLifecycle(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("Stop lets running handlers finish, renews them meanwhile and writes their acks", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 2)
			started, release := make(chan struct{}, 2), make(chan struct{})
			cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
				started <- struct{}{}
				<-release
				return ctx.Err()
			})
			cfg.Concurrency = 2
			cfg.AckFlushInterval = time.Hour // only the stop writes the acks
			w := startWorker(t, bd.drv, cfg)
			receive(t, "the first handler", started)
			receive(t, "the second handler", started)

			stopped := make(chan error, 1)
			go func() { stopped <- w.Stop(context.Background()) }()
			bd.clock.Advance(6 * time.Second)
			bd.rec.waitFor(t, "the renewals", func(s recorded) bool { return len(s.renewed) == 2 })
			never(t, bd.clock, "Stop waits while handlers run", time.Second, 3, func() bool { return len(stopped) > 0 })

			close(release)
			require.NoError(t, receive(t, "Stop", stopped))
			s := bd.rec.snapshot()
			assert.Len(t, s.acked, 2)
			assert.Equal(t, int64(0), bd.info(t).Lag, "the acks were written before Stop returned")
			select {
			case <-w.Done():
			default:
				require.FailNow(t, "Done is not closed after Stop")
			}
		})

		t.Run("StopAndCancel cancels the handlers and retries their events", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			started, causes := make(chan struct{}, 1), make(chan error, 1)
			w := startWorker(t, bd.drv, bd.config(blockingHandler(started, causes)))
			receive(t, "the handler", started)

			require.NoError(t, w.StopAndCancel(context.Background()))
			assert.ErrorIs(t, receive(t, "the cause", causes), worker.ErrStopped)
			s := bd.rec.snapshot()
			require.Len(t, s.retried, 1)
			assert.Equal(t, time.Duration(0), s.retried[0].Delay, "a hard stop does not back off")
			info := bd.info(t)
			assert.Equal(t, int64(0), info.InFlight)
			assert.Equal(t, int64(1), info.PendingRetry, "the event is claimable again at once")
			assert.Empty(t, deadLetters(t, bd.drv, bd.stream, bd.group))
		})

		t.Run("Stop cancels the handlers when its context ends", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			started, causes := make(chan struct{}, 1), make(chan error, 1)
			w := startWorker(t, bd.drv, bd.config(blockingHandler(started, causes)))
			receive(t, "the handler", started)

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			assert.ErrorIs(t, w.Stop(ctx), context.Canceled)
			assert.ErrorIs(t, receive(t, "the cause", causes), worker.ErrStopped)
			receive(t, "the end of the worker", w.Done())
			s := bd.rec.snapshot()
			require.Len(t, s.retried, 1)
			assert.Equal(t, time.Duration(0), s.retried[0].Delay, "a hard stop does not back off")
		})

		t.Run("a second worker of a stream and group on one driver is refused", func(t *testing.T) {
			bd := setup(t, b, 5)
			require.NoError(t, bd.drv.CreateGroup(context.Background(), bd.stream, "other", nil))
			nop := func(ctx context.Context, l rheo.Lease) error { return nil }
			first := startWorker(t, bd.drv, bd.config(nop))

			second, err := worker.New(bd.drv, bd.config(nop))
			require.NoError(t, err)
			err = second.Start(context.Background())
			assert.ErrorIs(t, err, rheo.ErrAlreadyExists)
			consumer, err := worker.NewConsumer(bd.drv, &worker.Config{Stream: bd.stream, Group: bd.group})
			require.NoError(t, err)
			assert.ErrorIs(t, consumer.Start(context.Background()), rheo.ErrAlreadyExists)

			otherGroup := bd.config(nop)
			otherGroup.Group = "other"
			startWorker(t, bd.drv, otherGroup)
			otherDriver := b.Open(t, bd.clock)
			startWorker(t, otherDriver, bd.config(nop))

			require.NoError(t, first.Stop(context.Background()))
			require.NoError(t, second.Start(context.Background()), "Stop releases the stream and group")
			require.NoError(t, second.Stop(context.Background()))
		})

		t.Run("Start checks the stream, group and partitions", func(t *testing.T) {
			bd := setup(t, b, 5)
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
			bd := setup(t, b, 5)
			w, err := worker.New(bd.drv, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))
			require.NoError(t, err)
			require.NoError(t, w.Stop(context.Background()))
			receive(t, "Done", w.Done())
			assert.ErrorIs(t, w.Start(context.Background()), rheo.ErrInvalidArgument)
		})

		t.Run("Partitions limits the worker to its partitions", func(t *testing.T) {
			bd := setup(t, b, 5)
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
			startWorker(t, bd.drv, cfg)

			s := bd.rec.waitFor(t, "3 acks", func(s recorded) bool { return len(s.acked) == 3 })
			assert.Empty(t, s.deadLettered)
			lag, err := bd.drv.Lag(context.Background(), stream, group, nil)
			require.NoError(t, err)
			assert.Equal(t, int64(2), lag.Partitions[0].Lag)
			assert.Equal(t, int64(0), lag.Partitions[1].Lag)
		})

		t.Run("an append wakes the worker long before the poll interval", func(t *testing.T) {
			drv := b.Open(t, nil)
			stream, group := newStream(t, drv, 1, 5)
			rec := &recorder{}
			handled := make(chan struct{}, 100)
			startWorker(t, drv, &worker.Config{
				Stream: stream, Group: group, PollInterval: 10 * time.Minute, Hooks: []any{rec},
				Handler: func(ctx context.Context, l rheo.Lease) error {
					handled <- struct{}{}
					return nil
				},
			})
			rec.waitFor(t, "the first, empty fetch", func(s recorded) bool { return len(s.fetched) == 1 })

			// Another client's append can reach the worker only through
			// the database's notifications; SQLite wakes the driver
			// that appended.
			appender := drv
			if drv.Capabilities().Notifications {
				appender = b.Open(t, nil)
			}
			// The listener connects in the background: append again
			// until an event is handled.
			start := time.Now()
			deadline := time.After(waitTimeout)
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
	})
}
