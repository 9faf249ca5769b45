package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/rheo-go/rheo"
)

// Hooks are values given in Config.Hooks that implement one or more of the
// interfaces below; each is called for its event. Hooks are called
// synchronously from the worker's goroutines, concurrently with each
// other: they must be safe for concurrent use and return quickly.

// FetchedHook is told of every successful fetch.
type FetchedHook interface {
	Fetched(ctx context.Context, info FetchInfo)
}

// FetchFailedHook is told of every failed fetch.
type FetchFailedHook interface {
	FetchFailed(ctx context.Context, info FetchErrorInfo)
}

// HandleStartHook is told when a Worker's handler is about to run, and
// chooses the context the handler runs under: the handler gets the
// context HandleStart returns (nil keeps ctx). That context must be ctx
// or derived from it, so that the lease's cancellation still reaches the
// handler. Tracing uses it to make the handler's own work children of a
// span started here and ended in HandledHook.
//
// It is called once per handler run, and HandledHook is called when that
// run returns. A TxHandler's is called inside its transaction, once it
// has begun (a transaction that cannot begin runs no handler and calls
// neither hook); the ack in that transaction is made under the returned
// context too. With several such hooks, each gets the context the one
// before it returned, in the order of Config.Hooks. A Consumer runs no
// handler and calls none.
type HandleStartHook interface {
	HandleStart(ctx context.Context, info HandleStartInfo) context.Context
}

// HandledHook is told when a handler returns.
type HandledHook interface {
	Handled(ctx context.Context, info HandleInfo)
}

// AckedHook is told when an ack is committed.
type AckedHook interface {
	Acked(ctx context.Context, info AckInfo)
}

// RetriedHook is told when an event is set to be retried.
type RetriedHook interface {
	Retried(ctx context.Context, info RetryInfo)
}

// DeadLetteredHook is told when an event is dead-lettered, by rejection
// or because its attempts are used up.
type DeadLetteredHook interface {
	DeadLettered(ctx context.Context, info DeadLetterInfo)
}

// RedeliveredHook is told of every fetched lease whose attempt is above 1.
type RedeliveredHook interface {
	Redelivered(ctx context.Context, info RedeliveryInfo)
}

// RenewedHook is told of every renewal, successful or not (a renewal that
// finds the lease stale is reported to LeaseLostHook instead).
type RenewedHook interface {
	Renewed(ctx context.Context, info RenewInfo)
}

// LeaseLostHook is told when a renewal finds a lease stale: the lease is
// dropped and its handler's context cancelled.
type LeaseLostHook interface {
	LeaseLost(ctx context.Context, info LeaseLostInfo)
}

// SettleFailedHook is told when an ack, retry or reject fails, with what
// the worker did about it.
type SettleFailedHook interface {
	SettleFailed(ctx context.Context, info SettleErrorInfo)
}

// FetchInfo describes a successful fetch.
type FetchInfo struct {
	// Requested is the number of leases asked for.
	Requested int
	// Count is the number of leases returned.
	Count int
	// Duration is how long the call took.
	Duration time.Duration
}

// FetchErrorInfo describes a failed fetch.
type FetchErrorInfo struct {
	// Err is the error, in Rheo's vocabulary (reference §10).
	Err error
	// Backoff is how long the worker waits before fetching again: 100ms
	// doubling to 5s over successive failures, each jittered by ±20%.
	Backoff time.Duration
}

// HandleStartInfo describes a handler about to run.
type HandleStartInfo struct {
	// Lease is the lease the handler is given.
	Lease rheo.Lease
}

// HandleInfo describes a handler's return.
type HandleInfo struct {
	// Lease is the lease the handler was given.
	Lease rheo.Lease
	// Outcome is what the return value asks for, or OutcomeDiscarded
	// when the lease was lost meanwhile.
	Outcome Outcome
	// Err is what the handler returned (a *PanicError after a panic).
	Err error
	// Duration is how long the handler ran.
	Duration time.Duration
}

