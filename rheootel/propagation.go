package rheootel

import (
	"bytes"
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rheo-go/rheo"
)

// traceContext writes and reads the W3C Trace Context fields; the
// metadata keys are its header names.
var traceContext = propagation.TraceContext{}

// Inject returns metadata with the creation context of ctx's span under
// MetaTraceparent (and MetaTracestate when the span has a trace state),
// for appends that carry their own id, which the driver of NewDriver
// leaves alone (see the package documentation). Build the metadata once,
// where the event is decided, and append every attempt with it: a repeat
// then matches the stored event and stays idempotent.
//
// Metadata is returned as it is when ctx carries no valid span or when
// metadata already holds either key; its other keys and its formatting
// are always kept. Nil or blank metadata counts as {}; metadata that is
// not a JSON object is invalid_argument.
func Inject(ctx context.Context, metadata json.RawMessage) (json.RawMessage, error) {
	fields, ok := metadataFields(metadata)
	if !ok {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "metadata must be a JSON object")
	}
	if _, custom := fields.creation(); custom {
		return metadata, nil
	}
	return withCreationContext(metadata, trace.SpanContextFromContext(ctx)), nil
}

// Extract returns ctx with the creation context stored in an event's
// metadata as its remote span context, for code that consumes leases
// itself (worker.Consumer) and wants its spans to continue the
// producer's trace. It returns ctx unchanged when the metadata carries no
// valid creation context.
func Extract(ctx context.Context, metadata json.RawMessage) context.Context {
	sc := creationContext(metadata)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// fields are the metadata keys rheootel reads, each as found (nil when
// absent).
type fields struct {
	traceparent, tracestate, correlationID json.RawMessage
}

// metadataFields finds the keys of fields in metadata; ok is false when
// metadata is not a JSON object. Nil or blank metadata is {}.
func metadataFields(metadata json.RawMessage) (f fields, ok bool) {
	trimmed := bytes.TrimSpace(metadata)
	if len(trimmed) == 0 {
		return f, true
	}
	if trimmed[0] != '{' {
		return f, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(trimmed, &m) != nil {
		return f, false
	}
	return fields{traceparent: m[MetaTraceparent], tracestate: m[MetaTracestate], correlationID: m[rheo.MetaCorrelationID]}, true
}

// creation returns the creation context the fields hold; custom reports
// whether either trace key is present at all, valid or not.
func (f fields) creation() (sc trace.SpanContext, custom bool) {
	if f.traceparent == nil && f.tracestate == nil {
		return sc, false
	}
	carrier := propagation.MapCarrier{}
	var s string
	if json.Unmarshal(f.traceparent, &s) == nil {
		carrier[MetaTraceparent] = s
	}
	if json.Unmarshal(f.tracestate, &s) == nil {
		carrier[MetaTracestate] = s
	}
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), carrier)), true
}

// creationContext returns the creation context an event's metadata
// holds, or an invalid one.
func creationContext(metadata json.RawMessage) trace.SpanContext {
	if !bytes.Contains(metadata, []byte(`"`+MetaTraceparent+`"`)) {
		return trace.SpanContext{}
	}
	f, ok := metadataFields(metadata)
	if !ok {
		return trace.SpanContext{}
	}
	sc, _ := f.creation()
	return sc
}

// withCreationContext returns metadata, a JSON object, with sc under the
// trace keys, which it must not hold yet. The caller's bytes are kept as
// they are and the keys added at the end, so nothing else of the object
// changes, its formatting included. An invalid sc returns metadata.
func withCreationContext(metadata json.RawMessage, sc trace.SpanContext) json.RawMessage {
	if !sc.IsValid() {
		return metadata
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	var pairs []byte
	for _, key := range []string{MetaTraceparent, MetaTracestate} {
		value, ok := carrier[key]
		if !ok || value == "" {
			continue
		}
		if len(pairs) > 0 {
			pairs = append(pairs, ',')
		}
		k, _ := json.Marshal(key)
		v, _ := json.Marshal(value)
		pairs = append(append(append(pairs, k...), ':'), v...)
	}
	trimmed := bytes.TrimSpace(metadata)
	if len(trimmed) == 0 || len(bytes.TrimSpace(trimmed[1:len(trimmed)-1])) == 0 {
		return json.RawMessage(append(append([]byte{'{'}, pairs...), '}'))
	}
	out := make([]byte, 0, len(trimmed)+len(pairs)+1)
	out = append(out, trimmed[:len(trimmed)-1]...)
	out = append(out, ',')
	out = append(out, pairs...)
	return json.RawMessage(append(out, '}'))
}
