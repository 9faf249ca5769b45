// Package testclock gives the tests of the packages above the drivers
// (worker, retention, rheootel) the controlled driver.Clock of the
// conformance suite, started where they need it.
package testclock

import (
	"time"

	"github.com/rheo-go/rheo/driver/drivertest"
)

// Clock is drivertest.Clock: it moves only by Set and Advance.
type Clock = drivertest.Clock

// New returns a Clock set to the current time, truncated to the
// millisecond (the precision both databases keep).
func New() *Clock {
	return At(time.Now().UTC().Truncate(time.Millisecond))
}

// At returns a Clock set to now.
func At(now time.Time) *Clock { return drivertest.ClockAt(now) }