// AckInfo describes a committed ack.
type AckInfo struct {
	// Lease is the acked lease.
	Lease rheo.Lease
}

// RetryInfo describes an event set to be retried.
type RetryInfo struct {
	// Lease is the retried lease.
	Lease rheo.Lease
	// Delay is how long the event waits before it is claimable again.
	Delay time.Duration
	// Reason is the reason given ("" when none).
	Reason string
}

// DeadLetterInfo describes a dead-lettered event.
type DeadLetterInfo struct {
	// Lease is the dead-lettered lease.
	Lease rheo.Lease
	// Reason is the reason given ("" when none: the database stored
	// "rejected" or "max_attempts").
	Reason string
}

// RedeliveryInfo describes a lease of an event that was leased before.
type RedeliveryInfo struct {
	// Lease is the new lease; Lease.Attempt is above 1.
	Lease rheo.Lease
}

// RenewInfo describes a renewal.
type RenewInfo struct {
	// Lease is the renewed lease, as fetched.
	Lease rheo.Lease
	// ExpiresAt is the new expiry; zero when Err is set.
	ExpiresAt time.Time
	// Err is why the renewal failed (the worker tries again soon), or nil.
	Err error
}

// LeaseLostInfo describes a lease found stale by a renewal.
type LeaseLostInfo struct {
	// Lease is the lost lease.
	Lease rheo.Lease
	// Err is the renewal's error (rheo.ErrStaleLease or
	// rheo.ErrReceiptMismatch).
	Err error
}

// SettleAction is what the worker did after a failed settle.
type SettleAction string

// The actions after a failed settle.
const (
	// ActionDropped: the lease is no longer held (stale or receipt
	// mismatch); nothing more is done.
	ActionDropped SettleAction = "dropped"
	// ActionLeftToExpire: the outcome is unknown or the database is
	// unreachable; the lease is left to expire and the event will be
	// delivered again unless the settle did commit.
	ActionLeftToExpire SettleAction = "left_to_expire"
	// ActionRetried: the ack definitely failed; the event is retried at
	// once.
	ActionRetried SettleAction = "retried"
)

// SettleErrorInfo describes a failed settle.
type SettleErrorInfo struct {
	// Lease is the lease that was being settled.
	Lease rheo.Lease
	// Op is "ack", "retry", "reject" or "begin" (a transactional
	// handler's transaction could not start).
	Op string
	// Err is the error, in Rheo's vocabulary (reference §10).
	Err error
	// Action is what the worker did about it.
	Action SettleAction
}

// Attribute keys of the worker's log records.
const (
	LogKeyStream     = "stream"
	LogKeyGroup      = "group"
	LogKeyConsumerID = "consumer_id"
	LogKeyLeaseID    = "lease_id"
	LogKeyPartition  = "partition"
	LogKeySequence   = "sequence"
	LogKeyAttempt    = "attempt"
	LogKeyEventID    = "event_id"
	LogKeyError      = "error"
	LogKeyBackoff    = "backoff"
	LogKeyOutcome    = "outcome"
	LogKeyOp         = "op"
	LogKeyAction     = "action"
	LogKeyStack      = "stack"
	LogKeyOrdering   = "ordering"
)

// hookSet holds the configured hooks by interface.
type hookSet struct {
	fetched      []FetchedHook
	fetchFailed  []FetchFailedHook
	handleStart  []HandleStartHook
	handled      []HandledHook
	acked        []AckedHook
	retried      []RetriedHook
	deadLettered []DeadLetteredHook
	redelivered  []RedeliveredHook
	renewed      []RenewedHook
	leaseLost    []LeaseLostHook
	settleFailed []SettleFailedHook
}

