package driver

import (
	"context"

	"github.com/rheo-go/rheo"
)

// AppendJSON appends v, encoded by rheo.JSON, to stream through ops (a
// Driver, or a Tx to append inside a transaction of the caller's): a
// v that implements rheo.EventTyper sets the event's type. opts may be
// nil. A v that does not encode as a JSON object is
// rheo.ErrInvalidArgument, and nothing is appended.
func AppendJSON(ctx context.Context, ops Ops, stream string, v any, opts *rheo.AppendOptions) (rheo.Event, error) {
	payload, err := rheo.JSON(v)
	if err != nil {
		return rheo.Event{}, err
	}
	return ops.Append(ctx, stream, payload, opts)
}
