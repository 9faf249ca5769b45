// Package rheotest helps test code that produces and consumes Rheo
// events: an in-memory database, a clock that moves only when the test
// moves it, a handler run as the worker would run it, and a check of
// what was appended.
//
// A test of a handler appends an event, works it, and checks what became
// of it and what the handler appended in turn:
//
//	func TestBilling(t *testing.T) {
//		ctx := context.Background()
//		drv := rheotest.Open(t)
//		_ = drv.CreateStream(ctx, "orders", 1)
//		_ = drv.CreateGroup(ctx, "orders", "billing", nil)
//		_, _ = driver.AppendJSON(ctx, drv, "orders", OrderPlaced{Customer: "ana", Total: 42}, nil)
//
//		res := rheotest.Work(ctx, t, drv, "orders", "billing", worker.Typed(bill))
//		if res.Outcome != rheotest.Acked {
//			t.Fatalf("billing: %s (%v)", res.Outcome, res.Err)
//		}
//		rheotest.RequireAppended(t, drv, "invoices", func(ev rheo.Event) bool {
//			return ev.Type == "invoice.issued"
//		})
//	}
//
// Tests of timing (leases that expire, retries that come back after their
// delay, renewals, polls) give one Clock to the driver (OpenClock), the
// worker and the Pruner (their Config.Clock), and move it with Advance
// instead of sleeping.
//
// Its signatures use only Rheo's public packages. It links the SQLite driver,
// so it needs cgo, or the build tag rheo_modernc (docs/deploy.md).
package rheotest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/handleonce"
	"github.com/rheo-go/rheo/worker"
)

// Open returns a driver on a new in-memory SQLite database with Rheo's
// schema installed, on the system clock, closed when tb ends. Every call
// opens a database of its own.
func Open(tb testing.TB) driver.Driver {
	tb.Helper()
	return OpenClock(tb, driver.SystemClock)
}

// OpenClock is Open with a driver that reads the time from clock,
// usually a *Clock: leases expire and retries come back as the clock
// says.
func OpenClock(tb testing.TB, clock driver.Clock) driver.Driver {
	tb.Helper()
	d, err := sqlite.Open(context.Background(), ":memory:", &sqlite.Options{Clock: clock, Migrate: true})
	require.NoError(tb, err, "rheotest: open an in-memory SQLite database")
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

// Clock is a driver.Clock that moves only when the test moves it, safe
// for concurrent use: Now reads it, Advance and Set move it, and the
// timers set with At (the worker's renewals and polls, the Pruner's
// passes, a soft stop's timeout) fire as it reaches them. Give the same
// Clock to the driver (OpenClock), to worker.Config.Clock and to
// retention.Config.Clock.
//
// It is the clock of Rheo's own conformance suite, drivertest.Clock; its
// other methods are Armed (whether a timer is set for an instant) and
// WaitTimer (wait until a loop sets its next timer).
type Clock = drivertest.Clock

// NewClock returns a Clock set to start, or, when start is the zero time,
// to the current time truncated to the millisecond (the precision both
// databases keep).
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = time.Now().UTC().Truncate(time.Millisecond)
	}
	return drivertest.ClockAt(start)
}

// Outcome is what Work did with the event it leased.
type Outcome string

// The outcomes of Work.
const (
	// Acked: the handler returned nil and the event is acked.
	Acked Outcome = "acked"
	// Retried: the handler failed, and the event is claimable again
	// after Result.Delay.
	Retried Outcome = "retried"
	// DeadLettered: the handler rejected the event (worker.Reject, or a
	// typed handler's payload that does not decode), or failed at the
	// group's last attempt.
	DeadLettered Outcome = "dead-lettered"
)

// Result is what Work did.
type Result struct {
	// Outcome is how the event was settled.
	Outcome Outcome
	// Lease is the lease the handler ran with.
	Lease rheo.Lease
	// Err is what the handler returned (a *worker.PanicError when it
	// panicked); nil when the event was acked.
	Err error
	// Delay is how long a retried event waits before it is claimable
	// again: the handler's worker.Retry delay, or
	// worker.DefaultRetryPolicy's.
	Delay time.Duration
	// Reason is the reason stored with a retry or a dead letter.
	Reason string
}

// Work leases the next event of stream for group, runs h once with it,
// and settles it as a Worker would (nil acks, worker.Retry and
// worker.Reject as they say, another error or a panic retries after
// worker.DefaultRetryPolicy's delay, or dead-letters at the group's last
// attempt). It fails the test when there is no event to lease or the
// settle fails. ctx is the handler's context; the lease lasts
// worker.DefaultLeaseDuration.
func Work(ctx context.Context, tb testing.TB, d driver.Driver, stream, group string, h worker.Handler) Result {
	tb.Helper()
	leases, err := d.Fetch(ctx, stream, group, &rheo.FetchOptions{
		MaxCount: 1, ConsumerID: "rheotest", LeaseDuration: worker.DefaultLeaseDuration,
	})
	require.NoErrorf(tb, err, "rheotest: lease the next event of stream %q group %q", stream, group)
	require.NotEmptyf(tb, leases, "rheotest: stream %q group %q has no event to lease", stream, group)
	l := leases[0]
	o, handlerErr, err := handleonce.Run(ctx, d, l, h)
	require.NoErrorf(tb, err, "rheotest: settle event %s (%s)", l.Event.ID, o.Kind)
	res := Result{Lease: l, Err: handlerErr, Reason: o.Reason}
	switch {
	case o.DeadLettered:
		res.Outcome = DeadLettered
	case o.Kind == string(worker.OutcomeAck):
		res.Outcome = Acked
	default:
		res.Outcome, res.Delay = Retried, o.Delay
	}
	return res
}

// RequireAppended returns the first event of stream, in the order of
// driver.QueryAll with an empty rheo.Query (oldest first), for which
// match returns true, and fails the test when there is none.
func RequireAppended(tb testing.TB, d driver.Driver, stream string, match func(rheo.Event) bool) rheo.Event {
	tb.Helper()
	n := 0
	for ev, err := range driver.QueryAll(context.Background(), d, stream, rheo.Query{}) {
		require.NoErrorf(tb, err, "rheotest: read stream %q", stream)
		if match(ev) {
			return ev
		}
		n++
	}
	require.FailNow(tb, fmt.Sprintf("rheotest: none of the %d events of stream %q matches", n, stream))
	return rheo.Event{}
}
