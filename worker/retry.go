package worker

import (
	"math"
	"time"

	"github.com/rheo-go/rheo"
)

// The schedule of DefaultRetryPolicy: the nominal delay after attempt n is
// retryBase × 2^(n−1), at most retryMax, scaled by a jitter factor.
const (
	retryBase = time.Second
	retryMax  = 5 * time.Minute
)

// jitterSpread is the jitter of every back-off of the package: a delay is
// its nominal value times a factor in [1−jitterSpread, 1+jitterSpread).
const jitterSpread = 0.2

// maxRetryDelay is the longest delay a retry can ask for: drivers take it
// as a 32-bit count of milliseconds (rheo.retry's delay_ms int).
const maxRetryDelay = math.MaxInt32 * time.Millisecond

// DefaultRetryPolicy is the retry policy of a Worker whose
// Config.RetryPolicy is nil: exponential back-off with jitter. After
// attempt n (lease.Attempt) fails, the nominal delay is 1s × 2^(n−1),
// capped at 5 minutes (reached at attempt 10), and the delay returned is
// the nominal one times a factor in [0.8, 1.2), in whole milliseconds:
//
//	attempt  1    2    3    4    5     6     7     8      9      10+
//	nominal  1s   2s   4s   8s   16s   32s   64s   128s   256s   5m
//
// The factor is not drawn from a shared random source but derived from
// lease.LeaseID: the same lease always gets the same delay, so a test (or
// a log) can reproduce it, while the leases of events that failed together,
// whose ids are random and distinct, come back spread over 40% of their
// step rather than as one burst. err is not used; an attempt below 1
// counts as 1.
//
// With the group's default max_attempts of 20 the schedule rides out about
// an hour of failures (58m31s nominal) before the event is dead-lettered;
// give the group more attempts to ride out longer outages, fewer to give
// up sooner (docs/worker.md has the table).
func DefaultRetryPolicy(lease rheo.Lease, err error) time.Duration {
	return jittered(retryStep(lease.Attempt), unitOf(lease.LeaseID))
}

// retryStep is the nominal delay of DefaultRetryPolicy after attempt.
func retryStep(attempt int) time.Duration {
	d := retryBase
	for i := 1; i < attempt && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// jittered scales d by a factor in [1−jitterSpread, 1+jitterSpread)
// chosen by u in [0, 1), truncated to whole milliseconds.
func jittered(d time.Duration, u float64) time.Duration {
	f := 1 - jitterSpread + 2*jitterSpread*u
	return time.Duration(float64(d) * f).Truncate(time.Millisecond)
}

// unitOf maps s to a number in [0, 1), evenly spread over distinct
// strings: FNV-1a, then the SplitMix64 finalizer, because FNV-1a alone
// leaves strings that differ in their last bytes (uuids do) close together
// in the high bits.
func unitOf(s string) float64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	// The top 53 bits, the precision of a float64.
	return float64(h>>11) / (1 << 53)
}

// clampDelay bounds a retry delay to what the drivers accept: a negative
// delay counts as 0, one beyond maxRetryDelay as maxRetryDelay.
func clampDelay(d time.Duration) time.Duration {
	return min(max(d, 0), maxRetryDelay)
}
