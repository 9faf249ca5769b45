package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// ops implements driver.Ops for a Driver and for its transactions: each
// method checks what needs no database, then runs the operation's
// statements through run, in a transaction of its own or in a savepoint
// of the host's.
type ops struct {
	run func(ctx context.Context, op string, fn func(s *session) error) error
}

// runChecked is run for operations with text arguments: texts that
// PostgreSQL cannot receive (checkText) fail invalid_argument first, as
// they do there, whatever else is wrong.
func (o ops) runChecked(ctx context.Context, op string, texts []string, fn func(s *session) error) error {
	for _, text := range texts {
		if err := checkText("text argument", text); err != nil {
			return err
		}
	}
	return o.run(ctx, op, fn)
}

// runClocked is runChecked for the operations that read the clock (those
// with a clock argument on PostgreSQL): a clock outside the valid range
// fails invalid_argument before anything else is read.
func (o ops) runClocked(ctx context.Context, op string, texts []string, fn func(s *session) error) error {
	return o.runChecked(ctx, op, texts, func(s *session) error {
		if err := s.checkClock(); err != nil {
			return err
		}
		return fn(s)
	})
}

// CreateStream creates a stream with partitionCount partitions.
func (o ops) CreateStream(ctx context.Context, stream string, partitionCount int) error {
	return o.runClocked(ctx, "create_stream", []string{stream}, func(s *session) error {
		return s.createStream(ctx, stream, partitionCount)
	})
}

// CreateGroup creates a consumer group. opts may be nil; an empty
// Ordering is OrderingNone.
func (o ops) CreateGroup(ctx context.Context, stream, group string, opts *rheo.CreateGroupOptions) error {
	if opts == nil {
		opts = &rheo.CreateGroupOptions{}
	}
	maxAttempts := opts.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = driver.DefaultMaxAttempts
	}
	// As on PostgreSQL, whose column is an int.
	if _, err := driver.Int32("max_attempts", maxAttempts); err != nil {
		return err
	}
	ordering := opts.Ordering
	if ordering == "" {
		ordering = rheo.OrderingNone
	}
	return o.runClocked(ctx, "create_group", []string{stream, group, string(ordering)}, func(s *session) error {
		return s.createGroup(ctx, stream, group, maxAttempts, start{after: opts.StartAfter, at: opts.StartAt},
			opts.Partitions, ordering)
	})
}

// Append adds one event; payload must be a JSON object. opts may be nil.
func (o ops) Append(ctx context.Context, stream string, payload json.RawMessage, opts *rheo.AppendOptions) (rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendOptions{}
	}
	if err := checkItem(payload, opts.Key, opts.ID); err != nil {
		return rheo.Event{}, err
	}
	metadata, err := metadataArg(opts.Metadata)
	if err != nil {
		return rheo.Event{}, err
	}
	if opts.TS != nil {
		if err := driver.CheckTime("ts", *opts.TS); err != nil {
			return rheo.Event{}, err
		}
	}
	var events []rheo.Event
	err = o.runClocked(ctx, "append", []string{stream}, func(s *session) error {
		items := []rheo.BatchItem{{Payload: payload, Key: opts.Key, ID: opts.ID}}
		var err error
		events, err = s.append(ctx, stream, items, opts.Partition, metadata, opts.TS)
		return err
	})
	if err != nil {
		return rheo.Event{}, err
	}
	return events[0], nil
}

// AppendBatch adds events atomically; the result keeps input order.
// opts may be nil.
func (o ops) AppendBatch(ctx context.Context, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendBatchOptions{}
	}
	metadata, err := metadataArg(opts.Metadata)
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		if err := checkItem(item.Payload, item.Key, item.ID); err != nil {
			return nil, err
		}
	}
	var events []rheo.Event
	err = o.runClocked(ctx, "append_batch", []string{stream}, func(s *session) error {
		var err error
		events, err = s.append(ctx, stream, items, opts.Partition, metadata, nil)
		return err
	})
	return events, err
}

// Read returns a page of one partition in sequence order. opts may be nil.
func (o ops) Read(ctx context.Context, stream string, opts *rheo.ReadOptions) ([]rheo.Event, error) {
	if opts == nil {
		opts = &rheo.ReadOptions{}
	}
	maxCount := opts.MaxCount
	if maxCount == 0 {
		maxCount = driver.DefaultReadCount
	}
	var events []rheo.Event
	err := o.runChecked(ctx, "read", []string{stream}, func(s *session) error {
		var err error
		events, err = s.read(ctx, stream, opts.After, maxCount, opts.Partition)
		return err
	})
	return events, err
}

