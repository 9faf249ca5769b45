package worker

import (
	"context"
	"sync"
	"time"

	"github.com/rheo-go/rheo"
)

// ackRequest is one lease to ack; done, when not nil, receives the result.
type ackRequest struct {
	h    *held
	done chan<- error
}

func (r ackRequest) reply(err error) {
	if r.done != nil {
		r.done <- err
	}
}

// acker writes acks in batches (AckBatch): a batch is written when it is
// full, when AckFlushInterval has passed since it began to fill, when the
// fetch loop is starved by unacked leases, and on stop; in a group ordered
// by key or partition, as soon as the previous batch is written.
type acker struct {
	c *core

	mu      sync.Mutex
	pending []ackRequest
	stopped bool

	queued chan struct{} // at least one ack is pending
	urgent chan struct{} // write the pending acks now
}

func newAcker(c *core) *acker {
	return &acker{c: c, queued: make(chan struct{}, 1), urgent: make(chan struct{}, 1)}
}

// add queues an ack. It returns false, queuing nothing, once the acker has
// stopped.
func (a *acker) add(r ackRequest) bool {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return false
	}
	a.pending = append(a.pending, r)
	full := len(a.pending) >= a.c.s.AckBatchSize
	a.mu.Unlock()
	notify(a.queued)
	if full {
		notify(a.urgent)
	}
	return true
}

// flushNow asks for the pending acks to be written without waiting for
// the flush interval.
func (a *acker) flushNow() {
	if a.count() > 0 {
		notify(a.urgent)
	}
}

func (a *acker) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending)
}

// take removes up to one batch of pending acks.
func (a *acker) take() []ackRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := min(len(a.pending), a.c.s.AckBatchSize)
	batch := a.pending[:n:n]
	a.pending = a.pending[n:]
	return batch
}

// run writes batches until stop is closed, then writes every pending ack
// and refuses new ones.
func (a *acker) run(stop <-chan struct{}) {
	for {
		select {
		case <-a.queued:
		case <-stop:
			a.drain()
			return
		}
		// In an ordered group an unwritten ack holds back its key's next
		// event in the database, so it is written at once; what comes
		// in while it is written makes the next batch.
		if a.count() < a.c.s.AckBatchSize && !a.c.ordered() {
			t := time.NewTimer(a.c.s.AckFlushInterval)
			select {
			case <-t.C:
			case <-a.urgent:
			case <-stop:
			}
			t.Stop()
		}
		select {
		case <-a.urgent:
		default:
		}
		a.flush(a.take())
		if a.count() > 0 {
			notify(a.queued)
		}
	}
}

func (a *acker) drain() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	for batch := a.take(); len(batch) > 0; batch = a.take() {
		a.flush(batch)
	}
}

// flush writes one batch and settles each lease by its result.
func (a *acker) flush(batch []ackRequest) {
	if len(batch) == 0 {
		return
	}
	c := a.c
	ids := make([]string, len(batch))
	for i, r := range batch {
		ids[i] = r.h.lease.LeaseID
	}
	ctx, cancel := context.WithTimeout(c.bg, c.s.callTimeout)
	results, err := c.drv.AckBatch(ctx, ids)
	cancel()
	if err != nil {
		for _, r := range batch {
			c.ackFailed(r.h, "ack", err)
			r.reply(err)
		}
		return
	}
	ok := make(map[string]bool, len(results))
	for _, res := range results {
		ok[res.LeaseID] = res.OK
	}
	for _, r := range batch {
		if ok[r.h.lease.LeaseID] {
			c.release(r.h)
			c.acked(r.h)
			r.reply(nil)
			continue
		}
		stale := rheo.Errorf(rheo.ErrStaleLease, "lease %s is no longer held", r.h.lease.LeaseID)
		c.ackFailed(r.h, "ack", stale)
		r.reply(stale)
	}
}
