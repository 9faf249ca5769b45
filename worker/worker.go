package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// Worker consumes a group by running a handler for every leased event,
// with at most Config.Concurrency handlers at once. Create it with New,
// run it with Start, and end it with Stop or StopAndCancel.
//
// Concurrency handler slots take leases from a local queue, which the
// fetch loop keeps filled ahead of them (see pipeline): every lease held
// counts against MaxDemand and is renewed, queued or not.
type Worker struct {
	c          *core
	transactor driver.Transactor // set for a TxHandler

	mu     sync.Mutex
	state  runState
	busy   int     // slots running a handler
	queue  []*held // fetched leases waiting for a slot, oldest first
	closed bool    // the fetch loop ended: the slots end once the queue is empty
	ready  *sync.Cond
	// holds are the ordering keys in use, by partition and by event key
	// whatever the ordering, so that a change of ordering finds them.
	holds map[string]*hold

	handlerTime average // recent time of a handler run

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
	w.ready = sync.NewCond(&w.mu)
	w.holds = map[string]*hold{}
	w.c.released = w.releaseKey
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
	for range w.c.s.Concurrency {
		w.handlers.Add(1)
		go w.slot()
	}
	go func() {
		defer close(fetchDone)
		w.c.fetchLoop(fetchCtx, w.stopFetch, w.want, w.deliver, nil)
	}()
	go func() {
		// Shutdown, in order: no more fetches; the queued leases are
		// given back; the handlers finish (renewed meanwhile); the acks
		// are written; renewal ends.
		<-fetchDone
		w.closeQueue()
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

// pipeline is the state the fetch sizing reads. w.mu must be held.
func (w *Worker) pipeline() pipeline {
	return pipeline{
		concurrency: w.c.s.Concurrency,
		idle:        w.c.s.Concurrency - w.busy,
		queued:      len(w.queue),
		handlerTime: w.handlerTime.get(),
		fetchTime:   w.c.fetchTime.get(),
		maxDemand:   w.c.s.MaxDemand,
		ackBatch:    w.c.s.AckBatchSize,
	}
}

// want is the fetch loop's demand: see pipeline.want.
func (w *Worker) want() (n, full int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pipeline().want()
}

// deliver queues h for the next free slot.
func (w *Worker) deliver(h *held) bool {
	w.mu.Lock()
	w.queue = append(w.queue, h)
	w.mu.Unlock()
	w.ready.Signal()
	return true
}

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

// hold is an ordering key in use.
type hold struct {
	leases int       // leases holding it: their handler runs or their outcome is not written yet
	until  time.Time // a retry holds it until then
}

// busy reports whether the key is in use at now.
func (x *hold) busy(now time.Time) bool { return x.leases > 0 || x.until.After(now) }

// runnable is the index of the oldest queued lease whose ordering key is
// free under the group's current ordering, or -1. w.mu must be held.
func (w *Worker) runnable() int {
	ordering := w.c.currentOrdering()
	now := w.c.s.Clock.Now()
	for i, h := range w.queue {
		key := orderKey(ordering, h.lease)
		if x := w.holds[key]; key == "" || x == nil || !x.busy(now) {
			return i
		}
	}
	return -1
}

// orderKey is what ordering serializes l under: its partition, or its
// partition and key (none for an event without a key); "" for none.
func orderKey(ordering rheo.Ordering, l rheo.Lease) string {
	switch {
	case ordering == rheo.OrderingPartition:
		return "p" + strconv.Itoa(l.Event.Partition)
	case ordering == rheo.OrderingKey && l.Event.Key != "":
		return "k" + strconv.Itoa(l.Event.Partition) + "/" + l.Event.Key
	}
	return ""
}

// orderKeys are the keys l holds while it runs: those of both orderings.
func orderKeys(l rheo.Lease) []string {
	keys := []string{orderKey(rheo.OrderingPartition, l)}
	if k := orderKey(rheo.OrderingKey, l); k != "" {
		keys = append(keys, k)
	}
	return keys
}

// releaseKey frees the ordering keys of a released lease, at once or,
// after a retry with a delay, once the clock has passed it.
func (w *Worker) releaseKey(h *held) {
	w.mu.Lock()
	keys := h.orderKeys
	h.orderKeys = nil
	if len(keys) == 0 {
		w.mu.Unlock()
		return
	}
	until := w.c.s.Clock.Now().Add(h.holdFor)
	for _, k := range keys {
		x := w.holds[k]
		x.leases--
		if h.holdFor > 0 && until.After(x.until) {
			x.until = until
		}
		if !x.busy(w.c.s.Clock.Now()) {
			delete(w.holds, k)
		}
	}
	w.mu.Unlock()
	w.ready.Broadcast()
	if h.holdFor <= 0 {
		return
	}
	at, release := w.c.s.Clock.At(until)
	go func() {
		defer release()
		select {
		case <-at:
		case <-w.done:
			return
		}
		w.mu.Lock()
		for _, k := range keys {
			if x := w.holds[k]; x != nil && !x.busy(w.c.s.Clock.Now()) {
				delete(w.holds, k)
			}
		}
		w.mu.Unlock()
		w.ready.Broadcast()
	}()
}

// closeQueue ends the slots' wait for leases and gives back the leases
// still queued: they are made claimable again at once. Those at their
// event's last attempt, which a give-back would dead-letter, stay queued
// for the slots to handle; after a hard stop the slots give them back too.
func (w *Worker) closeQueue() {
	var back, kept []*held
	w.mu.Lock()
	for _, h := range w.queue {
		if w.c.lastAttempt(h) && !w.heldLater(h) {
			kept = append(kept, h)
		} else {
			back = append(back, h)
		}
	}
	w.queue, w.closed = kept, true
	w.mu.Unlock()
	w.ready.Broadcast()
	w.c.giveBack(back, givenBack)
}

// heldLater reports whether a retry's delay holds h's ordering key: a
// stop does not wait for it. w.mu must be held.
func (w *Worker) heldLater(h *held) bool {
	x := w.holds[orderKey(w.c.currentOrdering(), h.lease)]
	return x != nil && x.until.After(w.c.s.Clock.Now())
}

// givenBack is the retry reason of a lease that was queued when the
// worker stopped.
const givenBack = "not processed: the worker stopped"

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

// settle carries out a handler's outcome. Retries and rejects are calls
// of their own, made beside the slot so that it takes its next lease at
// once; acks join the ack batch.
func (w *Worker) settle(h *held, o outcome) {
	if o.kind == OutcomeAck {
		w.c.settle(h, o)
		return
	}
	w.handlers.Add(1)
	go func() {
		defer w.handlers.Done()
		w.c.settle(h, o)
	}()
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
	took := time.Since(start)
	w.freeSlot(took)
	if !ran {
		// The transaction did not begin, so the handler did not run.
		w.c.deactivate(h)
		if cause := context.Cause(h.ctx); cause != nil {
			// Stopped or lost before it began: give the event back.
			w.settle(h, outcome{kind: OutcomeRetry, reason: cause.Error()})
			return
		}
		w.c.ackFailed(h, "begin", err)
		return
	}
	o := outcomeOf(handlerErr)
	w.handled(h, o, handlerErr, lost, took)
	switch {
	case lost:
		w.c.release(h)
	case handlerErr != nil:
		w.settle(h, w.backoff(h, o))
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
