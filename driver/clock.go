package driver

import "time"

// Clock is Rheo's one source of time: the drivers read it for every
// timestamp they write or compare, the worker schedules lease renewals
// and polls with it, retention's Pruner times its passes, and metrics
// and the dashboard measure ages against it. Tests give all of them one
// controlled clock, so that leases expire, renewals and polls happen and
// ages grow when the test advances time, not after real waits.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// At returns a channel that receives once the clock reaches t (at
	// once when it already has), and a function that releases the timer.
	At(t time.Time) (<-chan time.Time, func())
}

// SystemClock is the Clock of the real world.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) At(t time.Time) (<-chan time.Time, func()) {
	timer := time.NewTimer(time.Until(t))
	return timer.C, func() { timer.Stop() }
}
