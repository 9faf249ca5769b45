package driverutil

import (
	"math"
	"time"

	"github.com/rheo-go/rheo"
)

// The SQL functions' defaults, which WithDefaults puts in place of Go
// zero values in the option structs of package rheo.
const (
	// DefaultMaxAttempts is a new group's max_attempts: with the
	// worker's default back-off, about an hour of retries.
	DefaultMaxAttempts = 20
	// DefaultReadCount is Read's max_count.
	DefaultReadCount = 100
	// DefaultFetchCount is Fetch's max_count.
	DefaultFetchCount = 10
	// DefaultLeaseDuration is Fetch's lease duration.
	DefaultLeaseDuration = 30 * time.Second
	// DefaultDeadLetterCount is DeadLetters' max_count.
	DefaultDeadLetterCount = 100
	// DefaultLeaseCount is Leases' max_count.
	DefaultLeaseCount = 100
	// DefaultQueryCount is the page size of a Query.
	DefaultQueryCount = 100
	// DefaultPruneCount is Prune's max_count.
	DefaultPruneCount = 10000
)

// Options are the option structs of package rheo with Go zero values
// that stand for SQL defaults, and the history query, whose zero
// MaxCount does.
type Options interface {
	rheo.CreateGroupOptions | rheo.ReadOptions | rheo.FetchOptions | rheo.DeadLetterOptions |
		rheo.PruneOptions | rheo.Query
}

// WithDefaults returns a copy of *opts, or the zero options when opts is
// nil, never opts itself, with every Go zero value that stands for an SQL default
// replaced by it: CreateGroupOptions.MaxAttempts (DefaultMaxAttempts)
// and Ordering (rheo.OrderingNone), the MaxCount of ReadOptions
// (DefaultReadCount), FetchOptions (DefaultFetchCount, and its
// LeaseDuration, DefaultLeaseDuration), DeadLetterOptions
// (DefaultDeadLetterCount), PruneOptions (DefaultPruneCount) and
// rheo.Query (DefaultQueryCount). Other values, negative ones included,
// are kept as they are, for the operation to check. Every driver fills
// its options here, so that the defaults are the same on all of them.
func WithDefaults[T Options](opts *T) *T {
	o := new(T)
	if opts != nil {
		*o = *opts
	}
	switch o := any(o).(type) {
	case *rheo.CreateGroupOptions:
		o.MaxAttempts = orDefault(o.MaxAttempts, DefaultMaxAttempts)
		if o.Ordering == "" {
			o.Ordering = rheo.OrderingNone
		}
	case *rheo.ReadOptions:
		o.MaxCount = orDefault(o.MaxCount, DefaultReadCount)
	case *rheo.FetchOptions:
		o.MaxCount = orDefault(o.MaxCount, DefaultFetchCount)
		o.LeaseDuration = orDefault(o.LeaseDuration, DefaultLeaseDuration)
	case *rheo.DeadLetterOptions:
		o.MaxCount = orDefault(o.MaxCount, DefaultDeadLetterCount)
	case *rheo.PruneOptions:
		o.MaxCount = orDefault(o.MaxCount, DefaultPruneCount)
	case *rheo.Query:
		o.MaxCount = orDefault(o.MaxCount, DefaultQueryCount)
	}
	return o
}

// LeaseCount is the max_count of Leases: maxCount, or DefaultLeaseCount
// for 0.
func LeaseCount(maxCount int) int { return orDefault(maxCount, DefaultLeaseCount) }

// orDefault is v, or def when v is zero.
func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Millis converts d to whole milliseconds for the SQL functions' *_ms
// arguments, rounding down so that a negative duration stays negative and
// is reported by the operation's own check. Durations outside
// PostgreSQL's int range are invalid_argument, on every driver alike;
// what names the argument in the error.
func Millis(what string, d time.Duration) (int32, error) {
	ms := d.Milliseconds()
	if d < 0 && d%time.Millisecond != 0 {
		ms--
	}
	if ms > math.MaxInt32 || ms < math.MinInt32 {
		return 0, rheo.Errorf(rheo.ErrInvalidArgument, "%s %s is out of range", what, d)
	}
	return int32(ms), nil
}

// Micros converts a retention's max age to whole microseconds, the
// precision of PostgreSQL's interval and of SQLite's stored ages,
// rounding down so that a negative age stays negative and an age below
// one microsecond becomes 0; the operation then reports either as
// invalid_argument. Every time.Duration fits an interval (which spans
// about 178 million years), so nothing is out of range.
func Micros(d time.Duration) int64 {
	us := d.Microseconds()
	if d < 0 && d%time.Microsecond != 0 {
		us--
	}
	return us
}