// Fetch claims up to MaxCount events for one consumer. opts may be nil.
func (o ops) Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
	if opts == nil {
		opts = &rheo.FetchOptions{}
	}
	maxCount := opts.MaxCount
	if maxCount == 0 {
		maxCount = driver.DefaultFetchCount
	}
	leaseDuration := opts.LeaseDuration
	if leaseDuration == 0 {
		leaseDuration = driver.DefaultLeaseDuration
	}
	leaseMS, err := driver.Millis("lease duration", leaseDuration)
	if err != nil {
		return nil, err
	}
	var leases []rheo.Lease
	err = o.runClocked(ctx, "fetch", []string{stream, group, opts.ConsumerID}, func(s *session) error {
		var err error
		leases, err = s.fetch(ctx, stream, group, fetchArgs{
			maxCount:   maxCount,
			consumerID: opts.ConsumerID,
			leaseMS:    int64(leaseMS),
			partitions: opts.Partitions,
		})
		return err
	})
	return leases, err
}

// Renew extends a held lease to clock+d and returns the new expiry. d
// below one millisecond is invalid_argument. A lease id that is not a
// UUID was never issued: stale_lease.
func (o ops) Renew(ctx context.Context, leaseID string, d time.Duration) (time.Time, error) {
	id, err := leaseIDArg(leaseID)
	if err != nil {
		return time.Time{}, err
	}
	leaseMS, err := driver.Millis("lease duration", d)
	if err != nil {
		return time.Time{}, err
	}
	var expiresAt time.Time
	err = o.runClocked(ctx, "renew", nil, func(s *session) error {
		var err error
		expiresAt, err = s.renew(ctx, id, int64(leaseMS))
		return err
	})
	return expiresAt, err
}

// Ack settles a held lease as done. A lease id that is not a UUID was
// never issued: stale_lease.
func (o ops) Ack(ctx context.Context, leaseID string) error {
	id, err := leaseIDArg(leaseID)
	if err != nil {
		return err
	}
	return o.runClocked(ctx, "ack", nil, func(s *session) error { return s.ack(ctx, id) })
}

