package postgres

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/retention"
)

// querier is what a pooled connection and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ops runs each operation as one call of its SQL function, on a
// connection of pool or, when tx is set, in tx.
type ops struct {
	pool   *pgxpool.Pool
	tx     pgx.Tx
	clock  driver.Clock
	vacuum *retention.Vacuumer // nil when turned off
}

// run calls fn with a querier and translates its error. write marks
// operations that change state: on the pool each commits on its own, and
// an answer lost after it was sent leaves it ambiguous; in a transaction
// it cannot commit once it failed.
func (o *ops) run(ctx context.Context, op string, write bool, fn func(q querier) error) error {
	if o.tx != nil {
		if conn := o.tx.Conn(); conn != nil && conn.IsClosed() {
			// An earlier failure closed the transaction's connection;
			// pgx would report it as ErrConnClosed, which proves nothing.
			return unavailable(op, errConnLost)
		}
		e := reads
		if write {
			e = writesInTx
		}
		return interpretError(op, e, fn(nulGuard{o.tx}))
	}
	// Acquiring first keeps a wait for a free connection apart from a
	// statement in flight: only the latter can be ambiguous.
	conn, err := o.pool.Acquire(ctx)
	if err != nil {
		return interpretError(op, reads, err)
	}
	defer conn.Release()
	e := reads
	if write {
		e = commits
	}
	return interpretError(op, e, fn(nulGuard{conn}))
}

// clockArg is the clock argument: NULL for the database's now(). A clock
// outside driver.CheckTime's range is invalid_argument before the
// database is asked, since pgx cannot send every time.Time.
func (o *ops) clockArg() (any, error) {
	if o.clock == nil {
		return nil, nil
	}
	now := o.clock.Now()
	if err := driver.CheckTime("clock", now); err != nil {
		return nil, err
	}
	return now, nil
}

// boundArg is a time argument that is only compared with the events' ts
// (start_at, from_ts): NULL for nil, and -infinity or infinity for a time
// outside the clock range (driver.Infinite), which compares the same and
// which pgx, unlike some such times, can always encode.
func boundArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	switch driver.Infinite(*t) {
	case -1:
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	case 1:
		return pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	return *t
}

// CreateStream creates a stream with partitionCount partitions (passed
// through: below 1 is invalid_partition_count).
func (o *ops) CreateStream(ctx context.Context, stream string, partitionCount int) error {
	clock, err := o.clockArg()
	if err != nil {
		return err
	}
	return o.run(ctx, "create_stream", true, func(q querier) error {
		_, err := q.Exec(ctx, `SELECT rheo.create_stream(stream => $1, partition_count => $2, clock => $3)`,
			stream, clampInt32(partitionCount), clock)
		return err
	})
}

// CreateGroup creates a consumer group. opts may be nil; an empty
// Ordering is sent as 'none', the SQL default, and any other word as
// given, for rheo.create_group to check.
func (o *ops) CreateGroup(ctx context.Context, stream, group string, opts *rheo.CreateGroupOptions) error {
	if opts == nil {
		opts = &rheo.CreateGroupOptions{}
	}
	maxAttempts := opts.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = driver.DefaultMaxAttempts
	}
	// Clamping would store another max_attempts than the one asked for.
	attempts, err := driver.Int32("max_attempts", maxAttempts)
	if err != nil {
		return err
	}
	clock, err := o.clockArg()
	if err != nil {
		return err
	}
	ordering := opts.Ordering
	if ordering == "" {
		ordering = rheo.OrderingNone
	}
	return o.run(ctx, "create_group", true, func(q querier) error {
		_, err := q.Exec(ctx, `SELECT rheo.create_group(stream => $1, group_name => $2, max_attempts => $3,
			start_after => $4, start_at => $5, partitions => $6, clock => $7, ordering => $8)`,
			stream, group, attempts, opts.StartAfter, boundArg(opts.StartAt),
			partitionArray(opts.Partitions), clock, string(ordering))
		return err
	})
}

const eventColumns = `e.stream, e."partition", e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts`

