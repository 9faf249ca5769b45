package worker

import (
	"math"
	"sync/atomic"
	"time"
)

// average is an exponentially weighted moving average of durations, safe
// for concurrent use. Each observation weighs averageWeight; the first
// sets it.
type average struct {
	ns atomic.Int64 // the average in nanoseconds, at least 1 once observed; 0 before
}

// averageWeight is the weight of the newest observation: the average
// follows a change of pace within a few dozen handler runs or fetches.
const averageWeight = 0.125

func (a *average) observe(d time.Duration) {
	v := max(int64(d), 1)
	for {
		old := a.ns.Load()
		next := v
		if old != 0 {
			next = max(old+int64(averageWeight*float64(v-old)), 1)
		}
		if a.ns.CompareAndSwap(old, next) {
			return
		}
	}
}

// get returns the average, or 0 before the first observation.
func (a *average) get() time.Duration { return time.Duration(a.ns.Load()) }

// pipeline is what the fetch sizing of a Worker reads: its handler slots,
// the leases queued for them, and the recent pace of handlers and
// fetches.
type pipeline struct {
	concurrency int           // handler slots
	idle        int           // slots without a handler running
	queued      int           // leases fetched and waiting for a slot
	handlerTime time.Duration // recent time of a handler run; 0 before the first
	fetchTime   time.Duration // recent time of a fetch call; 0 before the first
	maxDemand   int
	ackBatch    int // AckBatchSize: the room one ack batch frees
}

// lookahead is how many leases to keep queued beyond the idle slots: what
// the handlers take, by their recent pace, during two fetch calls, so that
// a fetch issued when half of it is left returns before the queue runs dry;
// and at least one per slot, so that a fetch slower than the recent ones
// still finds every slot a lease when it returns. With handlers too quick
// to measure it is MaxDemand.
func (p pipeline) lookahead() int {
	if p.handlerTime <= 0 || p.fetchTime <= 0 {
		return p.concurrency
	}
	n := math.Ceil(2 * float64(p.fetchTime) * float64(p.concurrency) / float64(p.handlerTime))
	if n >= float64(p.maxDemand) {
		return p.maxDemand
	}
	return max(int(n), p.concurrency)
}

// want is how many leases to fetch now (before the bound of MaxDemand)
// and the batch size worth waiting for: enough for the idle slots and the
// lookahead, once the queue has fallen to half of that; none while more
// than half is queued. The batch worth waiting for is the need, or the
// room one ack batch frees when the need is larger.
func (p pipeline) want() (n, full int) {
	target := p.idle + p.lookahead()
	need := target - p.queued
	if need <= 0 || 2*p.queued > target {
		return 0, 1
	}
	return need, max(min(need, p.ackBatch), 1)
}

// lowWater reports whether a queue of queued leases is at or below the
// level at which want asks for more: the fetch loop should hear of it.
func (p pipeline) lowWater() bool {
	return 2*p.queued <= p.idle+p.lookahead()
}
