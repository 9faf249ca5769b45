// Package rheo holds the shared vocabulary of Rheo: durable consumer groups
// over an immutable, queryable event log kept in PostgreSQL or SQLite.
//
// The types here are plain values exchanged between the drivers
// (package driver and its sub-packages), the worker (package worker) and
// host code. The package imports nothing else of Rheo's.
//
// # A tour
//
// A program opens a database with connect.Open, which returns a
// driver.Driver: the operations of docs/reference.md, one method each.
// Appends go to a stream (CreateStream), which a consumer group
// (CreateGroup) reads at its own pace:
//
//	drv, err := connect.Open(ctx, os.Getenv("DATABASE_URL"), nil)
//	ev, err := drv.Append(ctx, "orders", payload, &rheo.AppendOptions{ID: "order-42"})
//
// A worker.Worker fetches the group's events as leases (Lease), runs a
// handler for each, and acks, retries or dead-letters it by the
// handler's outcome; a worker.Consumer hands the leases to the caller
// instead. Lag, GroupInfo and DeadLetters report a group's progress;
// Replay and ResetGroup rewind it; Query searches a stream's history.
//
// Options are pointers to structs (AppendOptions, FetchOptions, …), nil
// for the defaults; the Go zero value of a field is its default. Errors
// are this package's sentinels, matched with errors.Is
// (ErrStreamNotFound, ErrStaleLease, …), or an *AmbiguousError, a
// *FailedError or an *UnavailableError when the database did not answer
// with one of Rheo's words (errors.go, reference §10).
//
// Example is the README's quickstart, and runs as a test.
package rheo

import (
	"encoding/json"
	"time"
)

// Event is one immutable entry of a stream's log.
type Event struct {
	// Stream is the name of the stream the event belongs to.
	Stream string `json:"stream"`
	// Partition is the partition the event was routed to.
	Partition int `json:"partition"`
	// Sequence is the event's position in its partition, starting at 1.
	Sequence int64 `json:"sequence"`
	// ID is unique per stream: the producer's idempotency key, or a
	// generated time-ordered UUID.
	ID string `json:"id"`
	// Key is the effective routing key, or "" when the event had none.
	Key string `json:"key,omitempty"`
	// Type is the payload's "type" field, or "" when it has none.
	Type string `json:"type,omitempty"`
	// Payload is the event's JSON object.
	Payload json.RawMessage `json:"payload"`
	// Metadata is the event's JSON metadata object (lineage and the like).
	Metadata json.RawMessage `json:"metadata"`
	// TS is the event's timestamp.
	TS time.Time `json:"ts"`
}

// Lease is one event claimed by one consumer of a group until ExpiresAt.
// Every settle call must present LeaseID; a lease that was re-leased,
// settled, replayed or reset is stale and cannot be settled.
type Lease struct {
	// LeaseID is the fencing token of this delivery (a UUID).
	LeaseID string `json:"lease_id"`
	// Receipt is the backend's own handle of the delivery, for drivers
	// over a queue that issues receipts (a message broker's receipt
	// handle), which must present both it and the lease id; a receipt
	// that does not match its lease is ErrReceiptMismatch (reference
	// §10.1). PostgreSQL and SQLite issue none: there it equals LeaseID,
	// and settling needs LeaseID alone. It is part of rheo.lease, the
	// SQL type, so that every driver returns the same row.
	Receipt string `json:"receipt"`
	// Group is the consumer group the lease was made for.
	Group string `json:"group"`
	// ConsumerID names the consumer holding the lease.
	ConsumerID string `json:"consumer_id"`
	// Attempt is 1 on the first lease of the event for the group and grows
	// by one on every re-lease.
	Attempt int `json:"attempt"`
	// LeasedAt is when the lease was made.
	LeasedAt time.Time `json:"leased_at"`
	// ExpiresAt is when the lease lapses unless renewed.
	ExpiresAt time.Time `json:"expires_at"`
	// Event is the leased event.
	Event Event `json:"event"`
}

// PartitionLag is the progress of a group in one partition.
type PartitionLag struct {
	// Partition is the partition number.
	Partition int `json:"partition"`
	// Frontier is the highest sequence F such that every event up to F is
	// terminal (acked or dead-lettered) for the group.
	Frontier int64 `json:"frontier"`
	// HighWatermark is the last allocated sequence of the partition.
	HighWatermark int64 `json:"high_watermark"`
	// Lag is max(0, HighWatermark - Frontier).
	Lag int64 `json:"lag"`
}

// Lag is a group's progress over the partitions asked for.
type Lag struct {
	// Partitions holds one entry per partition, ordered by partition.
	Partitions []PartitionLag `json:"partitions"`
	// Total is the sum of the partitions' lag.
	Total int64 `json:"total"`
}

// DeadLetter is an event a group gave up on: rejected, out of attempts, or
// whose last lease expired at the attempt limit.
type DeadLetter struct {
	// Event is the dead-lettered event.
	Event Event `json:"event"`
	// Attempt is the attempt at which the event was dead-lettered.
	Attempt int `json:"attempt"`
	// Reason is the stored reason: the caller's, or "max_attempts",
	// "rejected" or "lease_expired".
	Reason string `json:"reason"`
	// DeadLetteredAt is when the event was dead-lettered.
	DeadLetteredAt time.Time `json:"dead_lettered_at"`
}