// Append adds one event. opts may be nil.
func (o *ops) Append(ctx context.Context, stream string, payload json.RawMessage, opts *rheo.AppendOptions) (rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendOptions{}
	}
	if err := checkJSON("payload", payload); err != nil {
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
	clock, err := o.clockArg()
	if err != nil {
		return rheo.Event{}, err
	}
	var partition *int32
	if opts.Partition != nil {
		p := clampInt32(*opts.Partition)
		partition = &p
	}
	var ev rheo.Event
	err = o.run(ctx, "append", true, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM rheo.append(stream => $1, payload => $2,
			key => $3, "partition" => $4, id => $5, metadata => $6, ts => $7, clock => $8) AS e`,
			stream, payload, textArg(opts.Key), partition, textArg(opts.ID), metadata, opts.TS, clock)
		if err != nil {
			return err
		}
		ev, err = pgx.CollectExactlyOneRow(rows, scanEvent)
		return err
	})
	return ev, err
}

// AppendBatch adds events atomically; the result keeps input order.
// opts may be nil.
func (o *ops) AppendBatch(ctx context.Context, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendBatchOptions{}
	}
	metadata, err := metadataArg(opts.Metadata)
	if err != nil {
		return nil, err
	}
	payloads := []byte{'['}
	var keys, ids []pgtype.Text
	for i, item := range items {
		if err := checkJSON("payload", item.Payload); err != nil {
			return nil, err
		}
		if i > 0 {
			payloads = append(payloads, ',')
		}
		payloads = append(payloads, item.Payload...)
		if item.Key != "" && keys == nil {
			keys = make([]pgtype.Text, len(items))
		}
		if item.ID != "" && ids == nil {
			ids = make([]pgtype.Text, len(items))
		}
	}
	payloads = append(payloads, ']')
	// keys and ids stay NULL unless some item has one; empty ones are
	// NULL elements.
	for i, item := range items {
		if keys != nil {
			keys[i] = textArg(item.Key)
		}
		if ids != nil {
			ids[i] = textArg(item.ID)
		}
	}
	var partition *int32
	if opts.Partition != nil {
		p := clampInt32(*opts.Partition)
		partition = &p
	}
	clock, err := o.clockArg()
	if err != nil {
		return nil, err
	}
	var events []rheo.Event
	err = o.run(ctx, "append_batch", true, func(q querier) error {
		// rheo.append_batch returns the events in input order, and a scan of
		// a function's result keeps the order the function returned its rows
		// in; an ORDER BY on WITH ORDINALITY would sort them again.
		rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM rheo.append_batch(stream => $1, payloads => $2,
			keys => $3, ids => $4, "partition" => $5, metadata => $6, clock => $7) AS e`,
			stream, json.RawMessage(payloads), keys, ids, partition, metadata, clock)
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, scanEvent)
		return err
	})
	return events, err
}

