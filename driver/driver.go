// Package driver defines the interface every Rheo database driver
// implements: the whole contract of docs/reference.md, one method per operation.
//
// Two drivers ship: driver/postgres (pgx/v5, calling the rheo.* SQL
// functions) and driver/sqlite (database/sql with mattn/go-sqlite3 under
// cgo, or the pure-Go modernc.org/sqlite). Both pass the same conformance
// suite, driver/drivertest.
package driver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rheo-go/rheo"
)

// Ops is the complete set of Rheo data operations, on a database or
// inside one of its transactions.
//
// Every method takes ctx first. Errors wrap the rheo sentinels
// (rheo.ErrStaleLease, …) or are *rheo.AmbiguousError / *rheo.FailedError,
// or wrap rheo.ErrBackendUnavailable; raw driver errors never escape.
type Ops interface {
	Querier

	// CreateStream creates a stream with partitionCount partitions.
	CreateStream(ctx context.Context, stream string, partitionCount int) error
	// CreateGroup creates a consumer group on a stream. opts may be nil.
	CreateGroup(ctx context.Context, stream, group string, opts *rheo.CreateGroupOptions) error

	// Append adds one event; payload must be a JSON object. opts may be nil.
	Append(ctx context.Context, stream string, payload json.RawMessage, opts *rheo.AppendOptions) (rheo.Event, error)
	// AppendBatch adds events atomically, keeping input order in the
	// result. opts may be nil.
	AppendBatch(ctx context.Context, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error)
	// Read returns events of one partition in sequence order. opts may be nil.
	Read(ctx context.Context, stream string, opts *rheo.ReadOptions) ([]rheo.Event, error)

	// Fetch claims up to MaxCount events for one consumer. opts may be nil.
	Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error)
	// Renew extends a held lease to clock+d and returns the new expiry.
	Renew(ctx context.Context, leaseID string, d time.Duration) (time.Time, error)
	// Ack settles a held lease as done.
	Ack(ctx context.Context, leaseID string) error
	// AckBatch acks each lease independently; stale ones report OK=false.
	AckBatch(ctx context.Context, leaseIDs []string) ([]rheo.AckResult, error)
	// Retry makes the event claimable again after a delay, or
	// dead-letters it at the attempt limit. opts may be nil.
	Retry(ctx context.Context, leaseID string, opts *rheo.RetryOptions) (rheo.RetryOutcome, error)
	// Reject dead-letters the event now. An empty reason is stored as
	// "rejected".
	Reject(ctx context.Context, leaseID string, reason string) error

	// Replay makes events claimable again for a group. A nil opts, like
	// one with none of its selectors, is invalid_replay_opts.
	Replay(ctx context.Context, stream, group string, opts *rheo.ReplayOptions) (int64, error)
	// ResetGroup drops a group's deliveries and places its cursors anew.
	// A nil opts, like one without Confirm, fails confirm_required.
	ResetGroup(ctx context.Context, stream, group string, opts *rheo.ResetOptions) error
	// Lag reports the group's frontier, high watermark and lag per
	// partition; nil partitions means all.
	Lag(ctx context.Context, stream, group string, partitions []int) (rheo.Lag, error)

	// ListStreams lists the streams ordered by name.
	ListStreams(ctx context.Context) ([]rheo.StreamSummary, error)
	// ListGroups lists a stream's groups ordered by name.
	ListGroups(ctx context.Context, stream string) ([]rheo.GroupSummary, error)
	// DeadLetters pages through a group's dead letters in (partition,
	// sequence) order. opts may be nil.
	DeadLetters(ctx context.Context, stream, group string, opts *rheo.DeadLetterOptions) ([]rheo.DeadLetter, error)
	// GroupInfo summarises a group's state.
	GroupInfo(ctx context.Context, stream, group string) (rheo.GroupInfo, error)
	// Leases lists the group's deliveries in progress, the soonest due
	// first, at most maxCount (0: DefaultLeaseCount).
	Leases(ctx context.Context, stream, group string, maxCount int) ([]rheo.Delivery, error)

	// DropGroup removes a group with its deliveries, dead letters and
	// cursors; its leases become stale. Without opts.Confirm (opts nil
	// included) it fails confirm_required before any other check.
	DropGroup(ctx context.Context, stream, group string, opts *rheo.DropOptions) error
	// DropStream removes a stream, its groups and every event, and
	// returns how many events it deleted. The name can then be created
	// anew, with sequences from 1. Without opts.Confirm (opts nil
	// included) it fails confirm_required before any other check.
	DropStream(ctx context.Context, stream string, opts *rheo.DropOptions) (int64, error)
	// SetRetention sets the age past which Prune may delete a stream's
	// events; 0 removes the retention (events are kept forever). A
	// negative maxAge is passed through (invalid_argument); maxAge is
	// rounded down to whole microseconds, so one below a microsecond is
	// invalid_argument too.
	SetRetention(ctx context.Context, stream string, maxAge time.Duration) error
	// SetOrdering changes a group's ordering (rheo.OrderingNone,
	// OrderingKey or OrderingPartition) from its next fetch on. It
	// changes no state: leases already handed out are not taken back.
	// Any other word, "" included, is invalid_argument.
	SetOrdering(ctx context.Context, stream, group string, ordering rheo.Ordering) error
	// Prune deletes, partition by partition, the oldest events older than
	// the stream's retention that every group has passed (or, with
	// opts.Force, every such event), at most opts.MaxCount per call, and
	// returns how many it deleted. A stream without retention prunes
	// nothing. opts may be nil.
	Prune(ctx context.Context, stream string, opts *rheo.PruneOptions) (int64, error)
	// StreamInfo reports a stream's retention and the low and high
	// watermarks of each partition.
	StreamInfo(ctx context.Context, stream string) (rheo.StreamInfo, error)
}

