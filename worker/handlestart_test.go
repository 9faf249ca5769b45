package worker_test

import (
	"context"
	"errors"
	"sync"
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

// ctxKey keys the values the test hooks put in handler contexts.
type ctxKey string

// tagHook is a HandleStartHook that records its calls and returns ctx
// with value under key; a nil value makes it return nil.
type tagHook struct {
	key   ctxKey
	value any

	mu     sync.Mutex
	leases []string // lease ids, in call order
	seen   []any    // what ctx held under "order" when it was called
}

func (h *tagHook) HandleStart(ctx context.Context, info worker.HandleStartInfo) context.Context {
	h.mu.Lock()
	h.leases = append(h.leases, info.Lease.LeaseID)
	h.seen = append(h.seen, ctx.Value(ctxKey("order")))
	h.mu.Unlock()
	if h.value == nil {
		return nil
	}
	return context.WithValue(ctx, h.key, h.value)
}

func (h *tagHook) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.leases...)
}

// ackCtxDriver is a Transactor whose transactions report the value under
// key of the context each Ack is made with.
type ackCtxDriver struct {
	driver.Driver
	key    ctxKey
	ackCtx chan any
}

func (d *ackCtxDriver) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Tx) error) error {
	return d.Driver.(driver.Transactor).InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
		return fn(ctx, &ackCtxTx{Tx: tx, d: d})
	})
}

type ackCtxTx struct {
	driver.Tx
	d *ackCtxDriver
}

func (t *ackCtxTx) Ack(ctx context.Context, leaseID string) error {
	t.d.ackCtx <- ctx.Value(t.d.key)
	return t.Tx.Ack(ctx, leaseID)
}

func TestHandleStartHook(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("the handler runs under the context HandleStart returns", func(t *testing.T) {
			bd := setup(t, b, 5)
			events := appendN(t, bd.drv, bd.stream, 1)
			hook := &tagHook{key: "span", value: "from the hook"}
			got := make(chan any, 1)
			cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
				got <- ctx.Value(ctxKey("span"))
				return nil
			})
			cfg.Hooks = append(cfg.Hooks, hook)
			workertest.StartWorker(t, bd.drv, cfg)

			assert.Equal(t, "from the hook", workertest.Receive(t, "the handler's value", got))
			s := bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
			require.Len(t, s.Handled, 1)
			assert.Equal(t, events[0].ID, s.Handled[0].Lease.Event.ID)
			assert.Equal(t, []string{s.Handled[0].Lease.LeaseID}, hook.calls(), "called once, for the lease handled")
		})

		t.Run("the returned context still carries the lease's cancellation", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			hook := &tagHook{key: "span", value: "x"}
			running := make(chan struct{})
			cause := make(chan error, 1)
			cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
				close(running)
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ctx.Err()
			})
			cfg.Hooks = append(cfg.Hooks, hook)
			w := workertest.StartWorker(t, bd.drv, cfg)

			workertest.Receive(t, "the handler to run", running)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			require.NoError(t, w.StopAndCancel(ctx))
			assert.ErrorIs(t, workertest.Receive(t, "the handler's cause", cause), worker.ErrStopped)
		})

		t.Run("hooks are called in the order of Config.Hooks and chain their contexts", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			first := &tagHook{key: "order", value: "first"}
			keep := &tagHook{} // returns nil: the context stays as it was
			second := &tagHook{key: "second", value: "second"}
			got := make(chan [2]any, 1)
			cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
				got <- [2]any{ctx.Value(ctxKey("order")), ctx.Value(ctxKey("second"))}
				return nil
			})
			cfg.Hooks = append(cfg.Hooks, first, keep, second)
			workertest.StartWorker(t, bd.drv, cfg)

			assert.Equal(t, [2]any{"first", "second"}, workertest.Receive(t, "the handler's values", got))
			assert.Equal(t, []any{nil}, first.seen)
			assert.Equal(t, []any{"first"}, keep.seen, "the second hook gets the first one's context")
			assert.Equal(t, []any{"first"}, second.seen, "a nil return keeps the context")
		})

		t.Run("it is called again for every delivery, each followed by HandledHook", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			hook := &tagHook{key: "span", value: "x"}
			cfg := bd.config(func(ctx context.Context, l rheo.Lease) error {
				if l.Attempt == 1 {
					return errors.New("flaky")
				}
				return nil
			})
			cfg.Hooks = append(cfg.Hooks, hook)
			cfg.RetryPolicy = func(rheo.Lease, error) time.Duration { return 0 } // again at once
			workertest.StartWorker(t, bd.drv, cfg)

			s := bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
			require.Len(t, s.Handled, 2)
			assert.Equal(t, []string{s.Handled[0].Lease.LeaseID, s.Handled[1].Lease.LeaseID}, hook.calls())
		})

		t.Run("a TxHandler and its ack run under it, inside the transaction", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			drv := &ackCtxDriver{Driver: bd.drv, key: "span", ackCtx: make(chan any, 1)}
			hook := &tagHook{key: "span", value: "from the hook"}
			got := make(chan any, 1)
			cfg := bd.config(nil)
			cfg.TxHandler = func(ctx context.Context, tx driver.Tx, l rheo.Lease) error {
				got <- ctx.Value(ctxKey("span"))
				return nil
			}
			cfg.Hooks = append(cfg.Hooks, hook)
			workertest.StartWorker(t, drv, cfg)

			assert.Equal(t, "from the hook", workertest.Receive(t, "the handler's value", got))
			assert.Equal(t, "from the hook", workertest.Receive(t, "the ack's value", drv.ackCtx))
			bd.rec.WaitFor(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
			assert.Len(t, hook.calls(), 1)
		})

		t.Run("a Consumer accepts it and calls it never", func(t *testing.T) {
			bd := setup(t, b, 5)
			appendN(t, bd.drv, bd.stream, 1)
			hook := &tagHook{key: "span", value: "x"}
			c, err := worker.NewConsumer(bd.drv, &worker.Config{
				Stream: bd.stream, Group: bd.group, LeaseDuration: leaseDuration,
				Clock: bd.clock, Hooks: []any{hook},
			})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			require.NoError(t, c.Start(ctx))
			for l, err := range c.Leases(ctx) {
				require.NoError(t, err)
				require.NoError(t, l.Ack(ctx))
				break
			}
			require.NoError(t, c.Stop(ctx))
			assert.Empty(t, hook.calls())
		})
	})
}
