package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// Handler processes one leased event. The lease carries the event, its
// attempt number, partition, sequence and lease metadata.
//
// The returned error is the outcome:
//   - nil acks the event;
//   - Retry(delay, err) makes it claimable again after delay, or
//     dead-letters it when the group's attempts are used up;
//   - Reject(err) dead-letters it now;
//   - any other error retries it after the delay that Config.RetryPolicy
//     chooses (DefaultRetryPolicy: 1s doubling to 5 minutes, with
//     jitter), with the error as the reason, or dead-letters it when the
//     group's attempts are used up.
//
// A panic is recovered and settled like an error, with the panic as the
// reason. ctx is cancelled with cause rheo.ErrStaleLease when the lease is
// lost (the outcome is then discarded), and with cause ErrStopped on a
// hard stop; an error or panic after a hard stop retries at once, so that
// another consumer takes the event without waiting.
type Handler func(ctx context.Context, lease rheo.Lease) error

// TxHandler is a Handler that runs inside a database transaction in which
// the ack happens: the handler's own writes through tx and the ack commit
// or roll back together. On PostgreSQL postgres.PgxTx(tx) is the
// pgx.Tx; on SQLite tx.Native() is the *sql.Tx. TypedTx decodes the
// payload first. A nil return commits with the ack; anything else
// rolls back and is settled as described for Handler.
type TxHandler func(ctx context.Context, tx driver.Tx, lease rheo.Lease) error

// RetryError is the outcome returned by Retry. A handler may also wrap it;
// the worker finds it with errors.As.
type RetryError struct {
	// Delay is how long the event waits before it is claimable again.
	Delay time.Duration
	// Err is the reason, stored if the event is dead-lettered; nil stores
	// "max_attempts".
	Err error
}

func (e *RetryError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry after %s", e.Delay)
	}
	return fmt.Sprintf("retry after %s: %v", e.Delay, e.Err)
}

// Unwrap returns the reason.
func (e *RetryError) Unwrap() error { return e.Err }

// Retry is a handler outcome: retry the event after delay (a negative
// delay counts as 0, one beyond 2^31−1 milliseconds as that) with err as
// the reason, whatever Config.RetryPolicy says. When the event has used up
// the group's attempts it is dead-lettered instead.
func Retry(delay time.Duration, err error) error {
	return &RetryError{Delay: max(delay, 0), Err: err}
}

// RejectError is the outcome returned by Reject. A handler may also wrap
// it; the worker finds it with errors.As.
type RejectError struct {
	// Err is the reason stored with the dead letter; nil stores
	// "rejected".
	Err error
}

func (e *RejectError) Error() string {
	if e.Err == nil {
		return "rejected"
	}
	return fmt.Sprintf("rejected: %v", e.Err)
}

// Unwrap returns the reason.
func (e *RejectError) Unwrap() error { return e.Err }

// Reject is a handler outcome: dead-letter the event now with err as the
// reason.
func Reject(err error) error {
	return &RejectError{Err: err}
}

// PanicError is the reason recorded when a handler panics.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Outcome names what became of a handled event.
type Outcome string

// The outcomes reported to hooks.
const (
	// OutcomeAck: the handler succeeded and the event is acked.
	OutcomeAck Outcome = "ack"
	// OutcomeRetry: the event is retried (after a delay, or at once), or
	// dead-lettered when its attempts are used up.
	OutcomeRetry Outcome = "retry"
	// OutcomeReject: the event is dead-lettered.
	OutcomeReject Outcome = "reject"
	// OutcomeDiscarded: the lease was lost while the handler ran, so its
	// outcome was not settled.
	OutcomeDiscarded Outcome = "discarded"
)

// outcome is a handler's return value, interpreted.
type outcome struct {
	kind  Outcome
	delay time.Duration
	// backoff marks a retry whose delay is the retry policy's to choose:
	// the handler returned a plain error or panicked.
	backoff bool
	reason  string
	err     error
}

// outcomeOf interprets a handler's return value.
func outcomeOf(err error) outcome {
	if err == nil {
		return outcome{kind: OutcomeAck}
	}
	var retry *RetryError
	if errors.As(err, &retry) {
		return outcome{kind: OutcomeRetry, delay: clampDelay(retry.Delay), reason: reasonOf(retry.Err), err: err}
	}
	var reject *RejectError
	if errors.As(err, &reject) {
		return outcome{kind: OutcomeReject, reason: reasonOf(reject.Err), err: err}
	}
	return outcome{kind: OutcomeRetry, backoff: true, reason: err.Error(), err: err}
}

// reasonOf is the stored reason for err; "" lets the database store its
// default word.
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// callHandler runs h, turning a panic into a *PanicError.
func callHandler(h Handler, ctx context.Context, lease rheo.Lease) (err error) {
	defer recoverPanic(&err)
	return h(ctx, lease)
}

// callTxHandler runs h, turning a panic into a *PanicError.
func callTxHandler(h TxHandler, ctx context.Context, tx driver.Tx, lease rheo.Lease) (err error) {
	defer recoverPanic(&err)
	return h(ctx, tx, lease)
}

func recoverPanic(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}