// hookInterfaces are the hook interfaces, each of one method, which
// names the hook.
var hookInterfaces = []reflect.Type{
	reflect.TypeFor[FetchedHook](), reflect.TypeFor[FetchFailedHook](), reflect.TypeFor[HandleStartHook](),
	reflect.TypeFor[HandledHook](), reflect.TypeFor[AckedHook](), reflect.TypeFor[RetriedHook](),
	reflect.TypeFor[DeadLetteredHook](), reflect.TypeFor[RedeliveredHook](), reflect.TypeFor[RenewedHook](),
	reflect.TypeFor[LeaseLostHook](), reflect.TypeFor[SettleFailedHook](),
}

// checkHook reports what is wrong with h as a hook, or nil: a method
// named like a hook whose signature is not the hook's (it would never be
// called), or no hook at all (say, methods on *T given a T).
func checkHook(h any) error {
	if h == nil {
		return errors.New("is nil")
	}
	t := reflect.TypeOf(h)
	implemented := 0
	for _, iface := range hookInterfaces {
		want := iface.Method(0)
		if t.Implements(iface) {
			implemented++
			continue
		}
		if got, ok := t.MethodByName(want.Name); ok {
			return fmt.Errorf("has a method %s %s, not the %s of %s: %s %s",
				want.Name, signature(got.Type, true), want.Name, iface, want.Name, signature(want.Type, false))
		}
	}
	if implemented > 0 {
		return nil
	}
	if t.Kind() != reflect.Pointer {
		for _, iface := range hookInterfaces {
			if reflect.PointerTo(t).Implements(iface) {
				return fmt.Errorf("implements %s only as a pointer: give &value", iface)
			}
		}
	}
	return errors.New("implements none of the hook interfaces")
}

// signature is a method's signature without the func keyword, skipping
// the receiver of a method value's type (skipReceiver).
func signature(t reflect.Type, skipReceiver bool) string {
	var in, out []string
	for i := 0; i < t.NumIn(); i++ {
		if i == 0 && skipReceiver {
			continue
		}
		in = append(in, t.In(i).String())
	}
	for i := 0; i < t.NumOut(); i++ {
		out = append(out, t.Out(i).String())
	}
	sig := "(" + strings.Join(in, ", ") + ")"
	switch len(out) {
	case 0:
	case 1:
		sig += " " + out[0]
	default:
		sig += " (" + strings.Join(out, ", ") + ")"
	}
	return sig
}

// add files h under every hook interface it implements; checkHook has
// vetted it.
func (s *hookSet) add(h any) {
	if x, ok := h.(FetchedHook); ok {
		s.fetched = append(s.fetched, x)
	}
	if x, ok := h.(FetchFailedHook); ok {
		s.fetchFailed = append(s.fetchFailed, x)
	}
	if x, ok := h.(HandleStartHook); ok {
		s.handleStart = append(s.handleStart, x)
	}
	if x, ok := h.(HandledHook); ok {
		s.handled = append(s.handled, x)
	}
	if x, ok := h.(AckedHook); ok {
		s.acked = append(s.acked, x)
	}
	if x, ok := h.(RetriedHook); ok {
		s.retried = append(s.retried, x)
	}
	if x, ok := h.(DeadLetteredHook); ok {
		s.deadLettered = append(s.deadLettered, x)
	}
	if x, ok := h.(RedeliveredHook); ok {
		s.redelivered = append(s.redelivered, x)
	}
	if x, ok := h.(RenewedHook); ok {
		s.renewed = append(s.renewed, x)
	}
	if x, ok := h.(LeaseLostHook); ok {
		s.leaseLost = append(s.leaseLost, x)
	}
	if x, ok := h.(SettleFailedHook); ok {
		s.settleFailed = append(s.settleFailed, x)
	}
}

// startHandle calls the HandleStartHooks for a handler about to run with
// ctx and returns the context the handler runs under.
func (s *hookSet) startHandle(ctx context.Context, l rheo.Lease) context.Context {
	for _, x := range s.handleStart {
		if next := x.HandleStart(ctx, HandleStartInfo{Lease: l}); next != nil {
			ctx = next
		}
	}
	return ctx
}
