// Package handleonce lets rheotest run a handler once and settle its
// event exactly as package worker does, without a public API in worker
// for it: worker sets Run when it is initialized.
package handleonce

import (
	"context"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// Outcome is how Run settled the event.
type Outcome struct {
	// Kind is "ack", "retry" or "reject" (worker.Outcome's words).
	Kind string
	// Delay is the retry's delay.
	Delay time.Duration
	// Reason is the retry's or reject's reason as stored.
	Reason string
	// DeadLettered reports that the settle dead-lettered the event: a
	// reject, or a retry at the group's last attempt.
	DeadLettered bool
}

// Run runs h for l once, settles the event through ops as a Worker with
// the default RetryPolicy would, and returns the outcome, what h
// returned (a panic as a *worker.PanicError) and the settle's error.
// Package worker sets it.
var Run func(ctx context.Context, ops driver.Ops, l rheo.Lease, h func(context.Context, rheo.Lease) error) (o Outcome, handlerErr, err error)
