package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
)

// block stores the events of claims, which the cursor passes in a group
// ordered by key while an earlier event of their key is in progress, as
// blocked deliveries: never leased as such, and never read again by a
// fetch until the earlier one is settled (unblock).
func (s *session) block(ctx context.Context, stream string, g groupRow, claims []claim) error {
	if len(claims) == 0 {
		return nil
	}
	_, err := s.exec(ctx, `
		INSERT INTO rheo_deliveries (group_id, "partition", sequence, state, attempt, expires_at, key)
		SELECT ?2, j.value ->> 0, j.value ->> 1, 'blocked', 0, ?3, `+eventKey+`
		  FROM json_each(?4) AS j`,
		stream, g.id, s.now, claimsJSON(claims))
	return err
}

// dueInKeyOrder is what a group ordered by key claims again in a
// partition: the due deliveries with no earlier delivery of their key in
// progress. A due one that has (left by an earlier ordering, or behind an
// event replay reopened) becomes blocked instead, its attempt unchanged,
// so no fetch reads it again until the earlier one is settled; an
// expired lease loses its lease id then, as on a re-lease.
func (s *session) dueInKeyOrder(ctx context.Context, g groupRow, partition, maxCount int) ([]claim, error) {
	var due, behind []claim
	rows, err := s.query(ctx, `
		SELECT d.sequence, d.attempt,
		       d.key IS NOT NULL AND EXISTS (
		           SELECT 1 FROM rheo_deliveries AS x INDEXED BY rheo_deliveries_key
		            WHERE x.group_id = d.group_id AND x."partition" = d."partition"
		              AND x.key = d.key AND x.sequence < d.sequence)
		  FROM rheo_deliveries AS d INDEXED BY rheo_deliveries_due
		 WHERE d.group_id = ?1 AND d."partition" = ?2 AND d.expires_at <= ?3 AND d.state <> 'blocked'
		 ORDER BY d.sequence
		 LIMIT ?4`, g.id, partition, s.now, maxCount)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		c := claim{partition: partition}
		var waits bool
		err := rows.Scan(&c.sequence, &c.attempt, &waits)
		c.attempt++
		if waits {
			behind = append(behind, c)
		} else {
			due = append(due, c)
		}
		return err
	})
	if err != nil || len(behind) == 0 {
		return due, err
	}
	_, err = s.exec(ctx, `
		UPDATE rheo_deliveries
		   SET state = 'blocked', lease_id = NULL, consumer_id = NULL, expires_at = ?3
		 WHERE group_id = ?1 AND ("partition", sequence) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?2) AS j)`,
		g.id, claimsJSON(behind), s.now)
	return due, err
}

// partitionTurn is what a group ordered by partition may lease in w's
// partition: its lowest delivery in progress when that one is due, else
// nothing while it is in progress; with no delivery in progress, the one
// event at the cursor.
func (s *session) partitionTurn(ctx context.Context, g groupRow, w *partitionWork) error {
	lowest := &inProgress{}
	err := s.queryRow(ctx, `
		SELECT d.sequence, d.attempt, d.expires_at FROM rheo_deliveries AS d
		 WHERE d.group_id = ?1 AND d."partition" = ?2
		 ORDER BY d.sequence
		 LIMIT 1`, g.id, w.partition).Scan(&lowest.sequence, &lowest.attempt, &lowest.expiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		lowest, err = nil, nil
	}
	if err != nil {
		return err
	}
	w.fresh, w.due = turn(w.partition, w.fresh, lowest, s.now)
	return nil
}

// inProgress is a delivery in progress as a fetch reads it: its
// sequence, its attempt so far and when it is due again.
type inProgress struct {
	sequence  int64
	attempt   int
	expiresAt int64
}

// turn decides what a group ordered by partition may lease in a
// partition with fresh events past its cursor and lowest, its lowest
// delivery in progress (nil for none; rheo._turn): with none, the one
// event at the cursor; otherwise no new event, and that delivery again,
// with its next attempt, when it is due at now.
func turn(partition int, fresh int64, lowest *inProgress, now int64) (int64, []claim) {
	if lowest == nil {
		return min(fresh, 1), nil
	}
	if lowest.expiresAt > now {
		return 0, nil
	}
	return 0, []claim{{partition: partition, sequence: lowest.sequence, attempt: lowest.attempt + 1}}
}

