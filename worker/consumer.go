package worker

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/softstop"
)

// Consumer hands a group's leases to the caller, for pipelines that
// process events their own way. Leases come from Leases, an iterator with
// bounded demand: at most Config.MaxDemand leases are held at once,
// counting those handed out and not settled yet. Every unsettled lease is
// renewed until it is settled or the consumer stops.
type Consumer struct {
	c *core

	mu        sync.Mutex
	state     runState
	iterating bool

	stopFetch     chan struct{}
	stopFetchOnce sync.Once
	finishOnce    sync.Once
	finish        func() // ends renewal and acking; set by Start
	done          chan struct{}
}

// NewConsumer checks cfg and returns a consumer for drv. Handler,
// TxHandler and Concurrency must be left zero. drv must stay open until
// the consumer has stopped.
func NewConsumer(drv driver.Driver, cfg *Config) (*Consumer, error) {
	s, err := cfg.settle(drv, false)
	if err != nil {
		return nil, err
	}
	return &Consumer{c: newCore(drv, s), stopFetch: make(chan struct{}), done: make(chan struct{})}, nil
}

// Start checks that the stream, group and partitions exist and starts
// renewal and ack batching. It fails with rheo.ErrAlreadyExists while
// another worker or consumer of the same stream and group runs on the same
// driver in this process.
//
// Cancelling ctx begins a soft stop in the background, as Stop does: the
// iteration ends and the consumer waits for the leases handed out to be
// settled. If some are still unsettled Config.SoftStopTimeout later (by
// Config.Clock), it stops as Stop does when its context ends: their
// contexts are cancelled with cause ErrStopped and they are left to
// expire. Done tells when the consumer has stopped.
func (cs *Consumer) Start(ctx context.Context) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.state != stateNew {
		return rheo.Errorf(rheo.ErrInvalidArgument, "the consumer for stream %q group %q was already started", cs.c.s.Stream, cs.c.s.Group)
	}
	release, err := cs.c.begin(ctx)
	if err != nil {
		return err
	}
	cs.state = stateRunning

	var cancelLeases context.CancelCauseFunc
	cs.c.leaseParent, cancelLeases = context.WithCancelCause(cs.c.bg)
	stopRenew, stopAcks := make(chan struct{}), make(chan struct{})
	renewDone, acksDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewDone)
		cs.c.renewLoop(stopRenew)
	}()
	go func() {
		defer close(acksDone)
		cs.c.acks.run(stopAcks)
	}()
	stopWatch := softstop.OnCancel(ctx, cs.c.s.Clock, cs.c.s.SoftStopTimeout, func(bound context.Context) { _ = cs.Stop(bound) })
	cs.finish = func() {
		close(stopAcks)
		<-acksDone
		close(stopRenew)
		<-renewDone
		cs.c.calls.Wait()
		cancelLeases(ErrStopped)
		stopWatch()
		release()
		cs.mu.Lock()
		cs.state = stateStopped
		cs.mu.Unlock()
		close(cs.done)
	}
	return nil
}

// Leases returns an iterator over the group's leases. It yields each lease
// with a nil error, or a nil lease with a fetch error (it keeps going
// after a back-off unless the loop stops). It fetches only while fewer
// than MaxDemand leases are held, waiting for wakeups or the poll interval
// when the group has nothing to claim, and it ends when ctx ends, when the
// loop breaks or when the consumer stops. A lease yielded must be settled
// by the caller, in any goroutine; leases fetched but not yet yielded when
// the loop breaks are made claimable again at once.
//
// Only one iteration may run at a time; a second yields an error.
func (cs *Consumer) Leases(ctx context.Context) iter.Seq2[*Lease, error] {
	return func(yield func(*Lease, error) bool) {
		cs.mu.Lock()
		switch {
		case cs.state == stateNew:
			cs.mu.Unlock()
			yield(nil, rheo.Errorf(rheo.ErrInvalidArgument, "the consumer was not started"))
			return
		case cs.state == stateStopped:
			cs.mu.Unlock()
			return
		case cs.iterating:
			cs.mu.Unlock()
			yield(nil, rheo.Errorf(rheo.ErrInvalidArgument, "the consumer's leases are already being iterated"))
			return
		}
		cs.iterating = true
		cs.mu.Unlock()
		defer func() {
			cs.mu.Lock()
			cs.iterating = false
			cs.mu.Unlock()
		}()
		cs.c.fetchLoop(ctx, cs.stopFetch,
			func() (int, int) { return cs.c.s.MaxDemand, cs.c.s.MaxDemand },
			func(h *held) bool { return yield(&Lease{Lease: h.lease, c: cs.c, h: h}, nil) },
			func(err error) bool { return yield(nil, err) })
	}
}

