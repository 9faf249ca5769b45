package worker

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/rheo-go/rheo"
)

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
