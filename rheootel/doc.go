// Package rheootel traces and measures Rheo with OpenTelemetry: a driver
// wrapper for the log and delivery operations, and worker hooks for the
// handlers. It is a module of its own, so that Rheo's core carries no
// OpenTelemetry dependency.
//
//	drv = rheootel.NewDriver(drv, nil) // nil: the global providers
//	w, err := worker.New(drv, &worker.Config{
//		Stream:  "orders",
//		Group:   "billing",
//		Handler: handle,
//		Hooks:   []any{rheootel.NewHooks(nil)},
//	})
//
// Use the wrapped driver everywhere: for appends, so that events carry
// their creation context, and for the worker, so that fetches and settles
// are traced.
//
// # Spans
//
// The spans follow OpenTelemetry's messaging semantic conventions
// (semconv v1.43.0, whose operation type for sending is "send", formerly
// "publish"): messaging.system is "rheo", messaging.destination.name the
// stream, messaging.consumer.group.name the group,
// messaging.destination.partition.id the partition, messaging.message.id
// the event id, messaging.batch.message_count the size of a batch, and
// error.type Rheo's word for a failure (stale_lease,
// backend_unavailable, …). Rheo's own attributes are in the
// messaging.rheo namespace (KeySequence, KeyAttempt, …).
//
//	append {stream}        PRODUCER  send      the wrapped driver's Append
//	append_batch {stream}  PRODUCER  send      AppendBatch
//	fetch {stream}         CLIENT    receive   Fetch, when it leases something or fails
//	process {stream}       CONSUMER  process   a worker's handler run (Hooks)
//	ack {stream}           CLIENT    settle    Ack (a TxHandler's ack)
//	ack_batch {stream}     CLIENT    settle    AckBatch (a worker's acks)
//	retry {stream}         CLIENT    settle    Retry
//	reject {stream}        CLIENT    settle    Reject
//
// The fetch, process and settle spans link to the creation context of
// every event they carry. A worker fetches and settles under the context
// its Start was given: start it under one without a span, or every fetch
// and settle joins that span's trace.
//
// # Trace context through the log
//
// An append through the driver of NewDriver stores its span's context,
// the event's creation context, in the event's metadata, as the W3C Trace
// Context fields under the keys MetaTraceparent ("traceparent") and
// MetaTracestate ("tracestate", only when the span has a trace state).
// With an active span in ctx the append span is its child, so the event
// carries the caller's trace; without one the append span starts a trace.
// The keys are added to the caller's metadata, whose other keys (lineage
// included) and formatting are kept as they are. Metadata that already
// holds either key is a creation context of the caller's: it is stored
// unchanged and the append span links to it (build one with Inject).
// AppendBatch stores the batch span's context in the batch's metadata,
// which is every event's.
//
// Appends that carry an id of the caller's (AppendOptions.ID, or any
// BatchItem.ID) are left alone. Metadata is part of what makes a repeat
// of an id idempotent, and every attempt's span differs: a retried append
// would fail already_exists instead of returning the stored event. To
// trace such events, build their metadata once with Inject where the
// event is decided (for a transactional outbox, when the outbox row is
// written) and append every attempt with it.
//
// # Parent or link
//
// Every process span links to the event's creation context. It is also
// a child of it, continuing the producer's trace, only for a first
// delivery (attempt 1) leased within Options.ParentWindow (default one
// minute) of the event's ts; every other delivery starts a trace of its
// own:
//
//   - A fresh first delivery is the common case, and the one where a
//     single trace from the request through the append to the handler's
//     own calls is what one wants to see. The conventions allow the
//     creation context as the parent of a process span that handles a
//     single message, which is always the case here.
//   - An event consumed much later (a backlog, a group created or reset
//     to the beginning, a replay, which starts again from attempt 1, an
//     event appended with an old ts) would grow a trace that ended long
//     ago: its spans arrive after trace backends and tail samplers have
//     closed it, and a replay of a million events would put a million
//     spans into a thousand old traces. A link keeps the relation without
//     that.
//   - A redelivery (attempt above 1: a retry, or an expired lease) is the
//     consumer's own rescheduling of the work, often after a delay; each
//     attempt is a trace of its own, linked to the creation context, and
//     the first attempt's span (a child of the producer's) shows that it
//     failed.
//
// The age is measured from the event's ts to its lease's leased_at, both
// read from the database's clock. Options.ParentWindow < 0 only links. The
// context the worker was started with never becomes the parent of a
// process span; it is linked when it carries a span.
//
// # Metrics
//
// NewDriver: messaging.client.operation.duration (seconds, every call
// above, empty fetches included, with messaging.operation.name and
// error.type), messaging.client.sent.messages (events appended) and
// messaging.client.consumed.messages (leases fetched). NewHooks:
// messaging.process.duration (seconds, by the handler's outcome:
// ack, retry, reject, discarded), MetricOutcomes (what became of each
// delivery: ack, retry, dead_letter, lease_lost, left_to_expire),
// MetricLeaseLosses, MetricRedeliveries and MetricRenewals. They carry
// the stream and group but not the partition, to keep their cardinality
// bounded.
//
// # Consumers
//
// A worker.Consumer hands leases to the caller and runs no handler, so
// NewHooks makes no process span for it (its metrics still count). Code
// that handles the leases of a Consumer can start its own span under
// Extract(ctx, lease.Event.Metadata), as a child of the creation context,
// or link to trace.SpanContextFromContext of it.
package rheootel
