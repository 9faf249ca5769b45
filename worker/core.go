package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
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

// fetchLoop fetches leases while there is demand and hands each to
// deliver, until stop is closed, ctx ends (which also aborts a fetch in
// flight) or deliver or failed returns false. want tells how many leases
// the caller would like fetched now (before the bound of MaxDemand) and
// full the size of a batch worth waiting for, at least 1. failed, when not
// nil, is told of each fetch error.
//
// It fetches again at once after a full batch or when demand grows after
// one; after a short batch it waits for a wakeup of its partitions, an
// event retried without delay, or the poll interval. Fetch errors back
// off from 100ms, doubling to 5s, each wait jittered by ±20%.
//
// After a full batch, when MaxDemand leaves room for less than full, the
// next fetch waits up to refillWindow for that room: the acks in flight
// free theirs within it, and one large fetch costs about what a small one
// does.
func (c *core) fetchLoop(ctx context.Context, stop <-chan struct{}, want func() (n, full int), deliver func(*held) bool, failed func(error) bool) {
	wake, unsubscribe := c.drv.Wakeups(c.s.Stream)
	defer unsubscribe()
	var poll <-chan time.Time
	releasePoll := func() {}
	defer func() { releasePoll() }()
	refill := time.NewTimer(refillWindow)
	refill.Stop()
	refresh, releaseRefresh := c.s.Clock.At(c.s.Clock.Now().Add(c.s.PollInterval))
	defer func() { releaseRefresh() }()
	refilling := false // a full batch came back less than refillWindow ago
	var backoff time.Duration
	ready := true // fetch as soon as there is demand
	for {
		if ready {
			wanted, full := want()
			n, starved := c.demand(wanted)
			if n > 0 && (!refilling || n >= full) {
				hs, stopped, err := c.fetchAndTrack(ctx, stop, n)
				if stopped {
					return
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					// backoff is the nominal step; each wait is jittered so
					// that workers that lost the database together do not
					// come back together.
					backoff = min(max(2*backoff, minFetchBackoff), maxFetchBackoff)
					wait := jittered(backoff, rand.Float64())
					c.fetchFailed(err, wait)
					if failed != nil && !failed(err) {
						return
					}
					if !pause(ctx, stop, wait) {
						return
					}
					continue
				}
				backoff = 0
				ready = len(hs) == n
				refilling = ready
				if refilling {
					refill.Reset(refillWindow)
				}
				releasePoll()
				poll, releasePoll = c.s.Clock.At(c.s.Clock.Now().Add(c.s.PollInterval))
				for i, h := range hs {
					if !deliver(h) {
						c.giveBack(hs[i+1:], "not processed: the consumer stopped iterating")
						return
					}
				}
				continue
			}
			if starved {
				c.acks.flushNow()
			}
		}
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-c.changed:
			if c.claimable.Swap(false) {
				ready = true
			}
			if c.unblocked.Swap(false) && !ready {
				// Settles come one by one: fetch once there is room for
				// a whole batch, or within refillWindow, as after a full
				// batch, rather than once per settle.
				ready = true
				refilling = true
				refill.Reset(refillWindow)
			}
		case w, ok := <-wake:
			if !ok {
				wake = nil
			} else if c.wants(w.Partition) {
				ready = true
			}
		case <-poll:
			ready = true
		case <-refill.C:
			refilling = false
		case <-refresh:
			c.refreshOrdering(ctx)
			releaseRefresh()
			refresh, releaseRefresh = c.s.Clock.At(c.s.Clock.Now().Add(c.s.PollInterval))
		}
	}
}

