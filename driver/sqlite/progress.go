package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// replay makes events claimable again for a group, without copying them.
// Exactly one selector: FromSequence, EventIDs or FromTS.
func (s *session) replay(ctx context.Context, stream, group string, o rheo.ReplayOptions) (int64, error) {
	g, err := s.group(ctx, stream, group)
	if err != nil {
		return 0, err
	}
	selectors := 0
	for _, given := range []bool{o.FromSequence != nil, o.EventIDs != nil, o.FromTS != nil} {
		if given {
			selectors++
		}
	}
	if selectors != 1 {
		return 0, rheo.Errorf(rheo.ErrInvalidReplayOpts, "give exactly one of from_sequence, event_ids and from_ts")
	}
	if o.FromSequence != nil {
		if err := driver.CheckSequence("from_sequence", *o.FromSequence); err != nil {
			return 0, err
		}
	}
	scope, err := partitionScope(o.Partitions, g.partitionCount)
	if err != nil {
		return 0, err
	}
	if o.EventIDs != nil {
		return s.reopen(ctx, stream, g, o.EventIDs, scope)
	}

	// Per partition, the sequence after which everything is replayed.
	after := map[int]int64{}
	if o.FromSequence != nil {
		for _, p := range scope {
			after[p] = *o.FromSequence
		}
	} else {
		// A partition with no event at or after FromTS is untouched.
		rows, err := s.query(ctx, `
			SELECT f."partition", f.first - 1
			  FROM (SELECT j.value AS "partition", `+firstAtSQL("?1", "j.value", "?3")+` AS first
			          FROM json_each(?2) AS j) AS f
			 WHERE f.first IS NOT NULL`, stream, intsJSON(scope), boundMicros(*o.FromTS))
		err = scanAll(rows, err, func(rows *sql.Rows) error {
			var p int
			var n int64
			err := rows.Scan(&p, &n)
			after[p] = n
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	var total int64
	for _, p := range scope {
		if n, ok := after[p]; ok {
			reopened, err := s.rewind(ctx, stream, g, p, n)
			if err != nil {
				return 0, err
			}
			total += reopened
		}
	}
	return total, nil
}

// reopen makes the terminal events (acked or dead-lettered) among ids
// claimable again at attempt 1 and returns how many it reopened. Ids that
// are unknown, outside scope, not offered yet, leased or pending are
// ignored.
func (s *session) reopen(ctx context.Context, stream string, g groupRow, ids []string, scope []int) (int64, error) {
	var targets []claim
	// Terminal: below the cursor with no delivery in progress.
	rows, err := s.query(ctx, `
		SELECT DISTINCT e."partition", e.sequence
		  FROM json_each(?3) AS u
		 CROSS JOIN rheo_events AS e ON e.id = u.value AND e.stream = ?1
		  JOIN rheo_cursors AS c ON c.group_id = ?2 AND c."partition" = e."partition"
		 WHERE e."partition" IN (SELECT value FROM json_each(?4))
		   AND e.sequence < c.next_sequence
		   AND NOT EXISTS (SELECT 1 FROM rheo_deliveries AS d
		                    WHERE d.group_id = ?2 AND d."partition" = e."partition" AND d.sequence = e.sequence)`,
		stream, g.id, stringsJSON(ids), intsJSON(scope))
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var c claim
		err := rows.Scan(&c.partition, &c.sequence)
		targets = append(targets, c)
		return err
	})
	if err != nil || len(targets) == 0 {
		return 0, err
	}
	list := claimsJSON(targets) // [partition, sequence, ""] each
	if _, err := s.exec(ctx, `
		DELETE FROM rheo_dead_letters
		 WHERE group_id = ?1
		   AND ("partition", sequence) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?2) AS j)`,
		g.id, list); err != nil {
		return 0, err
	}
	// attempt 0: the next lease is attempt 1.
	if _, err := s.exec(ctx, `
		INSERT INTO rheo_deliveries (group_id, "partition", sequence, state, attempt, expires_at, key)
		SELECT ?2, j.value ->> 0, j.value ->> 1, 'pending', 0, ?4, `+eventKey+` FROM json_each(?3) AS j`,
		stream, g.id, list, s.now); err != nil {
		return 0, err
	}
	return int64(len(targets)), nil
}

// rewind rewinds a group in one partition so every event after sequence n
// is claimable again from attempt 1: its leases become stale and its dead
// letters are cleared. It never moves the cursor forward. It returns how
// many already-offered events became claimable again.
func (s *session) rewind(ctx context.Context, stream string, g groupRow, partition int, n int64) (int64, error) {
	var next, low, high int64
	if err := s.queryRow(ctx, `
		SELECT c.next_sequence, p.low_watermark, p.high_watermark
		  FROM rheo_cursors AS c
		  JOIN rheo_partitions AS p ON p.stream = ?1 AND p."partition" = c."partition"
		 WHERE c.group_id = ?2 AND c."partition" = ?3`, stream, g.id, partition).Scan(&next, &low, &high); err != nil {
		return 0, err
	}
	// Pruned events are terminal for every group: a rewind below the low
	// watermark rewinds to it.
	n = max(n, low-1)
	if next <= n+1 {
		return 0, nil
	}
	// Blocked events were passed by the cursor but never leased: not
	// offered (reference §1.1), so not counted.
	var unoffered int64
	if err := s.queryRow(ctx, `
		SELECT count(*) FROM rheo_deliveries AS d INDEXED BY rheo_deliveries_blocked
		 WHERE d.group_id = ?1 AND d."partition" = ?2 AND d.state = 'blocked' AND d.sequence > ?3 AND d.attempt = 0`,
		g.id, partition, n).Scan(&unoffered); err != nil {
		return 0, err
	}
	for _, q := range []string{
		`DELETE FROM rheo_deliveries WHERE group_id = ?1 AND "partition" = ?2 AND sequence > ?3`,
		`DELETE FROM rheo_dead_letters WHERE group_id = ?1 AND "partition" = ?2 AND sequence > ?3`,
		`UPDATE rheo_cursors SET next_sequence = ?3 + 1 WHERE group_id = ?1 AND "partition" = ?2`,
	} {
		if _, err := s.exec(ctx, q, g.id, partition, n); err != nil {
			return 0, err
		}
	}
	// Offered: below the cursor and existing (a cursor placed past the
	// high watermark has offered nothing beyond it).
	return max(0, min(next-1, high)-n-unoffered), nil
}

// resetGroup drops a group's leases, pending retries and dead letters in
// the listed partitions and places its cursors as createGroup would. The
// log is untouched.
func (s *session) resetGroup(ctx context.Context, stream, group string, o rheo.ResetOptions) error {
	if !o.Confirm {
		return rheo.Errorf(rheo.ErrConfirmRequired, "reset_group drops leases, retries and dead letters: call it with confirm")
	}
	g, err := s.group(ctx, stream, group)
	if err != nil {
		return err
	}
	st := start{after: o.StartAfter, at: o.StartAt}
	if err := st.check(); err != nil {
		return err
	}
	scope, err := partitionScope(o.Partitions, g.partitionCount)
	if err != nil {
		return err
	}
	scopeJSON := intsJSON(scope)
	for _, q := range []string{
		`DELETE FROM rheo_deliveries WHERE group_id = ? AND "partition" IN (SELECT value FROM json_each(?))`,
		`DELETE FROM rheo_dead_letters WHERE group_id = ? AND "partition" IN (SELECT value FROM json_each(?))`,
	} {
		if _, err := s.exec(ctx, q, g.id, scopeJSON); err != nil {
			return err
		}
	}
	return s.placeCursors(ctx, g.id, stream, scope, st)
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
	lag, err := s.lag(ctx, stream, g, allPartitions(g.partitionCount))
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
		Scan(&info.Inflight, &info.PendingRetry, &info.DeadLetters, &oldest)
	if oldest.Valid {
		t := fromMicros(oldest.Int64)
		info.OldestUnsettledTS = &t
	}
	return info, err
}
