package worker

import (
	"container/heap"
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
