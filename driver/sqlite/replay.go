package sqlite

import (
	"context"
	"database/sql"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// Replay makes events claimable again for a group and returns how many.
func (o ops) Replay(ctx context.Context, stream, group string, opts *rheo.ReplayOptions) (int64, error) {
	if opts == nil {
		opts = &rheo.ReplayOptions{}
	}
	var n int64
	err := o.runClocked(ctx, "replay", append([]string{stream, group}, opts.EventIDs...), func(s *session) error {
		var err error
		n, err = s.replay(ctx, stream, group, *opts)
		return err
	})
	return n, err
}

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
		if err := driverutil.CheckSequence("from_sequence", *o.FromSequence); err != nil {
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