// fetchAndTrack fetches up to n leases and tracks them, unless stop is
// already closed.
func (c *core) fetchAndTrack(ctx context.Context, stop <-chan struct{}, n int) (hs []*held, stopped bool, err error) {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	select {
	case <-stop:
		return nil, true, nil
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.callTimeout)
	defer cancel()
	start := time.Now()
	leases, err := c.drv.Fetch(ctx, c.s.Stream, c.s.Group, &rheo.FetchOptions{
		MaxCount:      n,
		ConsumerID:    c.s.ConsumerID,
		LeaseDuration: c.s.LeaseDuration,
		Partitions:    c.s.Partitions,
	})
	if err != nil {
		return nil, false, err
	}
	took := time.Since(start)
	c.fetchTime.observe(took)
	for _, x := range c.s.hooks.fetched {
		x.Fetched(c.bg, FetchInfo{Requested: n, Count: len(leases), Duration: took})
	}
	hs = make([]*held, len(leases))
	for i, l := range leases {
		hs[i] = c.track(l)
	}
	return hs, false, nil
}

// pause waits d of real time; false means stop or ctx ended first.
func pause(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}

func (c *core) fetchFailed(err error, backoff time.Duration) {
	c.log.LogAttrs(c.bg, slog.LevelWarn, "fetch failed",
		slog.Any(LogKeyError, err), slog.Duration(LogKeyBackoff, backoff))
	for _, x := range c.s.hooks.fetchFailed {
		x.FetchFailed(c.bg, FetchErrorInfo{Err: err, Backoff: backoff})
	}
}

// lastAttempt reports whether h is its event's last attempt: a retry
// would dead-letter it.
func (c *core) lastAttempt(h *held) bool {
	return c.maxAttempts > 0 && h.lease.Attempt >= c.maxAttempts
}