// Driver is a Rheo database: the operations plus its connection (Ping,
// Capabilities, Wakeups, Close).
type Driver interface {
	Ops

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Capabilities declares what the driver guarantees.
	Capabilities() Capabilities
	// Wakeups returns a channel that receives a hint whenever events are
	// appended to stream (by anyone, where the database can tell), and a
	// function that ends the subscription. Hints may be dropped or
	// coalesced: consumers still poll.
	Wakeups(stream string) (<-chan Wakeup, func())
	// Close releases what the driver opened itself.
	Close() error
}

// Tx is a transaction of the host's that Rheo operations can join: an
// append or an ack made through it commits or rolls back with the host's
// own writes in the same transaction.
type Tx interface {
	Ops
	// Native returns the driver's own transaction handle: a pgx.Tx on
	// PostgreSQL, a *sql.Tx on SQLite.
	Native() any
}

// Transactor is implemented by drivers whose operations can join a
// transaction (Capabilities.TransactionalSettle).
type Transactor interface {
	// InTx begins a transaction, calls fn with it, and commits when fn
	// returns nil; otherwise, or when fn panics, it rolls back.
	InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
}

// Wakeup is a hint that a partition of a stream has new events.
type Wakeup struct {
	// Stream is the stream that was appended to.
	Stream string
	// Partition is the partition written.
	Partition int
	// Sequence is the highest sequence written.
	Sequence int64
}

// Capabilities is a driver's declaration of what it guarantees. The
// conformance suite gates optional cases on it; fencing and
// at-least-once cases are never skipped.
type Capabilities struct {
	// Durable: acknowledged writes survive a process crash.
	Durable bool
	// Distributed: several processes or hosts may consume one group.
	Distributed bool
	// Partitions: streams may have more than one partition.
	Partitions bool
	// ContiguousFrontier: the frontier is the contiguous acked prefix.
	ContiguousFrontier bool
	// Replay: replay by sequence, ids and time is supported.
	Replay bool
	// Notifications: appends by other processes wake consumers.
	Notifications bool
	// TransactionalSettle: settles can join a host transaction.
	TransactionalSettle bool
}