// Read returns a page of one partition in sequence order. opts may be nil.
func (o *ops) Read(ctx context.Context, stream string, opts *rheo.ReadOptions) ([]rheo.Event, error) {
	if opts == nil {
		opts = &rheo.ReadOptions{}
	}
	maxCount := opts.MaxCount
	if maxCount == 0 {
		maxCount = driver.DefaultReadCount
	}
	var events []rheo.Event
	err := o.run(ctx, "read", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM rheo.read(stream => $1, after => $2,
			max_count => $3, "partition" => $4) AS e`,
			stream, opts.After, clampInt32(maxCount), clampInt32(opts.Partition))
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, scanEvent)
		return err
	})
	return events, err
}

// Fetch claims up to MaxCount events for one consumer. opts may be nil.
func (o *ops) Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
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
	clock, err := o.clockArg()
	if err != nil {
		return nil, err
	}
	args := []any{stream, group, clampInt32(maxCount), textArg(opts.ConsumerID), leaseMS,
		partitionArray(opts.Partitions), clock}
	var leases []rheo.Lease
	err = o.run(ctx, "fetch", true, func(q querier) error {
		if o.tx != nil {
			rows, err := q.Query(ctx, fetchSQL, args...)
			if err != nil {
				return err
			}
			leases, err = pgx.CollectRows(rows, scanLease)
			return err
		}
		// A fetch of its own commits asynchronously: see asyncCommitSQL.
		// Both statements go in one round trip and, sent before one Sync,
		// run in one implicit transaction.
		batch := &pgx.Batch{}
		batch.Queue(asyncCommitSQL)
		batch.Queue(fetchSQL, args...)
		results := q.SendBatch(ctx, batch)
		if _, err := results.Exec(); err != nil {
			_ = results.Close()
			return err
		}
		rows, err := results.Query()
		if err == nil {
			leases, err = pgx.CollectRows(rows, scanLease)
		}
		if cerr := results.Close(); err == nil {
			err = cerr
		}
		return err
	})
	return leases, err
}

const fetchSQL = `SELECT l.lease_id::text, l.receipt, l.stream, l.group_name, l.consumer_id,
	l.attempt, l.leased_at, l.expires_at, l.event_id, l."partition", l.sequence, l.key, l.type,
	l.payload, l.metadata, l.ts
	FROM rheo.fetch(stream => $1, group_name => $2, max_count => $3, consumer_id => $4,
		lease_ms => $5, partitions => $6, clock => $7) AS l`

// asyncCommitSQL makes the commit of the transaction it runs in return
// without waiting for its WAL to reach disk. Fetch uses it when it runs
// in a transaction of its own, never in a host's: a claim needs no
// durability of its own. Should the server crash before the claim is on
// disk, the claim is lost whole (cursor and leases together) and the
// events are simply claimable again, which at-least-once delivery allows;
// a settle of such a lost lease fails stale_lease. Every later durable
// commit, such as the ack of one of the leases, flushes the claim to disk
// first, because the WAL is written in order. This removes a disk flush
// from every fetch.
const asyncCommitSQL = `SELECT set_config('synchronous_commit', 'off', true)`

// Renew extends a held lease to clock+d and returns the new expiry. d is
// passed through: below one millisecond is invalid_argument. A lease id
// that is not a UUID was never issued: stale_lease.
func (o *ops) Renew(ctx context.Context, leaseID string, d time.Duration) (time.Time, error) {
	id, err := leaseIDArg(leaseID)
	if err != nil {
		return time.Time{}, err
	}
	leaseMS, err := driver.Millis("lease duration", d)
	if err != nil {
		return time.Time{}, err
	}
	clock, err := o.clockArg()
	if err != nil {
		return time.Time{}, err
	}
	var expiresAt time.Time
	err = o.run(ctx, "renew", true, func(q querier) error {
		return q.QueryRow(ctx, `SELECT rheo.renew(lease_id => $1, lease_ms => $2, clock => $3)`,
			id, leaseMS, clock).Scan(&expiresAt)
	})
	return expiresAt, err
}

// Ack settles a held lease as done. A lease id that is not a UUID was
// never issued: stale_lease.
func (o *ops) Ack(ctx context.Context, leaseID string) error {
	id, err := leaseIDArg(leaseID)
	if err != nil {
		return err
	}
	clock, err := o.clockArg()
	if err != nil {
		return err
	}
	err = o.run(ctx, "ack", true, func(q querier) error {
		_, err := q.Exec(ctx, `SELECT rheo.ack(lease_id => $1, clock => $2)`, id, clock)
		return err
	})
	if err == nil {
		o.vacuum.Settled(1)
	}
	return err
}

// AckBatch acks each lease independently and reports one result per
// lease presented, in order. Stale leases, repeats of a lease already in
// the batch and ids that are not UUIDs report OK=false.
func (o *ops) AckBatch(ctx context.Context, leaseIDs []string) ([]rheo.AckResult, error) {
	clock, err := o.clockArg()
	if err != nil {
		return nil, err
	}
	ids := make([]pgtype.UUID, 0, len(leaseIDs))
	for _, s := range leaseIDs {
		if id, err := leaseIDArg(s); err == nil {
			ids = append(ids, id)
		}
	}
	// Settled counts, per lease, the rows that came back ok; each
	// presentation of the lease, in input order, takes one.
	settled := make(map[[16]byte]int, len(ids))
	err = o.run(ctx, "ack_batch", true, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT r.lease_id, r.ok FROM rheo.ack_batch(lease_ids => $1, clock => $2) AS r`,
			ids, clock)
		if err != nil {
			return err
		}
		var id pgtype.UUID
		var ok bool
		_, err = pgx.ForEachRow(rows, []any{&id, &ok}, func() error {
			if ok {
				settled[id.Bytes]++
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	results := make([]rheo.AckResult, len(leaseIDs))
	acked := 0
	for i, s := range leaseIDs {
		results[i] = rheo.AckResult{LeaseID: s}
		if id, err := leaseIDArg(s); err == nil && settled[id.Bytes] > 0 {
			settled[id.Bytes]--
			results[i].OK = true
			acked++
		}
	}
	o.vacuum.Settled(acked)
	return results, nil
}

// Retry makes the event claimable again after the delay, or dead-letters
// it at the attempt limit. opts may be nil. A lease id that is not a UUID
// was never issued: stale_lease.
func (o *ops) Retry(ctx context.Context, leaseID string, opts *rheo.RetryOptions) (rheo.RetryOutcome, error) {
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
	clock, err := o.clockArg()
	if err != nil {
		return "", err
	}
	var outcome string
	err = o.run(ctx, "retry", true, func(q querier) error {
		return q.QueryRow(ctx, `SELECT rheo.retry(lease_id => $1, reason => $2, delay_ms => $3, clock => $4)`,
			id, textArg(opts.Reason), delayMS, clock).Scan(&outcome)
	})
	if err == nil {
		o.vacuum.Settled(1)
	}
	return rheo.RetryOutcome(outcome), err
}

// Reject dead-letters the event now; an empty reason is stored as
// "rejected". A lease id that is not a UUID was never issued: stale_lease.
func (o *ops) Reject(ctx context.Context, leaseID string, reason string) error {
	id, err := leaseIDArg(leaseID)
	if err != nil {
		return err
	}
	clock, err := o.clockArg()
	if err != nil {
		return err
	}
	err = o.run(ctx, "reject", true, func(q querier) error {
		_, err := q.Exec(ctx, `SELECT rheo.reject(lease_id => $1, reason => $2, clock => $3)`,
			id, textArg(reason), clock)
		return err
	})
	if err == nil {
		o.vacuum.Settled(1)
	}
	return err
}

// Replay makes events claimable again for a group and returns how many.
func (o *ops) Replay(ctx context.Context, stream, group string, opts rheo.ReplayOptions) (int64, error) {
	clock, err := o.clockArg()
	if err != nil {
		return 0, err
	}
	var n int64
	err = o.run(ctx, "replay", true, func(q querier) error {
		return q.QueryRow(ctx, `SELECT rheo.replay(stream => $1, group_name => $2, from_sequence => $3,
			event_ids => $4, from_ts => $5, partitions => $6, clock => $7)`,
			stream, group, opts.FromSequence, opts.EventIDs, boundArg(opts.FromTS),
			partitionArray(opts.Partitions), clock).Scan(&n)
	})
	return n, err
}

// ResetGroup drops a group's deliveries and places its cursors anew.
func (o *ops) ResetGroup(ctx context.Context, stream, group string, opts rheo.ResetOptions) error {
	clock, err := o.clockArg()
	if err != nil {
		return err
	}
	return o.run(ctx, "reset_group", true, func(q querier) error {
		_, err := q.Exec(ctx, `SELECT rheo.reset_group(stream => $1, group_name => $2, confirm => $3,
			start_after => $4, start_at => $5, partitions => $6, clock => $7)`,
			stream, group, opts.Confirm, opts.StartAfter, boundArg(opts.StartAt),
			partitionArray(opts.Partitions), clock)
		return err
	})
}

// Lag reports the group's progress per partition; nil partitions means
// all.
func (o *ops) Lag(ctx context.Context, stream, group string, partitions []int) (rheo.Lag, error) {
	var lag rheo.Lag
	err := o.run(ctx, "lag", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT l."partition", l.frontier, l.high_watermark, l.lag
			FROM rheo.lag(stream => $1, group_name => $2, partitions => $3) AS l`,
			stream, group, partitionArray(partitions))
		if err != nil {
			return err
		}
		lag.Partitions, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rheo.PartitionLag, error) {
			var p rheo.PartitionLag
			err := row.Scan(&p.Partition, &p.Frontier, &p.HighWatermark, &p.Lag)
			return p, err
		})
		return err
	})
	for _, p := range lag.Partitions {
		lag.Total += p.Lag
	}
	return lag, err
}

// ListStreams lists the streams ordered by name.
func (o *ops) ListStreams(ctx context.Context) ([]rheo.StreamInfo, error) {
	var streams []rheo.StreamInfo
	err := o.run(ctx, "list_streams", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT s.stream, s.partition_count, s.created_at FROM rheo.list_streams() AS s`)
		if err != nil {
			return err
		}
		streams, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rheo.StreamInfo, error) {
			var s rheo.StreamInfo
			err := row.Scan(&s.Name, &s.PartitionCount, &s.CreatedAt)
			return s, err
		})
		return err
	})
	return streams, err
}