// giveBack returns fetched leases that will not be delivered: they are
// made claimable again at once, with reason as the retry's.
func (c *core) giveBack(hs []*held, reason string) {
	for _, h := range hs {
		c.deactivate(h)
		ctx, cancel := context.WithTimeout(c.bg, c.s.callTimeout)
		_, _ = c.retry(ctx, h, 0, reason)
		cancel()
	}
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

// isStale reports whether err says the lease is no longer held.
func isStale(err error) bool {
	return errors.Is(err, rheo.ErrStaleLease) || errors.Is(err, rheo.ErrReceiptMismatch)
}

// isUncertain reports whether err leaves the outcome of a call unknown or
// the database unreachable.
func isUncertain(err error) bool {
	return errors.Is(err, rheo.ErrBackendUnavailable) || errors.Is(err, rheo.ErrAmbiguous) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// settle carries out a handler's outcome.
func (c *core) settle(h *held, o outcome) {
	if o.kind == OutcomeAck {
		c.acks.add(ackRequest{h: h})
		return
	}
	ctx, cancel := context.WithTimeout(c.bg, c.s.callTimeout)
	defer cancel()
	if o.kind == OutcomeReject {
		_ = c.reject(ctx, h, o.reason)
		return
	}
	_, _ = c.retry(ctx, h, o.delay, o.reason)
}

// retry makes h's event claimable again after delay, or dead-letters it at
// the attempt limit. A failure leaves the lease to expire.
func (c *core) retry(ctx context.Context, h *held, delay time.Duration, reason string) (rheo.RetryOutcome, error) {
	out, err := c.drv.Retry(ctx, h.lease.LeaseID, &rheo.RetryOptions{Reason: reason, Delay: delay})
	if err == nil && out != rheo.DeadLettered {
		// The event comes back after delay: its key waits for it.
		h.holdFor = delay
	}
	c.release(h)
	if err != nil {
		c.settleFailed(h, "retry", err, failedSettleAction(err))
		return "", err
	}
	if out == rheo.DeadLettered {
		c.deadLettered(h, reason)
		return out, nil
	}
	if delay == 0 {
		// No wakeup announces a retried event: fetch it without waiting
		// for the poll.
		c.claimable.Store(true)
		notify(c.changed)
	}
	for _, x := range c.s.hooks.retried {
		x.Retried(c.bg, RetryInfo{Lease: h.lease, Delay: delay, Reason: reason})
	}
	return out, nil
}

// reject dead-letters h's event now. A failure leaves the lease to expire.
func (c *core) reject(ctx context.Context, h *held, reason string) error {
	err := c.drv.Reject(ctx, h.lease.LeaseID, reason)
	c.release(h)
	if err != nil {
		c.settleFailed(h, "reject", err, failedSettleAction(err))
		return err
	}
	c.deadLettered(h, reason)
	return nil
}

// failedSettleAction is what a failed retry or reject leaves: a stale
// lease is simply dropped, anything else is left to expire.
func failedSettleAction(err error) SettleAction {
	if isStale(err) {
		return ActionDropped
	}
	return ActionLeftToExpire
}

// ackFailed applies the settle policy to an ack (op "ack") or the begin of
// a transactional handler's transaction (op "begin") that failed with err: a
// stale lease is dropped; an unreachable database or an unknown outcome
// leaves the lease to expire (the ack may have committed, and fencing
// keeps a late duplicate safe); a definite failure retries the event at
// once.
func (c *core) ackFailed(h *held, op string, err error) {
	switch {
	case isStale(err):
		c.release(h)
		c.settleFailed(h, op, err, ActionDropped)
	case isUncertain(err):
		c.release(h)
		c.settleFailed(h, op, err, ActionLeftToExpire)
	default:
		c.settleFailed(h, op, err, ActionRetried)
		ctx, cancel := context.WithTimeout(c.bg, c.s.callTimeout)
		defer cancel()
		_, _ = c.retry(ctx, h, 0, op+" failed: "+err.Error())
	}
}

// ackAlone acks h with its own call, for a Consumer lease settled after
// the batcher stopped.
func (c *core) ackAlone(ctx context.Context, h *held) error {
	if err := c.drv.Ack(ctx, h.lease.LeaseID); err != nil {
		c.ackFailed(h, "ack", err)
		return err
	}
	c.release(h)
	c.acked(h)
	return nil
}

func (c *core) acked(h *held) {
	c.settled()
	for _, x := range c.s.hooks.acked {
		x.Acked(c.bg, AckInfo{Lease: h.lease})
	}
}

// currentOrdering is the group's ordering as last read.
func (c *core) currentOrdering() rheo.Ordering {
	o, _ := c.ordering.Load().(rheo.Ordering)
	return o
}

// refreshOrdering reads the group's ordering again; on failure the last
// one read stays.
func (c *core) refreshOrdering(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.s.callTimeout)
	defer cancel()
	groups, err := c.drv.ListGroups(ctx, c.s.Stream)
	if err != nil {
		return
	}
	for _, g := range groups {
		if g.Name == c.s.Group && g.Ordering != c.currentOrdering() {
			c.ordering.Store(g.Ordering)
			c.log.LogAttrs(c.bg, slog.LevelInfo, "group ordering changed", slog.String(LogKeyOrdering, string(g.Ordering)))
		}
	}
}

// ordered reports whether the group's ordering is key or partition: a
// settle may then make later events claimable.
func (c *core) ordered() bool {
	o := c.currentOrdering()
	return o == rheo.OrderingKey || o == rheo.OrderingPartition
}

// settled tells the fetch loop of a settle that may have made later
// events of an ordered group claimable.
func (c *core) settled() {
	if c.ordered() {
		c.unblocked.Store(true)
		notify(c.changed)
	}
}

func (c *core) deadLettered(h *held, reason string) {
	c.settled()
	c.log.LogAttrs(c.bg, slog.LevelWarn, "event dead-lettered", append(leaseAttrs(h.lease), slog.String(LogKeyError, reason))...)
	for _, x := range c.s.hooks.deadLettered {
		x.DeadLettered(c.bg, DeadLetterInfo{Lease: h.lease, Reason: reason})
	}
}

func (c *core) settleFailed(h *held, op string, err error, action SettleAction) {
	c.log.LogAttrs(c.bg, slog.LevelWarn, "settle failed", append(leaseAttrs(h.lease),
		slog.String(LogKeyOp, op), slog.Any(LogKeyError, err), slog.String(LogKeyAction, string(action)))...)
	for _, x := range c.s.hooks.settleFailed {
		x.SettleFailed(c.bg, SettleErrorInfo{Lease: h.lease, Op: op, Err: err, Action: action})
	}
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
