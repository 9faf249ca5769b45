// Package testclock is a controlled clock for tests: it has the shape of
// worker.Clock, retention.Clock and driver.Clock, and moves only when the
// test advances it, so that lease renewals, polls, pruning passes and the
// database's notion of now happen when the test says, not after real
// waits.
package testclock

import (
	"sync"
	"testing"
	"time"
)

// Clock is a clock that moves only by Advance. Its zero value is not
// usable; make one with New or At.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
	added  chan struct{} // signalled when a timer is set
}

type timer struct {
	at time.Time
	ch chan time.Time
}

// New returns a Clock set to the current time, truncated to the
// millisecond (the precision both databases keep).
func New() *Clock {
	return At(time.Now().UTC().Truncate(time.Millisecond))
}

// At returns a Clock set to now.
func At(now time.Time) *Clock {
	return &Clock{now: now, added: make(chan struct{}, 16)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// At returns a channel that receives once the clock reaches t (at once
// when it already has), and a function that releases the timer.
func (c *Clock) At(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &timer{at: t, ch: make(chan time.Time, 1)}
	if !t.After(c.now) {
		tm.ch <- c.now
		return tm.ch, func() {}
	}
	c.timers = append(c.timers, tm)
	select {
	case c.added <- struct{}{}:
	default:
	}
	return tm.ch, func() { c.release(tm) }
}

func (c *Clock) release(tm *timer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == tm {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return
		}
	}
}

// Advance moves the clock by d and fires the timers that fall due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
			continue
		}
		tm.ch <- c.now
	}
	c.timers = kept
}

// Armed reports whether a timer is set for exactly at.
func (c *Clock) Armed(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tm := range c.timers {
		if tm.at.Equal(at) {
			return true
		}
	}
	return false
}

// WaitTimer waits up to timeout until a timer is set after the previous
// WaitTimer returned (for example, a loop waiting for its next pass), and
// fails the test when none is.
func (c *Clock) WaitTimer(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.added:
	case <-time.After(timeout):
		t.Fatalf("no timer was set within %v", timeout)
	}
}
