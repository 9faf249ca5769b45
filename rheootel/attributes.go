package rheootel

import (
	"go.opentelemetry.io/otel/attribute"
)

// SystemName is the value of messaging.system on every span and metric.
const SystemName = "rheo"

// The metadata keys of an event's creation context: the W3C Trace Context
// fields, under the names of the HTTP headers. See the package
// documentation for when they are written.
const (
	// MetaTraceparent holds the W3C traceparent of the span that appended
	// the event, such as
	// "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".
	MetaTraceparent = "traceparent"
	// MetaTracestate holds the W3C tracestate of that span, when it has
	// one.
	MetaTracestate = "tracestate"
)

// Rheo's own attributes, in the messaging.rheo namespace as the messaging
// semantic conventions ask of system-specific attributes. The standard
// ones (messaging.system, messaging.destination.name, …) come from the
// semconv package of OpenTelemetry.
const (
	// KeySequence is the event's sequence in its partition.
	KeySequence attribute.Key = "messaging.rheo.sequence"
	// KeyAttempt is the delivery's attempt number, 1 on the first lease
	// of the event for the group.
	KeyAttempt attribute.Key = "messaging.rheo.attempt"
	// KeyLeaseID is the lease id of the delivery.
	KeyLeaseID attribute.Key = "messaging.rheo.lease.id"
	// KeyEventType is the event's type (its payload's "type" field).
	KeyEventType attribute.Key = "messaging.rheo.event.type"
	// KeyEventAge is how long after the event's ts it was leased, in
	// seconds.
	KeyEventAge attribute.Key = "messaging.rheo.event.age"
	// KeyOutcome is what became of a delivery: on process spans and
	// messaging.process.duration the handler's outcome (ack, retry,
	// reject, discarded), on rheo.worker.outcomes the final one (see
	// MetricOutcomes).
	KeyOutcome attribute.Key = "messaging.rheo.outcome"
	// KeyRetryDelay is a retry's delay, in seconds.
	KeyRetryDelay attribute.Key = "messaging.rheo.retry.delay"
	// KeyRetryOutcome is what a retry did: "retrying" or "dead_lettered".
	KeyRetryOutcome attribute.Key = "messaging.rheo.retry.outcome"
	// KeyStaleCount is how many leases of an ack_batch were stale.
	KeyStaleCount attribute.Key = "messaging.rheo.ack.stale_count"
)

// The metrics of NewHooks that the messaging semantic conventions do not
// define. NewDriver reports messaging.client.operation.duration,
// messaging.client.sent.messages and messaging.client.consumed.messages;
// NewHooks reports messaging.process.duration and these.
const (
	// MetricOutcomes counts the deliveries a worker or consumer is done
	// with, by KeyOutcome: "ack" (the ack committed), "retry" (set to be
	// retried), "dead_letter" (rejected, or out of attempts), "lease_lost"
	// (found stale by a renewal or a settle: someone else has the event),
	// "left_to_expire" (a settle whose outcome is unknown; the event comes
	// back unless it did commit).
	MetricOutcomes = "rheo.worker.outcomes"
	// MetricLeaseLosses counts leases found stale, by
	// messaging.operation.name: "renew" (while the handler ran), "ack",
	// "retry", "reject" or "begin" (at its settle).
	MetricLeaseLosses = "rheo.worker.lease_losses"
	// MetricRedeliveries counts fetched leases whose attempt is above 1.
	MetricRedeliveries = "rheo.worker.redeliveries"
	// MetricRenewals counts lease renewals, with error.type when one
	// failed (a renewal that finds the lease stale counts as a lease loss
	// instead).
	MetricRenewals = "rheo.worker.renewals"
)

// The outcomes of MetricOutcomes.
const (
	OutcomeAck          = "ack"
	OutcomeRetry        = "retry"
	OutcomeDeadLetter   = "dead_letter"
	OutcomeLeaseLost    = "lease_lost"
	OutcomeLeftToExpire = "left_to_expire"
)
