package driverutil

import (
	"math"
	"time"

	"github.com/rheo-go/rheo"
)

// The limits of Rheo's arguments, the same in SQL and on every driver
// (see docs/decisions.md). The SQL functions check them in the
// reference's order; the checks here are the drivers' share: the SQLite driver's
// checks, and what a driver must check before the database is asked
// because it could not send the value (a time pgx cannot encode).
const (
	// MaxPartitionCount is the most partitions a stream can have.
	MaxPartitionCount = 4096
	// MaxStartSequence is the highest start_after and from_sequence: one
	// below the largest int64, so that the cursor after it still fits.
	MaxStartSequence = math.MaxInt64 - 1
	// MaxTextBytes is the longest event id, routing key, consumer id and
	// lineage metadata value, in bytes of UTF-8.
	MaxTextBytes = 1024
	// MaxJSONDepth is how deeply a payload, metadata or query pattern may
	// nest objects and arrays: {} and [] are depth 1, {"a": []} is 2.
	MaxJSONDepth = 512
)

var (
	// MinTime is the earliest valid clock and event ts.
	MinTime = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	// EndTime is the first instant past the latest valid clock and event
	// ts: every valid one is before it.
	EndTime = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC)
)

// CheckTime reports a clock or event ts outside MinTime up to (not
// including) EndTime as invalid_argument; what names the argument.
func CheckTime(what string, t time.Time) error {
	if Infinite(t) != 0 {
		return rheo.Errorf(rheo.ErrInvalidArgument,
			"%s must be from 0001-01-01T00:00:00Z up to but not including 10000-01-01T00:00:00Z, got %s",
			what, t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Infinite places a time that is only compared with the events' ts
// (start_at, from_ts, a query's From and To): -1 before MinTime, +1 at or
// after EndTime, 0 in between. Every event's ts is in between, so a time
// outside compares with all of them as -infinity or infinity would, and
// drivers pass it so: PostgreSQL's timestamptz (and pgx's encoding of
// it) cannot hold every time.Time, and SQLite's microseconds since the
// epoch would overflow.
func Infinite(t time.Time) int {
	switch {
	case t.Before(MinTime):
		return -1
	case t.Before(EndTime):
		return 0
	default:
		return 1
	}
}

// CheckSequence reports a start_after or from_sequence outside 0 to
// MaxStartSequence as invalid_argument; what names the argument.
func CheckSequence(what string, n int64) error {
	if n < 0 || n > MaxStartSequence {
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s must be between 0 and %d, got %d", what, int64(MaxStartSequence), n)
	}
	return nil
}

// CheckLength reports text longer than MaxTextBytes bytes as
// invalid_argument; what names the argument.
func CheckLength(what, s string) error {
	if len(s) > MaxTextBytes {
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s must be at most %d bytes, got %d bytes", what, MaxTextBytes, len(s))
	}
	return nil
}

// Int32 returns n as an int32 argument, or invalid_argument naming what
// when it does not fit: for values the database would store, where
// clamping would change them (max_attempts).
func Int32(what string, n int) (int32, error) {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, rheo.Errorf(rheo.ErrInvalidArgument, "%s must fit in a 32-bit integer, got %d", what, n)
	}
	return int32(n), nil
}
