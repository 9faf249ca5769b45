package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// ErrStopped is the cause (context.Cause) with which a hard stop cancels
// handler contexts, and with which a stopped Consumer cancels the contexts
// of the leases it handed out and that are still unsettled.
var ErrStopped = errors.New("worker stopped")

// core is the machinery shared by Worker and Consumer: the table of held
// leases, the fetch loop, renewal and settling.
type core struct {
	drv driver.Driver
	s   *settings
	log *slog.Logger

	// bg carries the values of the context given to Start and is never
	// cancelled: renewals, settles and hooks run under it, so that they
	// still happen during and after a stop. leaseParent is the parent of
	// every lease's context. Both are set by begin.
	bg          context.Context
	leaseParent context.Context

	mu       sync.Mutex
	leases   map[string]*held // every lease held, by lease id
	schedule renewals         // the active leases not being renewed, by renewAt

	// fetchMu is held from the check for a stop to the tracking of the
	// fetched leases, so that a stop can wait out a fetch in flight.
	fetchMu sync.Mutex

	changed   chan struct{} // demand may have grown, or claimable is set
	claimable atomic.Bool   // an event was retried without delay
	unblocked atomic.Bool   // a settle in an ordered group may have made events claimable
	// ordering is the group's, as begin found it and refreshOrdering
	// re-reads it every PollInterval. Under key or partition a settle can
	// make later events claimable (reference §3.3), which no wakeup announces.
	ordering  atomic.Value  // rheo.Ordering
	renewKick chan struct{} // the renewal schedule changed
	emptied   chan struct{} // the last held lease was released

	acks  *acker
	calls sync.WaitGroup // renewals in flight

	// maxAttempts is the group's, as begin found it; 0 if unknown.
	maxAttempts int

	// released, when set, is told of every lease released (Worker: to
	// free its ordering key).
	released func(*held)

	// fetchTime is the recent time of a fetch call, which the worker's
	// fetch sizing reads.
	fetchTime average
}

// held is one lease the worker holds, from fetch until its settle is
// written (or given up).
type held struct {
	lease  rheo.Lease
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Guarded by core.mu.
	renewAt  time.Time
	index    int  // its place in core.schedule, or notScheduled
	active   bool // renewed: queued, its handler runs, or its Consumer lease is unsettled
	renewing bool // a renewal is in flight
	lost     bool // a renewal found it stale

	// holdFor is how long the lease's ordering key stays held after its
	// release: its retry's delay. Written before the release, by the
	// goroutine that releases it.
	holdFor time.Duration
	// orderKeys are the keys the lease holds from the start of its
	// handler to its release, under either ordering (see orderKeys).
	// Guarded by Worker.mu.
	orderKeys []string
}

func newCore(drv driver.Driver, s *settings) *core {
	c := &core{
		drv:       drv,
		s:         s,
		log:       s.Logger.With(LogKeyStream, s.Stream, LogKeyGroup, s.Group, LogKeyConsumerID, s.ConsumerID),
		leases:    map[string]*held{},
		changed:   make(chan struct{}, 1),
		renewKick: make(chan struct{}, 1),
		emptied:   make(chan struct{}, 1),
	}
	c.acks = newAcker(c)
	return c
}

// notify signals ch without blocking; one pending signal is enough.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// begin claims the (driver, stream, group) registry entry, checks that
// the stream, group and partitions exist and reads the group's
// max_attempts and ordering. It returns the function that releases the
// registry entry.
func (c *core) begin(ctx context.Context) (func(), error) {
	release, err := register(c.drv, c.s.Stream, c.s.Group)
	if err != nil {
		return nil, err
	}
	checkCtx, cancel := context.WithTimeout(ctx, c.s.callTimeout)
	defer cancel()
	if _, err := c.drv.Lag(checkCtx, c.s.Stream, c.s.Group, c.s.Partitions); err != nil {
		release()
		return nil, fmt.Errorf("check stream %q group %q: %w", c.s.Stream, c.s.Group, err)
	}
	groups, err := c.drv.ListGroups(checkCtx, c.s.Stream)
	if err != nil {
		release()
		return nil, fmt.Errorf("check stream %q group %q: %w", c.s.Stream, c.s.Group, err)
	}
	for _, g := range groups {
		if g.Name == c.s.Group {
			c.maxAttempts = g.MaxAttempts
			c.ordering.Store(g.Ordering)
		}
	}
	c.bg = context.WithoutCancel(ctx)
	return release, nil
}

// track adds a fetched lease to the table and schedules its renewal.
func (c *core) track(l rheo.Lease) *held {
	ctx, cancel := context.WithCancelCause(c.leaseParent)
	h := &held{lease: l, ctx: ctx, cancel: cancel, active: true, index: notScheduled,
		renewAt: c.s.Clock.Now().Add(c.s.LeaseDuration / 2)}
	c.mu.Lock()
	c.leases[l.LeaseID] = h
	first := c.schedule.schedule(h)
	c.mu.Unlock()
	if first {
		// Leases fetched later are due later: the renew loop needs to
		// hear only of a new first.
		notify(c.renewKick)
	}
	if l.Attempt > 1 {
		for _, x := range c.s.hooks.redelivered {
			x.Redelivered(c.bg, RedeliveryInfo{Lease: l})
		}
	}
	return h
}

// deactivate stops renewing h, because its outcome is known, and reports
// whether a renewal had already found it lost.
func (c *core) deactivate(h *held) (lost bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.active = false
	c.schedule.cancel(h)
	return h.lost
}

// release forgets h: it is settled, or given up.
func (c *core) release(h *held) {
	c.mu.Lock()
	_, ok := c.leases[h.lease.LeaseID]
	delete(c.leases, h.lease.LeaseID)
	c.schedule.cancel(h)
	empty := len(c.leases) == 0
	c.mu.Unlock()
	h.cancel(nil)
	if c.released != nil {
		c.released(h)
	}
	if ok {
		notify(c.changed)
		if empty {
			notify(c.emptied)
		}
	}
}

// heldCount is the number of leases held.
func (c *core) heldCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.leases)
}

// demand bounds want, the leases the caller would like fetched now, by
// the room MaxDemand leaves. starved reports that leases held, most of
// them waiting for their settle, keep the fetch below want.
func (c *core) demand(want int) (n int, starved bool) {
	free := c.s.MaxDemand - c.heldCount()
	return max(min(want, free), 0), free < want
}

// wants reports whether a wakeup concerns the configured partitions.
func (c *core) wants(partition int) bool {
	return c.s.Partitions == nil || slices.Contains(c.s.Partitions, partition)
}

// leaseAttrs are the log attributes that identify a lease.
func leaseAttrs(l rheo.Lease) []slog.Attr {
	return []slog.Attr{
		slog.String(LogKeyLeaseID, l.LeaseID),
		slog.String(LogKeyEventID, l.Event.ID),
		slog.Int(LogKeyPartition, l.Event.Partition),
		slog.Int64(LogKeySequence, l.Event.Sequence),
		slog.Int(LogKeyAttempt, l.Attempt),
	}
}
