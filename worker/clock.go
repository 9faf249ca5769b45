package worker

import "time"

// Clock is the worker's source of time for lease renewal and polling.
// Tests pass a controlled clock, the same one the driver is given, so that
// renewals and polls happen when the test advances time rather than after
// real waits.
//
// Ack flushing and fetch back-off are short real-time pauses and do not
// go through the Clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// At returns a channel that receives once the clock reaches t (at
	// once when it already has), and a function that releases the timer.
	At(t time.Time) (<-chan time.Time, func())
}

// systemClock is the Clock of the real world.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) At(t time.Time) (<-chan time.Time, func()) {
	timer := time.NewTimer(time.Until(t))
	return timer.C, func() { timer.Stop() }
}
