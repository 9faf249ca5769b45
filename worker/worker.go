package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// Worker consumes a group by running a handler for every leased event,
// with at most Config.Concurrency handlers at once. Create it with New,
// run it with Start, and end it with Stop or StopAndCancel.
type Worker struct {
	c          *core
	transactor driver.Transactor // set for a TxHandler

	mu      sync.Mutex
	state   runState
	running int // handlers running

	stopFetch      chan struct{}
	stopFetchOnce  sync.Once
	cancelFetch    context.CancelFunc
	cancelHandlers context.CancelCauseFunc
	handlers       sync.WaitGroup
	done           chan struct{}
}

// runState is the lifecycle of a Worker or Consumer.
type runState int

const (
	stateNew runState = iota
	stateRunning
	stateStopped
)

// New checks cfg and returns a worker for drv. Invalid settings are
// reported as rheo.ErrInvalidArgument naming the field. drv must stay open
// until the worker has stopped.
func New(drv driver.Driver, cfg *Config) (*Worker, error) {
	s, err := cfg.settle(drv, true)
	if err != nil {
		return nil, err
	}
	w := &Worker{c: newCore(drv, s), stopFetch: make(chan struct{}), done: make(chan struct{})}
	if s.TxHandler != nil {
		w.transactor = drv.(driver.Transactor)
	}
	return w, nil
}

// Start checks that the stream, group and partitions exist and starts
// fetching and handling in the background. It fails with
// rheo.ErrAlreadyExists while another worker or consumer of the same
// stream and group runs on the same driver in this process.
//
// The handlers' contexts carry ctx's values. Cancelling ctx stops the
// worker as StopAndCancel does, in the background; Done tells when it has
// stopped.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateNew {
		return rheo.Errorf(rheo.ErrInvalidArgument, "the worker for stream %q group %q was already started", w.c.s.Stream, w.c.s.Group)
	}
	release, err := w.c.begin(ctx)
	if err != nil {
		return err
	}
	w.state = stateRunning

	var fetchCtx context.Context
	fetchCtx, w.cancelFetch = context.WithCancel(w.c.bg)
	w.c.leaseParent, w.cancelHandlers = context.WithCancelCause(w.c.bg)
	stopWatch := context.AfterFunc(ctx, func() { w.beginStop(true) })

	stopRenew, stopAcks := make(chan struct{}), make(chan struct{})
	renewDone, acksDone, fetchDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewDone)
		w.c.renewLoop(stopRenew)
	}()
	go func() {
		defer close(acksDone)
		w.c.acks.run(stopAcks)
	}()
	go func() {
		defer close(fetchDone)
		w.c.fetchLoop(fetchCtx, w.stopFetch, w.c.s.Concurrency, w.capacity, w.deliver, nil)
	}()
	go func() {
		// Shutdown, in order: no more fetches; the handlers finish
		// (renewed meanwhile); the acks are written; renewal ends.
		<-fetchDone
		w.handlers.Wait()
		close(stopAcks)
		<-acksDone
		close(stopRenew)
		<-renewDone
		w.c.calls.Wait()
		w.cancelFetch()
		w.cancelHandlers(ErrStopped)
		stopWatch()
		release()
		w.mu.Lock()
		w.state = stateStopped
		w.mu.Unlock()
		close(w.done)
	}()
	return nil
}

// beginStop stops fetching; hard also cancels the handlers' contexts and a
// fetch in flight.
func (w *Worker) beginStop(hard bool) {
	w.stopFetchOnce.Do(func() { close(w.stopFetch) })
	if hard {
		w.cancelHandlers(ErrStopped)
		w.cancelFetch()
	}
}

// stopping begins a stop and reports whether there is a run to wait for.
func (w *Worker) stopping(hard bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.state {
	case stateNew:
		w.state = stateStopped
		close(w.done)
		return false
	case stateStopped:
		return false
	}
	w.beginStop(hard)
	return true
}

// Stop stops fetching and waits for the running handlers to finish, for
// their acks to be written and for renewal to end; leases stay renewed
// meanwhile. If ctx ends first, Stop cancels the handlers' contexts (cause
// ErrStopped) and returns ctx's error at once; the worker then finishes in
// the background (the handlers' outcomes are still settled and the acks
// written) and Done tells when it has.
func (w *Worker) Stop(ctx context.Context) error {
	if !w.stopping(false) {
		<-w.done
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		w.beginStop(true)
		return ctx.Err()
	}
}