// ListGroups lists a stream's groups ordered by name.
func (o *ops) ListGroups(ctx context.Context, stream string) ([]rheo.GroupSummary, error) {
	var groups []rheo.GroupSummary
	err := o.run(ctx, "list_groups", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT g.group_name, g.max_attempts, g.created_at, g.ordering
			FROM rheo.list_groups(stream => $1) AS g`, stream)
		if err != nil {
			return err
		}
		groups, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rheo.GroupSummary, error) {
			var g rheo.GroupSummary
			err := row.Scan(&g.Name, &g.MaxAttempts, &g.CreatedAt, (*string)(&g.Ordering))
			return g, err
		})
		return err
	})
	return groups, err
}

// DeadLetters pages through a group's dead letters in (partition,
// sequence) order. opts may be nil.
func (o *ops) DeadLetters(ctx context.Context, stream, group string, opts *rheo.DeadLetterOptions) ([]rheo.DeadLetter, error) {
	if opts == nil {
		opts = &rheo.DeadLetterOptions{}
	}
	maxCount := opts.MaxCount
	if maxCount == 0 {
		maxCount = driver.DefaultDeadLetterCount
	}
	var letters []rheo.DeadLetter
	err := o.run(ctx, "dead_letters", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT d.event_id, d."partition", d.sequence, d.attempt, d.reason,
			d.dead_lettered_at, d.type, d.key, d.payload, d.metadata, d.ts
			FROM rheo.dead_letters(stream => $1, group_name => $2, max_count => $3, after => $4) AS d`,
			stream, group, clampInt32(maxCount), textArg(opts.After))
		if err != nil {
			return err
		}
		letters, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rheo.DeadLetter, error) {
			d := rheo.DeadLetter{Event: rheo.Event{Stream: stream}}
			var typ, key *string
			err := row.Scan(&d.Event.ID, &d.Event.Partition, &d.Event.Sequence, &d.Attempt, &d.Reason,
				&d.DeadLetteredAt, &typ, &key, (*[]byte)(&d.Event.Payload), (*[]byte)(&d.Event.Metadata), &d.Event.TS)
			d.Event.Type, d.Event.Key = deref(typ), deref(key)
			return d, err
		})
		return err
	})
	return letters, err
}

