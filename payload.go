package rheo

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// EventTyper is implemented by payload types that name their event
// type: JSON stores it as the payload's "type" member, which is the
// event's Type (Event.Type, the type column of rheo.events), what
// queries filter on and what the dashboard and the rheo command show.
// It plays the part of River's JobArgs.Kind.
type EventTyper interface {
	// EventType returns the event type, such as "order.placed".
	EventType() string
}

// JSON encodes v as an event payload, for Append and AppendBatch:
//
//	type OrderPlaced struct {
//		Customer string `json:"customer"`
//		Total    int    `json:"total"`
//	}
//
//	func (OrderPlaced) EventType() string { return "order.placed" }
//
//	payload, err := rheo.JSON(OrderPlaced{Customer: "ana", Total: 42})
//	// {"type":"order.placed","customer":"ana","total":42}
//
// v must encode as a JSON object. When v implements EventTyper and its
// encoding has no "type" member, JSON puts one first, with
// v.EventType(); a "type" that v encodes itself is kept. Errors are
// ErrInvalidArgument, wrapping the encoding's error if there was one.
func JSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode payload: %w", ErrInvalidArgument, err)
	}
	var members map[string]json.RawMessage
	if b[0] != '{' || json.Unmarshal(b, &members) != nil {
		return nil, Errorf(ErrInvalidArgument, "payload %T must encode as a JSON object, not %s", v, b)
	}
	t, ok := v.(EventTyper)
	if !ok {
		return b, nil
	}
	if _, has := members["type"]; has {
		return b, nil
	}
	name, err := json.Marshal(t.EventType())
	if err != nil {
		return nil, fmt.Errorf("%w: encode event type: %w", ErrInvalidArgument, err)
	}
	var out bytes.Buffer
	out.Grow(len(b) + len(name) + 9)
	out.WriteString(`{"type":`)
	out.Write(name)
	if len(members) > 0 {
		out.WriteByte(',')
	}
	out.Write(b[1:])
	return out.Bytes(), nil
}
