package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// slot runs handlers, one at a time, for the leases it takes from the
// queue, until the queue is closed and empty.
func (w *Worker) slot() {
	defer w.handlers.Done()
	for h := w.next(); h != nil; h = w.next() {
		w.handle(h)
	}
}

// next takes the oldest queued lease whose ordering key is free and
// marks the slot busy, waiting for one if there is none; nil means the
// queue is closed and empty. Leases behind a key in use keep their place,
// so a key's leases run in the order they were fetched, and other keys
// are not held up. It wakes the fetch loop when the queue falls to its
// low-water mark. A lease whose context ended while it was queued is not
// returned: one that renewal found lost is dropped, one a hard stop
// cancelled is given back.
func (w *Worker) next() *held {
	for {
		w.mu.Lock()
		i := -1
		for {
			if i = w.runnable(); i >= 0 || (w.closed && len(w.queue) == 0) {
				break
			}
			w.ready.Wait()
		}
		if i < 0 {
			w.mu.Unlock()
			return nil
		}
		h := w.queue[i]
		w.queue = slices.Delete(w.queue, i, i+1)
		h.orderKeys = orderKeys(h.lease)
		for _, k := range h.orderKeys {
			x := w.holds[k]
			if x == nil {
				x = &hold{}
				w.holds[k] = x
			}
			x.leases++
		}
		w.busy++
		low := w.pipeline().lowWater()
		w.mu.Unlock()
		if low {
			notify(w.c.changed)
		}
		if h.ctx.Err() == nil {
			return h
		}
		if w.c.deactivate(h) {
			w.c.release(h)
		} else {
			w.c.giveBack([]*held{h}, givenBack)
		}
		w.freeSlot(0)
	}
}

// freeSlot ends a handler's hold on its slot, after a run of d (0 when
// no handler ran), and wakes the fetch loop if the queue is at its
// low-water mark.
func (w *Worker) freeSlot(d time.Duration) {
	if d > 0 {
		w.handlerTime.observe(d)
	}
	w.mu.Lock()
	w.busy--
	low := w.pipeline().lowWater()
	w.mu.Unlock()
	if low {
		notify(w.c.changed)
	}
}

// handle runs the handler for h and settles its outcome.
func (w *Worker) handle(h *held) {
	if w.transactor != nil {
		w.handleTx(h)
		return
	}
	ctx := w.c.s.hooks.startHandle(h.ctx, h.lease)
	start := time.Now()
	err := callHandler(w.c.s.Handler, ctx, h.lease)
	took := time.Since(start)
	lost := w.c.deactivate(h)
	w.freeSlot(took)
	o := outcomeOf(err)
	w.handled(h, o, err, lost, took)
	if lost {
		w.c.release(h)
		return
	}
	w.settle(h, w.backoff(h, o))
}

// callBound cancels a context when a call of the worker's in it outlasts
// the call timeout. It bounds the begin and the commit of a transactional
// handler's transaction, which run under the context InTx was given, and
// leaves the handler's own work between them unbounded.
type callBound struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timeout time.Duration

	mu    sync.Mutex
	timer *time.Timer
}

func newCallBound(parent context.Context, timeout time.Duration) (context.Context, *callBound) {
	ctx, cancel := context.WithCancelCause(parent)
	return ctx, &callBound{ctx: ctx, cancel: cancel, timeout: timeout}
}

// start bounds the call op that begins now.
func (b *callBound) start(op string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer = time.AfterFunc(b.timeout, func() { b.cancel(&callTimeoutError{op: op, timeout: b.timeout}) })
}

// stop ends the bound of the call that ended and reports whether it ended
// in time.
func (b *callBound) stop() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timer == nil || b.timer.Stop()
}

// explain adds the call timeout to err when it is what ended the call: the
// driver sees only a cancelled context.
func (b *callBound) explain(err error) error {
	b.stop()
	var timeout *callTimeoutError
	if err != nil && !errors.As(err, &timeout) && errors.As(context.Cause(b.ctx), &timeout) {
		return fmt.Errorf("%w (%w)", err, timeout)
	}
	return err
}

// end releases the context.
func (b *callBound) end() {
	b.stop()
	b.cancel(nil)
}

// callTimeoutError is the cause with which a callBound ends its context.
type callTimeoutError struct {
	op      string
	timeout time.Duration
}

func (e *callTimeoutError) Error() string {
	return fmt.Sprintf("%s took longer than %s", e.op, e.timeout)
}

// Unwrap makes errors.Is(err, context.DeadlineExceeded) true.
func (e *callTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// handled logs a handler's return and tells the hooks.
func (w *Worker) handled(h *held, o outcome, err error, lost bool, d time.Duration) {
	if lost {
		o.kind = OutcomeDiscarded
	}
	if p, ok := err.(*PanicError); ok {
		w.c.log.LogAttrs(w.c.bg, slog.LevelError, "handler panicked", append(leaseAttrs(h.lease),
			slog.Any(LogKeyError, err), slog.String(LogKeyStack, string(p.Stack)))...)
	} else if err != nil {
		w.c.log.LogAttrs(w.c.bg, slog.LevelDebug, "handler failed", append(leaseAttrs(h.lease),
			slog.Any(LogKeyError, err), slog.String(LogKeyOutcome, string(o.kind)))...)
	}
	for _, x := range w.c.s.hooks.handled {
		x.Handled(w.c.bg, HandleInfo{Lease: h.lease, Outcome: o.kind, Err: err, Duration: d})
	}
}
