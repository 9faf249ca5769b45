package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

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
func (o ops) ListStreams(ctx context.Context) ([]rheo.StreamSummary, error) {
	var streams []rheo.StreamSummary
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
	opts = driverutil.WithDefaults(opts)
	maxCount := opts.MaxCount
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
	maxCount = driverutil.LeaseCount(maxCount)
	var deliveries []rheo.Delivery
	err := o.runChecked(ctx, "leases", []string{stream, group}, func(s *session) error {
		var err error
		deliveries, err = s.inProgress(ctx, stream, group, maxCount)
		return err
	})
	return deliveries, err
}

// StreamInfo reports a stream's retention and each partition's low and
// high watermarks.
func (o ops) StreamInfo(ctx context.Context, stream string) (rheo.StreamInfo, error) {
	var info rheo.StreamInfo
	err := o.runChecked(ctx, "stream_info", []string{stream}, func(s *session) error {
		var err error
		info, err = s.streamInfo(ctx, stream)
		return err
	})
	return info, err
}

func (s *session) streamInfo(ctx context.Context, stream string) (rheo.StreamInfo, error) {
	info := rheo.StreamInfo{Partitions: []rheo.PartitionRange{}}
	var maxAge sql.NullInt64
	err := s.queryRow(ctx, `SELECT max_age FROM rheo_streams WHERE stream = ?`, stream).Scan(&maxAge)
	if errors.Is(err, sql.ErrNoRows) {
		return info, rheo.Errorf(rheo.ErrStreamNotFound, "stream %q does not exist", stream)
	}
	if err != nil {
		return info, err
	}
	info.MaxAge = time.Duration(maxAge.Int64) * time.Microsecond
	rows, err := s.query(ctx, `
		SELECT "partition", low_watermark, high_watermark FROM rheo_partitions
		 WHERE stream = ? ORDER BY "partition"`, stream)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var p rheo.PartitionRange
		err := rows.Scan(&p.Partition, &p.LowWatermark, &p.HighWatermark)
		info.Partitions = append(info.Partitions, p)
		return err
	})
	return info, err
}

// lag returns the frontier, high watermark and lag of each partition in
// scope, ordered by partition. The frontier is the lowest delivery in
// progress minus one, or the cursor minus one when there is none: each
// row is two index lookups, whatever the history's size.
func (s *session) lag(ctx context.Context, stream string, g groupRow, scope []int) (rheo.Lag, error) {
	lag := rheo.Lag{Partitions: []rheo.PartitionLag{}}
	rows, err := s.query(ctx, `
		SELECT c."partition",
		       coalesce((SELECT d.sequence FROM rheo_deliveries AS d
		                  WHERE d.group_id = c.group_id AND d."partition" = c."partition"
		                  ORDER BY d.sequence LIMIT 1),
		                c.next_sequence) - 1,
		       p.high_watermark
		  FROM rheo_cursors AS c
		  JOIN rheo_partitions AS p ON p.stream = ?1 AND p."partition" = c."partition"
		 WHERE c.group_id = ?2 AND c."partition" IN (SELECT value FROM json_each(?3))
		 ORDER BY c."partition"`, stream, g.id, intsJSON(scope))
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var p rheo.PartitionLag
		if err := rows.Scan(&p.Partition, &p.Frontier, &p.HighWatermark); err != nil {
			return err
		}
		p.Lag = max(0, p.HighWatermark-p.Frontier)
		lag.Partitions = append(lag.Partitions, p)
		lag.Total += p.Lag
		return nil
	})
	return lag, err
}

// deadLetters returns a page of a group's dead letters in (partition,
// sequence) order; after is the event id of the previous page's last one.
func (s *session) deadLetters(ctx context.Context, stream, group string, maxCount int, after string) ([]rheo.DeadLetter, error) {
	g, err := s.group(ctx, stream, group)
	if err != nil {
		return nil, err
	}
	if maxCount < 0 {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", maxCount)
	}
	afterPartition, afterSequence := -1, int64(0)
	if after != "" {
		err := s.queryRow(ctx, `
			SELECT dl."partition", dl.sequence
			  FROM rheo_events AS e
			  JOIN rheo_dead_letters AS dl
			    ON dl.group_id = ?1 AND dl."partition" = e."partition" AND dl.sequence = e.sequence
			 WHERE e.id = ?2 AND e.stream = ?3`, g.id, after, stream).Scan(&afterPartition, &afterSequence)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, rheo.Errorf(rheo.ErrCursorNotFound, "event %q is not among the dead letters of group %q", after, group)
		}
		if err != nil {
			return nil, err
		}
	}
	letters := []rheo.DeadLetter{}
	rows, err := s.query(ctx, `
		SELECT `+eventColumns+`, dl.attempt, dl.reason, dl.dead_lettered_at
		  FROM rheo_dead_letters AS dl
		 CROSS JOIN rheo_events AS e
		    ON e.stream = ?1 AND e."partition" = dl."partition" AND e.sequence = dl.sequence
		 WHERE dl.group_id = ?2 AND (dl."partition", dl.sequence) > (?3, ?4)
		 ORDER BY dl."partition", dl.sequence
		 LIMIT ?5`, stream, g.id, afterPartition, afterSequence, maxCount)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var d rheo.DeadLetter
		var at int64
		ev, err := scanEvent(rows, stream, &d.Attempt, &d.Reason, &at)
		d.Event, d.DeadLetteredAt = ev, fromMicros(at)
		letters = append(letters, d)
		return err
	})
	return letters, err
}

