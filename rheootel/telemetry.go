package rheootel

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/rheo-go/rheo"
)

// durationBuckets are the histogram boundaries, in seconds, that the
// messaging semantic conventions recommend for durations.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// systemAttr is messaging.system on every span and measurement.
var systemAttr = semconv.MessagingSystemKey.String(SystemName)

// The operations: messaging.operation.name and messaging.operation.type.
const (
	opAppend      = "append"
	opAppendBatch = "append_batch"
	opFetch       = "fetch"
	opProcess     = "process"
	opAck         = "ack"
	opAckBatch    = "ack_batch"
	opRetry       = "retry"
	opReject      = "reject"
	opRenew       = "renew"
)

// opType is the messaging.operation.type of each operation.
var opType = map[string]attribute.KeyValue{
	opAppend:      semconv.MessagingOperationTypeSend,
	opAppendBatch: semconv.MessagingOperationTypeSend,
	opFetch:       semconv.MessagingOperationTypeReceive,
	opProcess:     semconv.MessagingOperationTypeProcess,
	opAck:         semconv.MessagingOperationTypeSettle,
	opAckBatch:    semconv.MessagingOperationTypeSettle,
	opRetry:       semconv.MessagingOperationTypeSettle,
	opReject:      semconv.MessagingOperationTypeSettle,
}

// opAttrs are the attributes every span and measurement of op carries.
func opAttrs(op string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{systemAttr, semconv.MessagingOperationNameKey.String(op)}
	if t, ok := opType[op]; ok {
		attrs = append(attrs, t)
	}
	return attrs
}

// spanName is "{operation} {stream}", or the operation alone when the
// stream is not known, as the conventions name messaging spans.
func spanName(op, stream string) string {
	if stream == "" {
		return op
	}
	return op + " " + stream
}

// destAttrs are the stream and group attributes, those that are known.
func destAttrs(stream, group string) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if stream != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(stream))
	}
	if group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(group))
	}
	return attrs
}

// partitionAttr is messaging.destination.partition.id.
func partitionAttr(p int) attribute.KeyValue {
	return semconv.MessagingDestinationPartitionID(strconv.Itoa(p))
}

// errorType is the error.type of err: Rheo's word for it where it has
// one (stale_lease, backend_unavailable, ambiguous, …), "timeout" or
// "canceled" for a context's end, "_OTHER" otherwise.
func errorType(err error) string {
	var word *rheo.Error
	switch {
	case errors.Is(err, rheo.ErrAmbiguous):
		return rheo.ErrAmbiguous.Reason
	case errors.Is(err, rheo.ErrFailed):
		return rheo.ErrFailed.Reason
	case errors.As(err, &word):
		return word.Reason
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// failSpan marks span as failed with err, of class typ.
func failSpan(span trace.Span, err error, typ string) {
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(semconv.ErrorTypeKey.String(typ))
}

// creationLink is the link to an event's creation context, naming the
// event; ok is false when sc is not valid.
func creationLink(sc trace.SpanContext, eventID string) (trace.Link, bool) {
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	l := trace.Link{SpanContext: sc}
	if eventID != "" {
		l.Attributes = []attribute.KeyValue{semconv.MessagingMessageID(eventID)}
	}
	return l, true
}

// instruments make metric instruments, reporting failures to otel.Handle
// and falling back to no-op instruments, so that a misconfigured meter
// never stops the driver or the worker.
type instruments struct{ meter metric.Meter }

func (in instruments) histogram(name, unit, description string) metric.Float64Histogram {
	h, err := in.meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(description),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		otel.Handle(err)
		return noop.Float64Histogram{}
	}
	return h
}

func (in instruments) counter(name, unit, description string) metric.Int64Counter {
	c, err := in.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(description))
	if err != nil {
		otel.Handle(err)
		return noop.Int64Counter{}
	}
	return c
}
