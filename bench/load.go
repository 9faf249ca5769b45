package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// drainTimeout bounds every wait for a workload's events to be handled.
const drainTimeout = 10 * time.Minute

// runProducers sends events 0..n-1 with producers goroutines in calls of
// up to batch events: producer p sends the calls whose index is p modulo
// producers. send gets the index of the call's first event and its count.
func runProducers(ctx context.Context, n, producers, batch int, send func(ctx context.Context, producer, first, count int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	calls := (n + batch - 1) / batch
	for p := range producers {
		g.Go(func() error {
			for c := p; c < calls; c += producers {
				first := c * batch
				if err := send(ctx, p, first, min(batch, n-first)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// scheduled is one event of an open-loop run: its index and intended send
// time.
type scheduled struct {
	i  int
	at time.Time
}

// maxOpenLoopBatch caps how many due events one call sends.
const maxOpenLoopBatch = 1000

// openLoop sends n events at rate events/s from now, whatever the system's
// speed: event i is due at start + i/rate. Producer p owns the events whose
// index is p modulo producers and sends, in one call, every event of its
// own that is due, so a slow call makes the next one bigger instead of
// slowing the schedule.
func openLoop(ctx context.Context, n, rate, producers int, send func(ctx context.Context, producer int, due []scheduled) error) error {
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	at := func(i int) time.Time { return start.Add(time.Duration(i) * interval) }
	g, ctx := errgroup.WithContext(ctx)
	for p := range producers {
		g.Go(func() error {
			due := make([]scheduled, 0, maxOpenLoopBatch)
			for next := p; next < n; {
				if wait := time.Until(at(next)); wait > 0 {
					t := time.NewTimer(wait)
					select {
					case <-ctx.Done():
						t.Stop()
						return ctx.Err()
					case <-t.C:
					}
				}
				now := time.Now()
				due = due[:0]
				for ; next < n && !at(next).After(now) && len(due) < maxOpenLoopBatch; next += producers {
					due = append(due, scheduled{i: next, at: at(next)})
				}
				if err := send(ctx, p, due); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// recorder keeps, per event index, the delay from the event's intended
// send time to the first start of its handler.
type recorder struct {
	mu     sync.Mutex
	delays []time.Duration
	seen   []bool
	bad    atomic.Int64
}

func newRecorder(n int) *recorder {
	return &recorder{delays: make([]time.Duration, n), seen: make([]bool, n)}
}

// record notes that event i, intended to be sent at intended, reached its
// handler now. Redeliveries keep the first start.
func (r *recorder) record(i int, intended time.Time) {
	d := time.Since(intended)
	if i < 0 || i >= len(r.delays) {
		r.bad.Add(1)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen[i] {
		r.seen[i], r.delays[i] = true, d
	}
}

// samples returns the delays of every event, sorted, or an error when an
// event was never handled or a payload was not understood.
func (r *recorder) samples() ([]time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.bad.Load(); b > 0 {
		return nil, fmt.Errorf("%d events carried no valid index", b)
	}
	for i, ok := range r.seen {
		if !ok {
			return nil, fmt.Errorf("event %d was never handled", i)
		}
	}
	s := slices.Clone(r.delays)
	slices.Sort(s)
	return s, nil
}
