package postgres

import "time"

// SetPlacementEvery sets how often d's wakeup listener reads the
// placements of the subscribed streams again on Citus. Call it before
// the driver's first Wakeups.
func SetPlacementEvery(d *Driver, every time.Duration) { d.wakeups.placementEvery = every }
