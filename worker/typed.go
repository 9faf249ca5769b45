package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// Typed returns a Handler that decodes each event's payload from JSON
// into a T and calls fn with it:
//
//	type OrderPlaced struct {
//		Customer string `json:"customer"`
//		Total    int    `json:"total"`
//	}
//
//	cfg.Handler = worker.Typed(func(ctx context.Context, lease rheo.Lease, order OrderPlaced) error {
//		return bill(ctx, order.Customer, order.Total)
//	})
//
// fn's error is the outcome, as a Handler's. A payload that does not
// decode into a T is dead-lettered at once, without retries (no attempt
// would decode it), with a reason that names T and the decode error.
// Fields of the payload that T lacks are ignored, so that producers can
// add fields before consumers know them. Typed does not look at the
// event's type (lease.Event.Type, the payload's "type" member): a group
// that reads events of several types decodes into a T that covers them,
// or switches on lease.Event.Type in a Handler of its own.
func Typed[T any](fn func(ctx context.Context, lease rheo.Lease, payload T) error) Handler {
	return func(ctx context.Context, lease rheo.Lease) error {
		payload, err := decode[T](lease)
		if err != nil {
			return err
		}
		return fn(ctx, lease, payload)
	}
}

// TypedTx is Typed for a TxHandler: fn runs inside the transaction in
// which the ack commits, with the payload decoded into a T. A payload
// that does not decode rolls the transaction back and dead-letters the
// event at once. On PostgreSQL, postgres.PgxTx(tx) is the transaction
// as a pgx.Tx.
func TypedTx[T any](fn func(ctx context.Context, tx driver.Tx, lease rheo.Lease, payload T) error) TxHandler {
	return func(ctx context.Context, tx driver.Tx, lease rheo.Lease) error {
		payload, err := decode[T](lease)
		if err != nil {
			return err
		}
		return fn(ctx, tx, lease, payload)
	}
}

// decode decodes lease's payload into a T, or returns the Reject outcome
// that dead-letters it.
func decode[T any](lease rheo.Lease) (T, error) {
	var payload T
	if err := json.Unmarshal(lease.Event.Payload, &payload); err != nil {
		return payload, Reject(fmt.Errorf("decode payload as %s: %w", reflect.TypeFor[T](), err))
	}
	return payload, nil
}
