package rheootel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/worker"
)

// Hooks traces a worker's handlers and measures what becomes of its
// deliveries. Put it in worker.Config.Hooks; make it with NewHooks. One
// Hooks may serve any number of workers and consumers at once.
//
// For every handler run of a Worker it starts a span
//
//	process {stream}  CONSUMER  process
//
// before the handler (worker.HandleStartHook) and ends it when the
// handler returns (worker.HandledHook). The handler runs under the span's
// context, so the spans of its own calls are children of it, and so are
// the spans of the appends it makes through a driver of NewDriver: the
// events it appends continue the trace. The span links to the
// event's creation context, and is its child for a fresh first delivery
// (see the package documentation). It carries the event's stream, group,
// partition, id, sequence, type, size and correlation id
// (messaging.message.conversation_id), the delivery's attempt, lease id
// and consumer id, and ends with the handler's outcome and, when the
// handler failed, an error status and error.type.
//
// Metrics: messaging.process.duration, the handler's run time, by
// outcome; MetricOutcomes, MetricLeaseLosses, MetricRedeliveries and
// MetricRenewals, for workers and consumers alike.
type Hooks struct {
	tracer       trace.Tracer
	parentWindow time.Duration

	processDuration metric.Float64Histogram
	outcomes        metric.Int64Counter
	leaseLosses     metric.Int64Counter
	redeliveries    metric.Int64Counter
	renewals        metric.Int64Counter

	spans sync.Map // lease id → the trace.Span of its running handler
}

var (
	_ worker.HandleStartHook  = (*Hooks)(nil)
	_ worker.HandledHook      = (*Hooks)(nil)
	_ worker.AckedHook        = (*Hooks)(nil)
	_ worker.RetriedHook      = (*Hooks)(nil)
	_ worker.DeadLetteredHook = (*Hooks)(nil)
	_ worker.RedeliveredHook  = (*Hooks)(nil)
	_ worker.RenewedHook      = (*Hooks)(nil)
	_ worker.LeaseLostHook    = (*Hooks)(nil)
	_ worker.SettleFailedHook = (*Hooks)(nil)
)

// NewHooks returns the hooks that trace and measure a worker, for
// worker.Config.Hooks. opts may be nil.
func NewHooks(opts *Options) *Hooks {
	s := opts.settle()
	in := instruments{meter: s.meter}
	return &Hooks{
		tracer:       s.tracer,
		parentWindow: s.parentWindow,
		processDuration: in.histogram(messagingconv.ProcessDuration{}.Name(),
			messagingconv.ProcessDuration{}.Unit(), messagingconv.ProcessDuration{}.Description()),
		outcomes: in.counter(MetricOutcomes, "{event}",
			"Deliveries a worker or consumer is done with, by outcome."),
		leaseLosses: in.counter(MetricLeaseLosses, "{lease}",
			"Leases found stale while held, by the operation that found it."),
		redeliveries: in.counter(MetricRedeliveries, "{lease}",
			"Fetched leases of events leased before (attempt above 1)."),
		renewals: in.counter(MetricRenewals, "{renewal}",
			"Lease renewals, with error.type when they failed."),
	}
}

// HandleStart starts the process span of a handler run and returns its
// context for the handler.
func (h *Hooks) HandleStart(ctx context.Context, info worker.HandleStartInfo) context.Context {
	l := info.Lease
	f, _ := metadataFields(l.Event.Metadata)
	creation, _ := f.creation()
	age := l.LeasedAt.Sub(l.Event.TS)

	attrs := append(opAttrs(opProcess), destAttrs(l.Event.Stream, l.Group)...)
	attrs = append(attrs,
		partitionAttr(l.Event.Partition),
		semconv.MessagingMessageID(l.Event.ID),
		semconv.MessagingMessageBodySize(len(l.Event.Payload)),
		semconv.MessagingClientID(l.ConsumerID),
		KeySequence.Int64(l.Event.Sequence),
		KeyAttempt.Int(l.Attempt),
		KeyLeaseID.String(l.LeaseID),
		KeyEventAge.Float64(age.Seconds()),
	)
	if l.Event.Type != "" {
		attrs = append(attrs, KeyEventType.String(l.Event.Type))
	}
	var correlationID string
	if json.Unmarshal(f.correlationID, &correlationID) == nil && correlationID != "" {
		attrs = append(attrs, semconv.MessagingMessageConversationID(correlationID))
	}

	var links []trace.Link
	if link, ok := creationLink(creation, l.Event.ID); ok {
		links = append(links, link)
	}
	// The worker's own context (the one Start was given) never becomes
	// the parent: every handler would join one endless trace. It is
	// linked when it carries a span.
	if ambient := trace.SpanContextFromContext(ctx); ambient.IsValid() {
		links = append(links, trace.Link{SpanContext: ambient})
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrs...),
		trace.WithLinks(links...),
	}
	parent := ctx
	if h.continues(creation, l, age) {
		parent = trace.ContextWithRemoteSpanContext(ctx, creation)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := h.tracer.Start(parent, spanName(opProcess, l.Event.Stream), opts...)
	h.spans.Store(l.LeaseID, span)
	return ctx
}

