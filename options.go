package rheo

import (
	"encoding/json"
	"time"
)

// CreateGroupOptions are the optional settings of a new consumer group.
type CreateGroupOptions struct {
	// MaxAttempts is how many leases an event gets before it is
	// dead-lettered. Defaults to 20: with the worker's default back-off
	// (worker.DefaultRetryPolicy) an always-failing event is retried for
	// about an hour (docs/worker.md).
	MaxAttempts int
	// StartAfter starts the group after this sequence in the listed
	// partitions: events up to it are never delivered. Must not be
	// combined with StartAt.
	StartAfter *int64
	// StartAt starts the group at the first event with ts >= StartAt in
	// each listed partition, or after the last event when there is none.
	StartAt *time.Time
	// Partitions limits StartAfter and StartAt to these partitions; nil
	// means all. Partitions not listed start at the beginning.
	Partitions []int
	// Ordering is the group's delivery order: OrderingNone,
	// OrderingKey or OrderingPartition. Defaults to OrderingNone; a
	// word other than the three is invalid_argument.
	Ordering Ordering
}

// Ordering is how strictly a group hands out the events of one key or
// one partition (reference §3.3). A group's ordering is set when it is created
// and changed with SetOrdering; the change takes effect from the group's
// next fetch and takes back no lease already handed out.
type Ordering string

const (
	// OrderingNone, the default, leases whatever is claimable: a group may
	// hold several leases of one partition, and a retried event comes
	// back after later ones.
	OrderingNone Ordering = "none"
	// OrderingKey leases an event only when every earlier event of its
	// partition with the same key is terminal for the group (acked or
	// dead-lettered), so handlers see each key's events one at a time, in
	// sequence order, retries included. Events without a key are not
	// ordered. Keys never wait for each other.
	OrderingKey Ordering = "key"
	// OrderingPartition leases an event only when every earlier event of
	// its partition is terminal for the group: at most one lease per
	// partition at a time, in sequence order, retries included.
	OrderingPartition Ordering = "partition"
)

// AppendOptions are the optional settings of one appended event.
type AppendOptions struct {
	// Key routes the event by md5 hash; defaults to the payload's "key"
	// field. An empty key counts as no key.
	Key string
	// Partition, when set, overrides routing by key.
	Partition *int
	// ID is the producer's idempotency key. Defaults to a generated
	// time-ordered UUID.
	ID string
	// Metadata is a JSON object stored with the event. Defaults to {}.
	Metadata json.RawMessage
	// TS is the event's timestamp. Defaults to the clock.
	TS *time.Time
}

// BatchItem is one event of an AppendBatch call.
type BatchItem struct {
	// Payload is the event's JSON object.
	Payload json.RawMessage
	// Key routes the event; defaults to the payload's "key" field.
	Key string
	// ID is the producer's idempotency key; defaults to a generated UUID.
	ID string
}

// AppendBatchOptions are the optional settings of an AppendBatch call.
type AppendBatchOptions struct {
	// Partition, when set, puts every event of the batch in it.
	Partition *int
	// Metadata is stored with every event of the batch. Defaults to {}.
	Metadata json.RawMessage
}

// ReadOptions select a page of one partition's log.
type ReadOptions struct {
	// After returns events with a higher sequence. Defaults to 0.
	After int64
	// MaxCount limits the page. Defaults to 100.
	MaxCount int
	// Partition is the partition to read. Defaults to 0.
	Partition int
}

// FetchOptions are the optional settings of a Fetch call.
type FetchOptions struct {
	// MaxCount is the most leases returned. Defaults to 10.
	MaxCount int
	// ConsumerID names the consumer. Defaults to a generated id.
	ConsumerID string
	// LeaseDuration is how long the leases last. Defaults to 30s; it is
	// rounded down to whole milliseconds.
	LeaseDuration time.Duration
	// Partitions limits the fetch to these partitions. Nil means all; an
	// empty non-nil slice claims nothing.
	Partitions []int
}

// RetryOptions are the optional settings of a Retry call.
type RetryOptions struct {
	// Reason is stored with the event if it is dead-lettered. Defaults to
	// "max_attempts".
	Reason string
	// Delay is how long the event waits before it is claimable again.
	Delay time.Duration
}

// ReplayOptions select what a Replay makes claimable again. Exactly one of
// FromSequence, EventIDs and FromTS must be set.
type ReplayOptions struct {
	// FromSequence rewinds the group so every event with a higher sequence
	// is claimable again from attempt 1.
	FromSequence *int64
	// EventIDs reopens these terminal (acked or dead-lettered) events.
	EventIDs []string
	// FromTS rewinds each partition to its first event with ts >= FromTS.
	FromTS *time.Time
	// Partitions limits the replay; nil means all.
	Partitions []int
}

// ResetOptions are the settings of a ResetGroup call.
type ResetOptions struct {
	// Confirm must be true: a reset drops the group's leases, retries and
	// dead letters. Without it (a nil *ResetOptions included) ResetGroup
	// fails confirm_required.
	Confirm bool
	// StartAfter and StartAt place the cursors as in CreateGroupOptions;
	// by default the group starts at the beginning.
	StartAfter *int64
	// StartAt places each cursor at the first event with ts >= StartAt.
	StartAt *time.Time
	// Partitions limits the reset; nil means all.
	Partitions []int
}

// DropOptions are the settings of a DropGroup or DropStream call.
type DropOptions struct {
	// Confirm must be true: a drop deletes the group's deliveries, dead
	// letters and cursors, or the stream's events and groups, for good.
	// Without it (a nil *DropOptions included) the call fails
	// confirm_required before any other check.
	Confirm bool
}

// DeadLetterOptions page through a group's dead letters.
type DeadLetterOptions struct {
	// MaxCount limits the page. Defaults to 100.
	MaxCount int
	// After is the event id of the last dead letter of the previous page.
	After string
}

// PruneOptions are the optional settings of a Prune call.
type PruneOptions struct {
	// MaxCount is the most events one call deletes, over all partitions:
	// a bounded transaction. Call Prune again until it returns 0.
	// Defaults to 10000.
	MaxCount int
	// Force also deletes aged events that some group has not settled:
	// their leases become stale, their deliveries and dead letters go,
	// and those groups' cursors and frontiers move past them.
	Force bool
}