// StopAndCancel is Stop with the handlers' contexts cancelled at once
// (cause ErrStopped): handlers that honour their context return early and
// their events are retried at once.
func (w *Worker) StopAndCancel(ctx context.Context) error {
	if !w.stopping(true) {
		<-w.done
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed once the worker has stopped entirely.
func (w *Worker) Done() <-chan struct{} { return w.done }

// capacity is the number of free handler slots.
func (w *Worker) capacity() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c.s.Concurrency - w.running
}

// deliver runs a handler for h in a slot of its own.
func (w *Worker) deliver(h *held) bool {
	w.mu.Lock()
	w.running++
	w.mu.Unlock()
	w.handlers.Add(1)
	go w.handle(h)
	return true
}

// freeSlot ends a handler's hold on its slot and wakes the fetch loop.
func (w *Worker) freeSlot() {
	w.mu.Lock()
	w.running--
	w.mu.Unlock()
	notify(w.c.changed)
}

// handle runs the handler for h and settles its outcome.
func (w *Worker) handle(h *held) {
	defer w.handlers.Done()
	if w.transactor != nil {
		w.handleTx(h)
		return
	}
	ctx := w.c.s.hooks.startHandle(h.ctx, h.lease)
	start := time.Now()
	err := callHandler(w.c.s.Handler, ctx, h.lease)
	lost := w.c.deactivate(h)
	w.freeSlot()
	o := outcomeOf(err)
	w.handled(h, o, err, lost, time.Since(start))
	if lost {
		w.c.release(h)
		return
	}
	w.c.settle(h, w.backoff(h, o))
}

// backoff chooses the delay of a retry that the handler left to the retry
// policy. After a hard stop the event is retried at once instead: the
// failure is likely the cancellation itself, and another consumer should
// take the event without waiting.
func (w *Worker) backoff(h *held, o outcome) outcome {
	if !o.backoff {
		return o
	}
	if errors.Is(context.Cause(h.ctx), ErrStopped) {
		o.delay = 0
		return o
	}
	o.delay = clampDelay(w.c.s.RetryPolicy(h.lease, o.err))
	return o
}

// handleTx runs the TxHandler for h inside a transaction that also acks,
// so the handler's writes and the ack commit or roll back together. The
// worker's own calls in the transaction (its begin, the ack and the
// commit) are each bounded by the call timeout, the handler is not: a
// transaction that cannot begin or commit in time gives the lease up
// like a failed ack, and its slot is freed.
func (w *Worker) handleTx(h *held) {
	start := time.Now()
	var (
		ran        bool
		handlerErr error
		lost       bool
	)
	ctx, bound := newCallBound(h.ctx, w.c.s.callTimeout)
	defer bound.end()
	bound.start("begin")
	err := w.transactor.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
		if !bound.stop() {
			// The begin outlasted its bound: do not start the handler.
			return context.Cause(ctx)
		}
		ran = true
		ctx = w.c.s.hooks.startHandle(ctx, h.lease)
		handlerErr = callTxHandler(w.c.s.TxHandler, ctx, tx, h.lease)
		lost = w.c.deactivate(h)
		switch {
		case handlerErr != nil:
			return handlerErr
		case lost:
			// Roll back: the ack would be fenced off anyway.
			return rheo.Errorf(rheo.ErrStaleLease, "lease %s was lost while the handler ran", h.lease.LeaseID)
		}
		ackCtx, cancel := context.WithTimeout(ctx, w.c.s.callTimeout)
		defer cancel()
		if err := tx.Ack(ackCtx, h.lease.LeaseID); err != nil {
			return err
		}
		bound.start("commit")
		return nil
	})
	err = bound.explain(err)
	w.freeSlot()
	if !ran {
		// The transaction did not begin, so the handler did not run.
		w.c.deactivate(h)
		if cause := context.Cause(h.ctx); cause != nil {
			// Stopped or lost before it began: give the event back.
			w.c.settle(h, outcome{kind: OutcomeRetry, reason: cause.Error()})
			return
		}
		w.c.ackFailed(h, "begin", err)
		return
	}
	o := outcomeOf(handlerErr)
	w.handled(h, o, handlerErr, lost, time.Since(start))
	switch {
	case lost:
		w.c.release(h)
	case handlerErr != nil:
		w.c.settle(h, w.backoff(h, o))
	case err != nil:
		w.c.ackFailed(h, "ack", err)
	default:
		w.c.release(h)
		w.c.acked(h)
	}
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