// walk is what a fetch of a group ordered by key found past a
// partition's cursor, in sequence order: the events it may lease, and
// those to block behind an earlier event of their key.
type walk struct {
	candidates []claim
	blocked    []claim
	end        int64           // the sequence after the last event walked
	stop       int64           // the last sequence the walk may read
	high       int64           // the partition's high watermark
	held       map[string]bool // the keys of the candidates
}

// done reports whether the walk can find no more candidates.
func (wk *walk) done() bool { return wk.end > wk.stop }

// Walking the events past a cursor in a group ordered by key reads pages
// of walkPage events at first (fewer for a small quota), and at most max(walkMin, walkFactor *
// max_count) in a fetch that leases something: each event is walked
// once, as the cursor passes it, and stored as blocked if it must wait,
// so however many events wait behind a key, a fetch reads the same. A
// fetch that finds nothing to lease within that walks on to the end of
// the partitions, so that it returns nothing only when nothing is
// claimable; that costs once, in the fetch that passes a long run of
// events of blocked keys.
const (
	walkPage    = 256
	walkPageMax = 4096
	walkMin     = 1024
	walkFactor  = 8
)

// fill walks the partitions of work (a group ordered by key) until each
// has found the fresh events of its quota, or can find no more; the
// quotas the walks could not fill are shared again among the partitions
// that may still have more, until maxCount or no work is left.
func (s *session) fill(ctx context.Context, stream string, g groupRow, work []*partitionWork, maxCount, start int) error {
	unbounded := false
	for {
		taken := 0
		for _, w := range work {
			want := w.quota - min(w.quota, len(w.due))
			if err := s.walkKeys(ctx, stream, g, w.partition, w.walk, want); err != nil {
				return err
			}
			if found := len(w.walk.candidates); found < want || w.walk.done() {
				// The fresh count is now exact.
				w.fresh = int64(found)
				w.quota = min(w.quota, len(w.due)+found)
			}
			taken += w.quota
		}
		if taken == maxCount {
			return nil
		}
		if taken == 0 && !unbounded {
			// Nothing found within the walks' bounds: walk on.
			unbounded = true
			for _, w := range work {
				if w.walk.stop < w.walk.high {
					w.walk.stop = w.walk.high
					w.fresh = min(int64(maxCount), w.walk.high-w.walk.end+1)
				}
			}
		}
		share(work, maxCount-taken, start)
		shared := 0
		for _, w := range work {
			shared += w.quota
		}
		if shared == taken {
			return nil
		}
	}
}