// GroupInfo summarises a group's state.
func (o *ops) GroupInfo(ctx context.Context, stream, group string) (rheo.GroupInfo, error) {
	clock, err := o.clockArg()
	if err != nil {
		return rheo.GroupInfo{}, err
	}
	var info rheo.GroupInfo
	err = o.run(ctx, "group_info", false, func(q querier) error {
		return q.QueryRow(ctx, `SELECT g.lag, g.inflight, g.pending_retry, g.dead_letters, g.oldest_unsettled_ts
			FROM rheo.group_info(stream => $1, group_name => $2, clock => $3) AS g`,
			stream, group, clock).
			Scan(&info.Lag, &info.Inflight, &info.PendingRetry, &info.DeadLetters, &info.OldestUnsettledTS)
	})
	return info, err
}

// Leases lists the group's deliveries in progress, the soonest due first.
func (o *ops) Leases(ctx context.Context, stream, group string, maxCount int) ([]rheo.Delivery, error) {
	if maxCount == 0 {
		maxCount = driver.DefaultLeaseCount
	}
	var deliveries []rheo.Delivery
	err := o.run(ctx, "leases", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT l.event_id, l."partition", l.sequence, l.state, l.consumer_id, l.attempt,
			l.leased_at, l.expires_at, l.reason
			FROM rheo.leases(stream => $1, group_name => $2, max_count => $3) AS l`,
			stream, group, clampInt32(maxCount))
		if err != nil {
			return err
		}
		deliveries, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rheo.Delivery, error) {
			var d rheo.Delivery
			var consumer, reason *string
			err := row.Scan(&d.EventID, &d.Partition, &d.Sequence, &d.State, &consumer, &d.Attempt,
				&d.LeasedAt, &d.ExpiresAt, &reason)
			d.ConsumerID, d.Reason = deref(consumer), deref(reason)
			return d, err
		})
		return err
	})
	return deliveries, err
}

// scanEvent reads a row of rheo.events. JSON columns, here and in the
// other scans, are read through *[]byte, which pgx copies as they are; a
// *json.RawMessage would go through json.Unmarshal, which parses every
// document again only to copy it.
func scanEvent(row pgx.CollectableRow) (rheo.Event, error) {
	var ev rheo.Event
	var key, typ *string
	err := row.Scan(&ev.Stream, &ev.Partition, &ev.Sequence, &ev.ID, &key, &typ,
		(*[]byte)(&ev.Payload), (*[]byte)(&ev.Metadata), &ev.TS)
	ev.Key, ev.Type = deref(key), deref(typ)
	return ev, err
}

func scanLease(row pgx.CollectableRow) (rheo.Lease, error) {
	var l rheo.Lease
	var key, typ *string
	err := row.Scan(&l.LeaseID, &l.Receipt, &l.Event.Stream, &l.Group, &l.ConsumerID, &l.Attempt,
		&l.LeasedAt, &l.ExpiresAt, &l.Event.ID, &l.Event.Partition, &l.Event.Sequence, &key, &typ,
		(*[]byte)(&l.Event.Payload), (*[]byte)(&l.Event.Metadata), &l.Event.TS)
	l.Event.Key, l.Event.Type = deref(key), deref(typ)
	return l, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// textArg maps "" to NULL, the SQL default of the optional text
// arguments (key, id, consumer_id, reason, after).
func textArg(s string) pgtype.Text {
	return pgtype.Text{String: s, Valid: s != ""}
}

// partitionArray maps nil to NULL (all partitions) and keeps a non-nil
// empty slice as '{}' (none).
func partitionArray(partitions []int) []int32 {
	if partitions == nil {
		return nil
	}
	out := make([]int32, len(partitions))
	for i, p := range partitions {
		out[i] = clampInt32(p)
	}
	return out
}

// clampInt32 fits v into an int argument. Values beyond int32 are out of
// range either way, and clamping lets the SQL function report them in the
// order of checks of reference §1.4.
func clampInt32(v int) int32 {
	return int32(max(math.MinInt32, min(math.MaxInt32, v)))
}

// leaseIDArg parses a lease id. A string that is not a UUID cannot have
// been issued, so it is stale.
func leaseIDArg(s string) (pgtype.UUID, error) {
	var id pgtype.UUID
	if err := id.Scan(s); err != nil || !id.Valid {
		return id, rheo.Errorf(rheo.ErrStaleLease, "lease %q was never issued", s)
	}
	return id, nil
}

// checkJSON rejects bytes that are not JSON at all, or JSON that either
// database cannot take (driver.CheckJSON), naming the argument; whether
// the value is an object is for the SQL function to say, after its other
// checks.
func checkJSON(what string, v json.RawMessage) error {
	return driver.CheckJSON(what, v)
}

// metadataArg defaults nil metadata to {}.
func metadataArg(m json.RawMessage) (json.RawMessage, error) {
	if m == nil {
		return json.RawMessage(`{}`), nil
	}
	if err := checkJSON("metadata", m); err != nil {
		return nil, err
	}
	return m, nil
}