// GroupInfo summarises one group's state, as the GroupInfo operation
// reports it; GroupSummary is what ListGroups lists.
type GroupInfo struct {
	// Lag is the group's lag summed over all partitions.
	Lag int64 `json:"lag"`
	// InFlight counts leases that have not expired.
	InFlight int64 `json:"inflight"`
	// PendingRetry counts non-terminal deliveries not currently leased:
	// waiting for a retry delay, or with an expired lease. Events held
	// back behind an earlier event of their key (OrderingKey) count in
	// Lag only.
	PendingRetry int64 `json:"pending_retry"`
	// DeadLetters counts the group's dead letters.
	DeadLetters int64 `json:"dead_letters"`
	// OldestUnsettledTS is the smallest ts among the group's non-terminal
	// events, including events not offered yet; nil when there are none.
	OldestUnsettledTS *time.Time `json:"oldest_unsettled_ts"`
}

// StreamSummary describes a stream, as ListStreams lists it; StreamInfo
// is one stream in detail.
type StreamSummary struct {
	// Name is the stream's name.
	Name string `json:"stream"`
	// PartitionCount is the number of partitions.
	PartitionCount int `json:"partition_count"`
	// CreatedAt is when the stream was created.
	CreatedAt time.Time `json:"created_at"`
	// Node is, on a Citus cluster, the node that holds the stream's rows
	// (host:port, as the cluster names it); empty on a single server.
	Node string `json:"node,omitempty"`
}

// GroupSummary describes a consumer group, as ListGroups lists it;
// GroupInfo is one group's state in detail.
type GroupSummary struct {
	// Name is the group's name.
	Name string `json:"group"`
	// MaxAttempts is how many leases an event gets before it is
	// dead-lettered.
	MaxAttempts int `json:"max_attempts"`
	// CreatedAt is when the group was created.
	CreatedAt time.Time `json:"created_at"`
	// Ordering is the group's delivery order.
	Ordering Ordering `json:"ordering"`
}

// AckResult is the outcome of one lease of an AckBatch call.
type AckResult struct {
	// LeaseID is the lease that was presented.
	LeaseID string `json:"lease_id"`
	// OK is false when the lease was stale (or repeated in the batch).
	OK bool `json:"ok"`
}

// RetryOutcome tells what a retry did.
type RetryOutcome string

const (
	// Retrying means the event becomes claimable again after the delay.
	Retrying RetryOutcome = "retrying"
	// DeadLettered means the event was out of attempts and is now a dead
	// letter.
	DeadLettered RetryOutcome = "dead_lettered"
)

// PartitionRange is the retained part of one partition's log.
type PartitionRange struct {
	// Partition is the partition number.
	Partition int `json:"partition"`
	// LowWatermark is the lowest retained sequence, or HighWatermark + 1
	// when no event is retained. Every sequence from it up to
	// HighWatermark is retained: pruning never opens a hole.
	LowWatermark int64 `json:"low_watermark"`
	// HighWatermark is the last allocated sequence of the partition;
	// sequences are never reused, so pruning never lowers it.
	HighWatermark int64 `json:"high_watermark"`
}

// StreamInfo is a stream's retention and what its partitions retain, as
// the StreamInfo operation reports it; StreamSummary is what ListStreams
// lists.
type StreamInfo struct {
	// MaxAge is the stream's retention: events older than it may be
	// pruned. 0: kept forever (no retention).
	MaxAge time.Duration `json:"max_age"`
	// Partitions holds one entry per partition, ordered by partition.
	Partitions []PartitionRange `json:"partitions"`
}

// Delivery is an event a group has in progress: leased, or waiting to be
// claimed again (a retry's delay, an expired lease, a replay). Events
// that a group ordered by key holds back behind an earlier event of
// their key are not among them: they wait for that event, not for a
// time.
type Delivery struct {
	// EventID, Partition and Sequence identify the event.
	EventID   string `json:"event_id"`
	Partition int    `json:"partition"`
	Sequence  int64  `json:"sequence"`
	// State is "leased" or "pending" (waiting to be claimed again).
	State string `json:"state"`
	// ConsumerID names the consumer holding a leased delivery; "" when
	// pending.
	ConsumerID string `json:"consumer_id,omitempty"`
	// Attempt is the attempt of the latest lease; 0 for an event reopened
	// by a replay and not leased since.
	Attempt int `json:"attempt"`
	// LeasedAt is when it was last leased; nil when it never was since a
	// replay reopened it.
	LeasedAt *time.Time `json:"leased_at"`
	// ExpiresAt is when a lease lapses, or when a pending delivery becomes
	// claimable.
	ExpiresAt time.Time `json:"expires_at"`
	// Reason is the reason of the latest retry, if any.
	Reason string `json:"reason,omitempty"`
}