// continues reports whether the process span of l continues the
// producer's trace, as a child of the creation context: only a first
// delivery, leased within the parent window of the event's ts.
func (h *Hooks) continues(creation trace.SpanContext, l rheo.Lease, age time.Duration) bool {
	return creation.IsValid() && l.Attempt == 1 && h.parentWindow >= 0 && age <= h.parentWindow
}

// Handled ends the process span of the run and records its duration.
func (h *Hooks) Handled(ctx context.Context, info worker.HandleInfo) {
	l := info.Lease
	attrs := append(opAttrs(opProcess), destAttrs(l.Event.Stream, l.Group)...)
	attrs = append(attrs, KeyOutcome.String(string(info.Outcome)))
	var span trace.Span
	if s, ok := h.spans.LoadAndDelete(l.LeaseID); ok {
		span = s.(trace.Span)
		ctx = trace.ContextWithSpan(ctx, span)
	}
	typ := ""
	switch {
	case info.Outcome == worker.OutcomeDiscarded:
		typ = OutcomeLeaseLost
		if span != nil {
			span.SetStatus(codes.Error, "the lease was lost while the handler ran; its outcome was not settled")
			span.SetAttributes(semconv.ErrorTypeKey.String(typ))
		}
	case info.Err != nil:
		typ = handlerErrorType(info.Err)
		if span != nil {
			failSpan(span, info.Err, typ)
		}
	}
	if typ != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(typ))
	}
	h.processDuration.Record(ctx, info.Duration.Seconds(), metric.WithAttributes(attrs...))
	if span != nil {
		span.SetAttributes(KeyOutcome.String(string(info.Outcome)))
		span.End()
	}
}

// handlerErrorType is the error.type of a handler's error: "panic", the
// Rheo word the reason carries, or the reason's Go type.
func handlerErrorType(err error) string {
	var p *worker.PanicError
	if errors.As(err, &p) {
		return "panic"
	}
	reason := err
	var retry *worker.RetryError
	var reject *worker.RejectError
	switch {
	case errors.As(err, &retry):
		reason = retry.Err
	case errors.As(err, &reject):
		reason = reject.Err
	}
	if reason == nil {
		return fmt.Sprintf("%T", err)
	}
	if typ := errorType(reason); typ != semconv.ErrorTypeOther.Value.AsString() {
		return typ
	}
	return fmt.Sprintf("%T", reason)
}

// leaseAttrs are the attributes of a worker metric about l.
func leaseAttrs(l rheo.Lease, more ...attribute.KeyValue) metric.MeasurementOption {
	attrs := append([]attribute.KeyValue{systemAttr}, destAttrs(l.Event.Stream, l.Group)...)
	return metric.WithAttributes(append(attrs, more...)...)
}

// Acked counts an ack.
func (h *Hooks) Acked(ctx context.Context, info worker.AckInfo) {
	h.outcomes.Add(ctx, 1, leaseAttrs(info.Lease, KeyOutcome.String(OutcomeAck)))
}

// Retried counts a retry.
func (h *Hooks) Retried(ctx context.Context, info worker.RetryInfo) {
	h.outcomes.Add(ctx, 1, leaseAttrs(info.Lease, KeyOutcome.String(OutcomeRetry)))
}

// DeadLettered counts a dead letter.
func (h *Hooks) DeadLettered(ctx context.Context, info worker.DeadLetterInfo) {
	h.outcomes.Add(ctx, 1, leaseAttrs(info.Lease, KeyOutcome.String(OutcomeDeadLetter)))
}

// Redelivered counts a redelivery.
func (h *Hooks) Redelivered(ctx context.Context, info worker.RedeliveryInfo) {
	h.redeliveries.Add(ctx, 1, leaseAttrs(info.Lease))
}

// Renewed counts a renewal.
func (h *Hooks) Renewed(ctx context.Context, info worker.RenewInfo) {
	more := []attribute.KeyValue{semconv.MessagingOperationNameKey.String(opRenew)}
	if info.Err != nil {
		more = append(more, semconv.ErrorTypeKey.String(errorType(info.Err)))
	}
	h.renewals.Add(ctx, 1, leaseAttrs(info.Lease, more...))
}

// LeaseLost counts a lease a renewal found stale.
func (h *Hooks) LeaseLost(ctx context.Context, info worker.LeaseLostInfo) {
	h.lostLease(ctx, info.Lease, opRenew)
}

// SettleFailed counts a settle that found its lease stale as a lost
// lease, and one whose outcome is unknown as left to expire. A failed ack
// that the worker retries is counted by the retry.
func (h *Hooks) SettleFailed(ctx context.Context, info worker.SettleErrorInfo) {
	switch info.Action {
	case worker.ActionDropped:
		h.lostLease(ctx, info.Lease, info.Op)
	case worker.ActionLeftToExpire:
		h.outcomes.Add(ctx, 1, leaseAttrs(info.Lease, KeyOutcome.String(OutcomeLeftToExpire)))
	}
}

func (h *Hooks) lostLease(ctx context.Context, l rheo.Lease, op string) {
	h.outcomes.Add(ctx, 1, leaseAttrs(l, KeyOutcome.String(OutcomeLeaseLost)))
	h.leaseLosses.Add(ctx, 1, leaseAttrs(l, semconv.MessagingOperationNameKey.String(op)))
}
