package worker

import (
	"context"
	"sync"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/softstop"
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

// runState is where a Worker or Consumer is in its run.
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
// The handlers' contexts carry ctx's values, not its cancellation.
// Cancelling ctx begins a soft stop in the background, as Stop does: no
// more fetches, the queued leases are given back, the running handlers
// finish and their outcomes are written. If they are still running
// Config.SoftStopTimeout later (by Config.Clock), the stop turns hard, as
// StopAndCancel's: their contexts are cancelled with cause ErrStopped.
// Done tells when the worker has stopped. So the usual shutdown on a
// signal loses no work in flight:
//
//	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
//	defer cancel()
//	if err := w.Start(ctx); err != nil { … }
//	<-w.Done()
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
	stopWatch := softstop.OnCancel(ctx, w.c.s.Clock, w.c.s.SoftStopTimeout, func(bound context.Context) { _ = w.Stop(bound) })

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

// givenBack is the retry reason of a lease that was queued when the
// worker stopped.
const givenBack = "not processed: the worker stopped"