// Stop ends the iteration (after the lease it is yielding, if any) and
// waits until every lease handed out is settled, renewing them meanwhile;
// then it writes the pending acks and ends renewal. If ctx ends first,
// Stop returns ctx's error after ending renewal: the leases still
// unsettled are left to expire and their contexts are cancelled with cause
// ErrStopped. Settling such a lease later still reaches the database.
func (cs *Consumer) Stop(ctx context.Context) error {
	cs.mu.Lock()
	if cs.state == stateNew {
		cs.state = stateStopped
		cs.finishOnce.Do(func() { close(cs.done) })
	}
	running := cs.state == stateRunning
	cs.mu.Unlock()
	if !running {
		<-cs.done
		return nil
	}
	cs.stopFetchOnce.Do(func() { close(cs.stopFetch) })
	// A fetch in flight tracks its leases before this returns, and no
	// fetch starts after it.
	cs.c.fetchMu.Lock()
	cs.c.fetchMu.Unlock()

	var err error
	for err == nil && cs.c.heldCount() > 0 {
		select {
		case <-cs.c.emptied:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	cs.finishOnce.Do(cs.finish)
	<-cs.done
	return err
}

// Done is closed once the consumer has stopped entirely.
func (cs *Consumer) Done() <-chan struct{} { return cs.done }

// Lease is a lease handed out by a Consumer. Settle it with exactly one of
// Ack, Retry or Reject; until then the consumer renews it. A second
// settle, or a settle of a lease that renewal found lost, fails with
// rheo.ErrStaleLease without reaching the database.
type Lease struct {
	rheo.Lease

	c       *core
	h       *held
	settled atomic.Bool
}

// Context is cancelled when the lease is settled, when renewal finds it
// lost (cause rheo.ErrStaleLease) and when the consumer stops with the
// lease unsettled (cause ErrStopped).
func (l *Lease) Context() context.Context { return l.h.ctx }

// claim marks the lease settled by this call and stops its renewal.
func (l *Lease) claim() error {
	if !l.settled.CompareAndSwap(false, true) {
		return rheo.Errorf(rheo.ErrStaleLease, "lease %s was already settled", l.LeaseID)
	}
	if l.c.deactivate(l.h) {
		return rheo.Errorf(rheo.ErrStaleLease, "lease %s was lost", l.LeaseID)
	}
	return nil
}

// Ack settles the lease as done. The ack joins the consumer's batch and
// Ack returns once the batch is written (or ctx ends; the ack is then
// still written). On failure the settle policy applies as for a worker:
// a stale lease is dropped, an unknown outcome is left to expire, a
// definite failure retries the event at once.
func (l *Lease) Ack(ctx context.Context) error {
	if err := l.claim(); err != nil {
		return err
	}
	done := make(chan error, 1)
	if !l.c.acks.add(ackRequest{h: l.h, done: done}) {
		ctx, cancel := context.WithTimeout(ctx, l.c.s.callTimeout)
		defer cancel()
		return l.c.ackAlone(ctx, l.h)
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retry makes the event claimable again after delay (negative counts as
// 0), or dead-letters it when the group's attempts are used up; reason is
// stored with a dead letter ("" stores "max_attempts"). The call is
// bounded by the worker's call timeout as well as by ctx. A failure
// leaves the lease to expire.
func (l *Lease) Retry(ctx context.Context, delay time.Duration, reason string) (rheo.RetryOutcome, error) {
	if err := l.claim(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, l.c.s.callTimeout)
	defer cancel()
	return l.c.retry(ctx, l.h, max(delay, 0), reason)
}

// Reject dead-letters the event now; reason is stored with the dead
// letter ("" stores "rejected"). The call is bounded by the worker's call
// timeout as well as by ctx. A failure leaves the lease to expire.
func (l *Lease) Reject(ctx context.Context, reason string) error {
	if err := l.claim(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, l.c.s.callTimeout)
	defer cancel()
	return l.c.reject(ctx, l.h, reason)
}
