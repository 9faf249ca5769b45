package postgres

import (
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

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
func (o *ops) ListStreams(ctx context.Context) ([]rheo.StreamSummary, error) {
	var streams []rheo.StreamSummary
	err := o.run(ctx, "list_streams", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT s.stream, s.partition_count, s.created_at FROM rheo.list_streams() AS s`)
		if err != nil {
			return err
		}
		streams, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rheo.StreamSummary, error) {
			var s rheo.StreamSummary
			err := row.Scan(&s.Name, &s.PartitionCount, &s.CreatedAt)
			return s, err
		})
		if err != nil || len(streams) == 0 {
			return err
		}
		return streamNodes(ctx, q, streams)
	})
	return streams, err
}

// streamNodes sets the node of each stream on a Citus cluster, from
// Citus's catalog of placements: the node of the shard of rheo.events
// that holds the stream (docs/citus.md). On a single server it changes
// nothing.
func streamNodes(ctx context.Context, q querier, streams []rheo.StreamSummary) error {
	var distributed bool
	err := q.QueryRow(ctx, `SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL`).Scan(&distributed)
	if err != nil || !distributed {
		return err
	}
	names := make([]string, len(streams))
	for i, s := range streams {
		names[i] = s.Name
	}
	rows, err := q.Query(ctx, `
SELECT s.stream, n.nodename || ':' || n.nodeport
  FROM unnest($1::text[]) AS s(stream)
  JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('rheo.events', s.stream)
  JOIN pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary'
 WHERE EXISTS (SELECT FROM pg_dist_partition d WHERE d.logicalrelid = 'rheo.events'::regclass)`, names)
	if err != nil {
		return err
	}
	nodes := map[string]string{}
	var stream, node string
	if _, err := pgx.ForEachRow(rows, []any{&stream, &node}, func() error {
		nodes[stream] = node
		return nil
	}); err != nil {
		return err
	}
	for i := range streams {
		streams[i].Node = nodes[streams[i].Name]
	}
	return nil
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
	opts = driverutil.WithDefaults(opts)
	maxCount := opts.MaxCount
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
			Scan(&info.Lag, &info.InFlight, &info.PendingRetry, &info.DeadLetters, &info.OldestUnsettledTS)
	})
	return info, err
}

// Leases lists the group's deliveries in progress, the soonest due first.
func (o *ops) Leases(ctx context.Context, stream, group string, maxCount int) ([]rheo.Delivery, error) {
	maxCount = driverutil.LeaseCount(maxCount)
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

// StreamInfo reports a stream's retention and each partition's low and
// high watermarks: one call of rheo.stream_info.
func (o *ops) StreamInfo(ctx context.Context, stream string) (rheo.StreamInfo, error) {
	info := rheo.StreamInfo{Partitions: []rheo.PartitionRange{}}
	err := o.run(ctx, "stream_info", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT i."partition", i.low_watermark, i.high_watermark, i.max_age
			FROM rheo.stream_info(stream => $1) AS i`, stream)
		if err != nil {
			return err
		}
		var p rheo.PartitionRange
		var maxAge pgtype.Interval
		_, err = pgx.ForEachRow(rows, []any{&p.Partition, &p.LowWatermark, &p.HighWatermark, &maxAge}, func() error {
			info.Partitions = append(info.Partitions, p)
			info.MaxAge = intervalDuration(maxAge)
			return nil
		})
		return err
	})
	if err != nil {
		return rheo.StreamInfo{}, err
	}
	return info, nil
}

// intervalDuration converts a retention read back from SQL, where it may
// have been set in months or days, with PostgreSQL's own equivalences
// for comparing intervals (a month is 30 days, a day 24 hours). An
// interval longer than time.Duration holds (about 292 years) is read as
// the longest Duration; NULL is 0.
func intervalDuration(iv pgtype.Interval) time.Duration {
	if !iv.Valid {
		return 0
	}
	const day = int64(24 * time.Hour)
	ns, ok := mulAdd(0, iv.Microseconds, int64(time.Microsecond))
	if ok {
		ns, ok = mulAdd(ns, int64(iv.Days), day)
	}
	if ok {
		ns, ok = mulAdd(ns, int64(iv.Months), 30*day)
	}
	if !ok {
		// Retentions are positive: a negative interval cannot be stored.
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}

// mulAdd returns acc + n*unit, and false when that overflows an int64.
func mulAdd(acc, n, unit int64) (int64, bool) {
	if n > math.MaxInt64/unit || n < math.MinInt64/unit {
		return 0, false
	}
	sum := acc + n*unit
	if (n > 0 && sum < acc) || (n < 0 && sum > acc) {
		return 0, false
	}
	return sum, true
}
