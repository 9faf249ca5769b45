package worker

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/rheo-go/rheo"
)

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

// heldLater reports whether a retry's delay holds h's ordering key: a
// stop does not wait for it. w.mu must be held.
func (w *Worker) heldLater(h *held) bool {
	x := w.holds[orderKey(w.c.currentOrdering(), h.lease)]
	return x != nil && x.until.After(w.c.s.Clock.Now())
}