// inProgress lists the group's deliveries in progress, the soonest due first,
// as rheo.leases does: leases and pending deliveries, not the blocked
// ones, which wait for an earlier event rather than for a time.
func (s *session) inProgress(ctx context.Context, stream, group string, maxCount int) ([]rheo.Delivery, error) {
	g, err := s.group(ctx, stream, group)
	if err != nil {
		return nil, err
	}
	if maxCount < 0 {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", maxCount)
	}
	deliveries := []rheo.Delivery{}
	rows, err := s.query(ctx, `
		SELECT e.id, d."partition", d.sequence, d.state, d.consumer_id, d.attempt, d.leased_at, d.expires_at, d.reason
		  FROM rheo_deliveries AS d
		  JOIN rheo_events AS e ON e.stream = ?2 AND e."partition" = d."partition" AND e.sequence = d.sequence
		 WHERE d.group_id = ?1 AND d.state <> 'blocked'
		 ORDER BY d.expires_at, d."partition", d.sequence
		 LIMIT ?3`, g.id, stream, maxCount)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var d rheo.Delivery
		var consumer, reason sql.NullString
		var leasedAt sql.NullInt64
		var expiresAt int64
		if err := rows.Scan(&d.EventID, &d.Partition, &d.Sequence, &d.State, &consumer, &d.Attempt,
			&leasedAt, &expiresAt, &reason); err != nil {
			return err
		}
		d.ConsumerID, d.Reason = consumer.String, reason.String
		if leasedAt.Valid {
			t := fromMicros(leasedAt.Int64)
			d.LeasedAt = &t
		}
		d.ExpiresAt = fromMicros(expiresAt)
		deliveries = append(deliveries, d)
		return nil
	})
	return deliveries, err
}

// groupInfo summarises a group's state at the clock.
func (s *session) groupInfo(ctx context.Context, stream, group string) (rheo.GroupInfo, error) {
	var info rheo.GroupInfo
	g, err := s.group(ctx, stream, group)
	if err != nil {
		return info, err
	}
	lag, err := s.lag(ctx, stream, g, driverutil.AllPartitions(g.partitionCount))
	if err != nil {
		return info, err
	}
	info.Lag = lag.Total
	var oldest sql.NullInt64
	// Non-terminal: deliveries in progress and events not offered yet.
	// The second part reads the unoffered backlog's ts.
	err = s.queryRow(ctx, `
		SELECT (SELECT count(*) FROM rheo_deliveries AS d
		         WHERE d.group_id = ?1 AND d.state = 'leased' AND d.expires_at > ?2),
		       (SELECT count(*) FROM rheo_deliveries AS d
		         WHERE d.group_id = ?1 AND d.state <> 'blocked' AND NOT (d.state = 'leased' AND d.expires_at > ?2)),
		       (SELECT count(*) FROM rheo_dead_letters AS dl WHERE dl.group_id = ?1),
		       (SELECT min(ts) FROM (
		            SELECT e.ts FROM rheo_deliveries AS d
		             CROSS JOIN rheo_events AS e
		                ON e.stream = ?3 AND e."partition" = d."partition" AND e.sequence = d.sequence
		             WHERE d.group_id = ?1
		            UNION ALL
		            SELECT e.ts FROM rheo_cursors AS c
		             CROSS JOIN rheo_events AS e
		                ON e.stream = ?3 AND e."partition" = c."partition" AND e.sequence >= c.next_sequence
		             WHERE c.group_id = ?1))`, g.id, s.now, stream).
		Scan(&info.InFlight, &info.PendingRetry, &info.DeadLetters, &oldest)
	if oldest.Valid {
		t := fromMicros(oldest.Int64)
		info.OldestUnsettledTS = &t
	}
	return info, err
}

func (s *session) listStreams(ctx context.Context) ([]rheo.StreamSummary, error) {
	streams := []rheo.StreamSummary{}
	rows, err := s.query(ctx, `SELECT stream, partition_count, created_at FROM rheo_streams ORDER BY stream`)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var info rheo.StreamSummary
		var createdAt int64
		if err := rows.Scan(&info.Name, &info.PartitionCount, &createdAt); err != nil {
			return err
		}
		info.CreatedAt = fromMicros(createdAt)
		streams = append(streams, info)
		return nil
	})
	return streams, err
}

func (s *session) listGroups(ctx context.Context, stream string) ([]rheo.GroupSummary, error) {
	if _, err := s.stream(ctx, stream); err != nil {
		return nil, err
	}
	groups := []rheo.GroupSummary{}
	rows, err := s.query(ctx, `
		SELECT group_name, max_attempts, created_at, ordering FROM rheo_groups WHERE stream = ? ORDER BY group_name`, stream)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var g rheo.GroupSummary
		var createdAt int64
		if err := rows.Scan(&g.Name, &g.MaxAttempts, &createdAt, (*string)(&g.Ordering)); err != nil {
			return err
		}
		g.CreatedAt = fromMicros(createdAt)
		groups = append(groups, g)
		return nil
	})
	return groups, err
}