// AckBatch acks each lease independently and reports one result per
// lease presented, in order. Stale leases, repeats of a lease already in
// the batch and ids that are not UUIDs report OK=false.
func (o ops) AckBatch(ctx context.Context, leaseIDs []string) ([]rheo.AckResult, error) {
	ids := make([]string, len(leaseIDs))
	for i, s := range leaseIDs {
		// An id that is not a UUID stays "", which matches no lease.
		ids[i], _ = leaseIDArg(s)
	}
	var settled map[string]bool
	err := o.runClocked(ctx, "ack_batch", nil, func(s *session) error {
		var err error
		settled, err = s.ackBatch(ctx, ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	results := make([]rheo.AckResult, len(leaseIDs))
	for i, id := range ids {
		// The first presentation of a settled lease takes the success.
		results[i] = rheo.AckResult{LeaseID: leaseIDs[i], OK: settled[id]}
		delete(settled, id)
	}
	return results, nil
}

// Retry makes the event claimable again after the delay, or dead-letters
// it at the attempt limit. opts may be nil. A lease id that is not a UUID
// was never issued: stale_lease.
func (o ops) Retry(ctx context.Context, leaseID string, opts *rheo.RetryOptions) (rheo.RetryOutcome, error) {
	if opts == nil {
		opts = &rheo.RetryOptions{}
	}
	id, err := leaseIDArg(leaseID)
	if err != nil {
		return "", err
	}
	delayMS, err := driver.Millis("retry delay", opts.Delay)
	if err != nil {
		return "", err
	}
	var outcome rheo.RetryOutcome
	err = o.runClocked(ctx, "retry", []string{opts.Reason}, func(s *session) error {
		var err error
		outcome, err = s.retry(ctx, id, opts.Reason, int64(delayMS))
		return err
	})
	return outcome, err
}

// Reject dead-letters the event now; an empty reason is stored as
// "rejected". A lease id that is not a UUID was never issued: stale_lease.
func (o ops) Reject(ctx context.Context, leaseID string, reason string) error {
	id, err := leaseIDArg(leaseID)
	if err != nil {
		return err
	}
	return o.runClocked(ctx, "reject", []string{reason}, func(s *session) error { return s.reject(ctx, id, reason) })
}

// Replay makes events claimable again for a group and returns how many.
func (o ops) Replay(ctx context.Context, stream, group string, opts rheo.ReplayOptions) (int64, error) {
	var n int64
	err := o.runClocked(ctx, "replay", append([]string{stream, group}, opts.EventIDs...), func(s *session) error {
		var err error
		n, err = s.replay(ctx, stream, group, opts)
		return err
	})
	return n, err
}

// ResetGroup drops a group's deliveries and places its cursors anew.
func (o ops) ResetGroup(ctx context.Context, stream, group string, opts rheo.ResetOptions) error {
	return o.runClocked(ctx, "reset_group", []string{stream, group}, func(s *session) error {
		return s.resetGroup(ctx, stream, group, opts)
	})
}

// Lag reports the group's progress per partition; nil partitions means
// all.
func (o ops) Lag(ctx context.Context, stream, group string, partitions []int) (rheo.Lag, error) {
	var lag rheo.Lag
	err := o.runChecked(ctx, "lag", []string{stream, group}, func(s *session) error {
		g, err := s.group(ctx, stream, group)
		if err != nil {
			return err
		}
		scope, err := partitionScope(partitions, g.partitionCount)
		if err != nil {
			return err
		}
		lag, err = s.lag(ctx, stream, g, scope)
		return err
	})
	return lag, err
}

// ListStreams lists the streams ordered by name.
func (o ops) ListStreams(ctx context.Context) ([]rheo.StreamInfo, error) {
	var streams []rheo.StreamInfo
	err := o.run(ctx, "list_streams", func(s *session) error {
		var err error
		streams, err = s.listStreams(ctx)
		return err
	})
	return streams, err
}

// ListGroups lists a stream's groups ordered by name.
func (o ops) ListGroups(ctx context.Context, stream string) ([]rheo.GroupSummary, error) {
	var groups []rheo.GroupSummary
	err := o.runChecked(ctx, "list_groups", []string{stream}, func(s *session) error {
		var err error
		groups, err = s.listGroups(ctx, stream)
		return err
	})
	return groups, err
}

// DeadLetters pages through a group's dead letters in (partition,
// sequence) order. opts may be nil.
func (o ops) DeadLetters(ctx context.Context, stream, group string, opts *rheo.DeadLetterOptions) ([]rheo.DeadLetter, error) {
	if opts == nil {
		opts = &rheo.DeadLetterOptions{}
	}
	maxCount := opts.MaxCount
	if maxCount == 0 {
		maxCount = driver.DefaultDeadLetterCount
	}
	var letters []rheo.DeadLetter
	err := o.runChecked(ctx, "dead_letters", []string{stream, group, opts.After}, func(s *session) error {
		var err error
		letters, err = s.deadLetters(ctx, stream, group, maxCount, opts.After)
		return err
	})
	return letters, err
}

// GroupInfo summarises a group's state.
func (o ops) GroupInfo(ctx context.Context, stream, group string) (rheo.GroupInfo, error) {
	var info rheo.GroupInfo
	err := o.runClocked(ctx, "group_info", []string{stream, group}, func(s *session) error {
		var err error
		info, err = s.groupInfo(ctx, stream, group)
		return err
	})
	return info, err
}

// Leases lists the group's deliveries in progress, the soonest due first.
func (o ops) Leases(ctx context.Context, stream, group string, maxCount int) ([]rheo.Delivery, error) {
	if maxCount == 0 {
		maxCount = driver.DefaultLeaseCount
	}
	var deliveries []rheo.Delivery
	err := o.runChecked(ctx, "leases", []string{stream, group}, func(s *session) error {
		var err error
		deliveries, err = s.inProgress(ctx, stream, group, maxCount)
		return err
	})
	return deliveries, err
}

// checkItem checks what PostgreSQL checks of an event as it receives it.
func checkItem(payload json.RawMessage, key, id string) error {
	if err := checkJSON("payload", payload); err != nil {
		return err
	}
	if err := checkText("key", key); err != nil {
		return err
	}
	return checkText("event id", id)
}
