package worker

import (
	"container/heap"
	"context"
	"log/slog"
	"time"
)

// renewals is the schedule of the leases to renew: a min-heap by renewAt
// of the active leases whose renewal is not in flight. Scheduling,
// cancelling and taking the next due lease cost O(log n) in the leases
// held. Guarded by core.mu.
type renewals []*held

// notScheduled is the index of a lease that is not in the schedule.
const notScheduled = -1

func (r renewals) Len() int           { return len(r) }
func (r renewals) Less(i, j int) bool { return r[i].renewAt.Before(r[j].renewAt) }

func (r renewals) Swap(i, j int) {
	r[i], r[j] = r[j], r[i]
	r[i].index, r[j].index = i, j
}

// Push implements heap.Interface; use schedule.
func (r *renewals) Push(x any) {
	h := x.(*held)
	h.index = len(*r)
	*r = append(*r, h)
}

// Pop implements heap.Interface; use next or cancel.
func (r *renewals) Pop() any {
	old := *r
	h := old[len(old)-1]
	old[len(old)-1] = nil // let a settled lease be collected
	*r = old[:len(old)-1]
	h.index = notScheduled
	return h
}

// schedule adds h, due at h.renewAt, and reports whether it is now the
// first due.
func (r *renewals) schedule(h *held) (first bool) {
	heap.Push(r, h)
	return h.index == 0
}

// cancel removes h if it is scheduled.
func (r *renewals) cancel(h *held) {
	if h.index != notScheduled {
		heap.Remove(r, h.index)
	}
}

// due removes and returns the first lease due at or before now, or nil.
func (r *renewals) due(now time.Time) *held {
	if len(*r) == 0 || (*r)[0].renewAt.After(now) {
		return nil
	}
	return heap.Pop(r).(*held)
}

// next is when the first scheduled renewal is due, or zero when none is.
func (r renewals) next() time.Time {
	if len(r) == 0 {
		return time.Time{}
	}
	return r[0].renewAt
}

// renewLoop renews every active lease at about half its duration until
// stop is closed.
func (c *core) renewLoop(stop <-chan struct{}) {
	for {
		next := c.startDueRenewals()
		var at <-chan time.Time
		release := func() {}
		if !next.IsZero() {
			at, release = c.s.Clock.At(next)
		}
		select {
		case <-stop:
			release()
			return
		case <-at:
		case <-c.renewKick:
		}
		release()
	}
}

// startDueRenewals starts the renewals that are due and returns when the
// next one is, or zero when none is scheduled.
func (c *core) startDueRenewals() (next time.Time) {
	now := c.s.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for h := c.schedule.due(now); h != nil; h = c.schedule.due(now) {
		h.renewing = true
		c.calls.Add(1)
		go c.renew(h)
	}
	return c.schedule.next()
}

// renew renews h once. A lease found stale is dropped and its context
// cancelled with the renewal's error as the cause; any other failure is
// tried again after a tenth of the lease duration.
func (c *core) renew(h *held) {
	defer c.calls.Done()
	ctx, cancel := context.WithTimeout(c.bg, c.s.callTimeout)
	expires, err := c.drv.Renew(ctx, h.lease.LeaseID, c.s.LeaseDuration)
	cancel()
	now := c.s.Clock.Now()

	c.mu.Lock()
	h.renewing = false
	if !h.active {
		// The outcome is known and being settled; the settle tells.
		c.mu.Unlock()
		return
	}
	if isStale(err) {
		h.active, h.lost = false, true
		delete(c.leases, h.lease.LeaseID)
		empty := len(c.leases) == 0
		c.mu.Unlock()
		c.log.LogAttrs(c.bg, slog.LevelWarn, "lease lost", append(leaseAttrs(h.lease), slog.Any(LogKeyError, err))...)
		for _, x := range c.s.hooks.leaseLost {
			x.LeaseLost(c.bg, LeaseLostInfo{Lease: h.lease, Err: err})
		}
		h.cancel(err)
		notify(c.changed)
		if empty {
			notify(c.emptied)
		}
		return
	}
	if err == nil {
		h.renewAt = now.Add(c.s.LeaseDuration / 2)
	} else {
		h.renewAt = now.Add(c.s.LeaseDuration / 10)
	}
	first := c.schedule.schedule(h)
	c.mu.Unlock()
	if first {
		notify(c.renewKick)
	}

	if err != nil {
		c.log.LogAttrs(c.bg, slog.LevelWarn, "renew failed", append(leaseAttrs(h.lease), slog.Any(LogKeyError, err))...)
	}
	for _, x := range c.s.hooks.renewed {
		x.Renewed(c.bg, RenewInfo{Lease: h.lease, ExpiresAt: expires, Err: err})
	}
}