// walkKeys walks the events of a partition past wk's end until wk has
// want candidates or is done: an event with a key that has a delivery in
// progress, or an earlier candidate in the walk, is to be blocked; the
// others (events without a key included) are candidates. One probe of
// the key index per event.
func (s *session) walkKeys(ctx context.Context, stream string, g groupRow, partition int, wk *walk, want int) error {
	// Pages start at about twice what is wanted, and double while they
	// come up short.
	page := int64(min(walkPage, 2*(want-len(wk.candidates))+16))
	for len(wk.candidates) < want && !wk.done() {
		last := min(wk.stop, wk.end+page-1)
		page = min(2*page, walkPageMax)
		rows, err := s.query(ctx, `
			SELECT e.sequence, e.key,
			       e.key IS NOT NULL AND EXISTS (
			           SELECT 1 FROM rheo_deliveries AS d INDEXED BY rheo_deliveries_key
			            WHERE d.group_id = ?1 AND d."partition" = ?3 AND d.key = e.key)
			  FROM rheo_events AS e
			 WHERE e.stream = ?2 AND e."partition" = ?3 AND e.sequence BETWEEN ?4 AND ?5
			 ORDER BY e.sequence`, g.id, stream, partition, wk.end, last)
		err = scanAll(rows, err, func(rows *sql.Rows) error {
			if len(wk.candidates) == want {
				return nil
			}
			c := claim{partition: partition, attempt: 1}
			var key sql.NullString
			var keyInProgress bool
			if err := rows.Scan(&c.sequence, &key, &keyInProgress); err != nil {
				return err
			}
			wk.visit(c, key, keyInProgress)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// visit walks past the event c of key (none when not valid):
// keyInProgress is whether the key has a delivery in progress. An event
// without a key is a candidate; one whose key has a delivery in progress,
// or an earlier candidate in the walk, is to be blocked; the others are
// candidates, and hold their key for the rest of the walk.
func (wk *walk) visit(c claim, key sql.NullString, keyInProgress bool) {
	wk.end = c.sequence + 1
	switch {
	case !key.Valid:
		wk.candidates = append(wk.candidates, c)
	case keyInProgress || wk.held[key.String]:
		wk.blocked = append(wk.blocked, c)
	default:
		wk.held[key.String] = true
		wk.candidates = append(wk.candidates, c)
	}
}

// take returns the first n candidates to lease, the events to block that
// the cursor passes with them, and the cursor after them: the first
// candidate not taken, or the end of the walk when all are.
func (wk *walk) take(n int) (taken, blocked []claim, next int64) {
	next = wk.end
	if n < len(wk.candidates) {
		next = wk.candidates[n].sequence
	}
	for _, b := range wk.blocked {
		if b.sequence >= next {
			break
		}
		blocked = append(blocked, b)
	}
	return wk.candidates[:n], blocked, next
}

// groupKey is a key of a group's partition whose delivery became
// terminal.
type groupKey struct {
	groupID   int64
	partition int
	key       string
}

// scanKeys reads rows of (group_id, partition, key) of deliveries just
// made terminal, leaving out those without a key, and closes them.
func scanKeys(rows *sql.Rows, err error) ([]groupKey, error) {
	var keys []groupKey
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var k groupKey
		var key sql.NullString
		err := rows.Scan(&k.groupID, &k.partition, &key)
		if key.Valid {
			k.key = key.String
			keys = append(keys, k)
		}
		return err
	})
	return keys, err
}

// unblock is what follows every delivery that became terminal (ack,
// dead letter, forced prune): for each of keys, the lowest delivery of
// the key left in its group and partition, when it is blocked, becomes
// pending and due now, so the next fetch claims it through the due
// index, and a blocked row never stays the lowest of its key. Groups
// not ordered by key have no blocked rows: it finds nothing to change.
// One probe of the key index per key.
func (s *session) unblock(ctx context.Context, keys []groupKey) error {
	if len(keys) == 0 {
		return nil
	}
	b := make([]byte, 0, 32*len(keys))
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, k.groupID, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(k.partition), 10)
		b = append(b, ',')
		key, _ := json.Marshal(k.key) // marshalling a string cannot fail
		b = append(b, key...)
		b = append(b, ']')
	}
	// The same batched UPDATE as in leaseAgain: the lowest delivery of
	// each key, updated through the primary key when it is blocked.
	_, err := s.exec(ctx, `
		INSERT INTO rheo_deliveries (group_id, "partition", sequence, state, attempt, expires_at)
		SELECT l.group_id, l."partition", l.sequence, 'pending', 0, ?2
		  FROM (SELECT j.value ->> 0 AS group_id, j.value ->> 1 AS "partition",
		               (SELECT x.sequence FROM rheo_deliveries AS x INDEXED BY rheo_deliveries_key
		                 WHERE x.group_id = j.value ->> 0 AND x."partition" = j.value ->> 1
		                   AND x.key = j.value ->> 2
		                 ORDER BY x.sequence LIMIT 1) AS sequence
		          FROM json_each(?1) AS j) AS l
		 WHERE l.sequence IS NOT NULL
		    ON CONFLICT (group_id, "partition", sequence) DO UPDATE
		   SET state = 'pending', expires_at = excluded.expires_at
		 WHERE state = 'blocked'`,
		"["+string(b)+"]", s.now)
	return err
}
