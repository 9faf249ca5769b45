package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

type fetchArgs struct {
	maxCount   int
	consumerID string
	leaseMS    int64
	partitions []int
}

// partitionWork is what one partition in scope can give a fetch.
type partitionWork struct {
	partition int
	next      int64   // the cursor: the next sequence never offered
	fresh     int64   // events past the cursor claimable now, capped at max_count (ordered by key: at most that many until fill walks them)
	due       []claim // deliveries claimable again, in sequence order
	quota     int     // how many leases this fetch takes here
	// walk is, in a group ordered by key, what the fetch found past the
	// cursor; nil otherwise, where the fresh events are the next ones.
	walk *walk
}

// claimable reports whether the partition has anything to lease now.
func (w *partitionWork) claimable() bool { return w.fresh > 0 || len(w.due) > 0 }

// claim is one event a fetch leases.
type claim struct {
	partition int
	sequence  int64
	attempt   int // the attempt of the lease being made
	leaseID   string
}

// fetch claims up to maxCount events for one consumer.
//
// Claimable in a partition: deliveries whose retry delay has passed or
// whose lease expired (below the attempt limit), then events past the
// cursor, as the group's ordering allows (reference §3.3). Every step reads an
// index range, so the cost is O(leases returned + deliveries claimable
// again), never O(history) nor O(events blocked behind a key). The
// transaction holds SQLite's write lock, so no other fetch can claim the
// same events.
func (s *session) fetch(ctx context.Context, stream, group string, a fetchArgs) ([]rheo.Lease, error) {
	g, err := s.group(ctx, stream, group)
	if err != nil {
		return nil, err
	}
	if a.maxCount < 0 {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", a.maxCount)
	}
	if a.leaseMS < 1 {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "lease_ms must be >= 1, got %d", a.leaseMS)
	}
	if err := driver.CheckLength("consumer_id", a.consumerID); err != nil {
		return nil, err
	}
	scope, err := partitionScope(a.partitions, g.partitionCount)
	if err != nil {
		return nil, err
	}
	if len(scope) == 0 {
		return []rheo.Lease{}, nil
	}
	// A lease that expired at the attempt limit is dead-lettered rather
	// than leased again, so a handler that always crashes cannot loop;
	// a fetch of zero leases does that too, like rheo.fetch. Its key is
	// unblocked at once, so this fetch may lease the next event of it.
	if err := s.deadLetterExpired(ctx, g, intsJSON(scope)); err != nil {
		return nil, err
	}
	if a.maxCount == 0 {
		return []rheo.Lease{}, nil
	}
	all, err := s.fetchableWork(ctx, stream, g, scope, a.maxCount)
	if err != nil {
		return nil, err
	}
	var work []*partitionWork
	for i := range all {
		if all[i].claimable() {
			work = append(work, &all[i])
		}
	}
	if len(work) > 0 {
		start := int(s.d.rotation.Add(1) % uint64(len(work)))
		share(work, a.maxCount, start)
		if g.ordering == rheo.OrderingKey {
			if err := s.fill(ctx, stream, g, work, a.maxCount, start); err != nil {
				return nil, err
			}
		}
	}

	// Within a partition the deliveries to claim again all precede the
	// cursor: they come first, then the events past it.
	var again, fresh, blocked []claim
	var cursors []byte // [partition, next_sequence], ...
	for _, w := range all {
		n := min(w.quota, len(w.due))
		again = append(again, w.due[:n]...)
		take := w.quota - n
		if w.walk == nil {
			for seq := w.next; seq < w.next+int64(take); seq++ {
				fresh = append(fresh, claim{partition: w.partition, sequence: seq, attempt: 1})
			}
			if take > 0 {
				cursors = appendPair(cursors, int64(w.partition), w.next+int64(take))
			}
			continue
		}
		taken, passed, next := w.walk.take(take)
		fresh = append(fresh, taken...)
		blocked = append(blocked, passed...)
		if next != w.next {
			cursors = appendPair(cursors, int64(w.partition), next)
		}
	}
	l := leasing{consumer: a.consumerID, leasedAt: s.now, expiresAt: s.now + a.leaseMS*1000}
	if l.consumer == "" {
		l.consumer = "consumer-" + newLeaseID()
	}
	if err := s.leaseAgain(ctx, g, l, again); err != nil {
		return nil, err
	}
	if err := s.leaseFresh(ctx, stream, g, l, fresh); err != nil {
		return nil, err
	}
	if err := s.block(ctx, stream, g, blocked); err != nil {
		return nil, err
	}
	if err := s.moveCursors(ctx, g, cursors); err != nil {
		return nil, err
	}
	if len(again)+len(fresh) == 0 {
		return []rheo.Lease{}, nil
	}
	return s.leases(ctx, stream, group, l, append(again, fresh...))
}

// leasing is what the leases of one fetch share.
type leasing struct {
	consumer  string
	leasedAt  int64
	expiresAt int64
}

// leaseAgain leases again the deliveries of claims (pending or
// expired), each under a new lease id, at the next attempt.
func (s *session) leaseAgain(ctx context.Context, g groupRow, l leasing, claims []claim) error {
	if len(claims) == 0 {
		return nil
	}
	for i := range claims {
		claims[i].leaseID = newLeaseID()
	}
	// A batched UPDATE written as an upsert: SQLite runs UPDATE … FROM
	// with the updated table as the outer loop, reading every delivery of
	// the group for each claim, while INSERT … SELECT drives from the
	// claims and updates each one's row through the primary key. The rows
	// exist, so every claim takes the DO UPDATE branch.
	_, err := s.exec(ctx, `
		INSERT INTO rheo_deliveries
		       (group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at)
		SELECT ?1, j.value ->> 0, j.value ->> 1, 'leased', j.value ->> 2, ?2, 1, ?3, ?4
		  FROM json_each(?5) AS j
		 WHERE true -- the parser needs it before ON CONFLICT
		    ON CONFLICT (group_id, "partition", sequence) DO UPDATE
		   SET state = 'leased', lease_id = excluded.lease_id, consumer_id = excluded.consumer_id,
		       attempt = attempt + 1, leased_at = excluded.leased_at, expires_at = excluded.expires_at`,
		g.id, l.consumer, l.leasedAt, l.expiresAt, claimsJSON(claims))
	return err
}

// eventKey is the key of the event a json_each row ?1-stream names, for
// the key column of a new delivery: one primary key probe.
const eventKey = `(SELECT e.key FROM rheo_events AS e
		        WHERE e.stream = ?1 AND e."partition" = j.value ->> 0 AND e.sequence = j.value ->> 1)`

// leaseFresh leases the events of claims, past their partitions'
// cursors, at attempt 1. Only a group ordered by key stores the events'
// keys in their deliveries (setOrdering copies them when a group turns
// to key), which saves the other orderings a probe and an index entry
// per delivery.
func (s *session) leaseFresh(ctx context.Context, stream string, g groupRow, l leasing, claims []claim) error {
	if len(claims) == 0 {
		return nil
	}
	for i := range claims {
		claims[i].leaseID = newLeaseID()
	}
	key := "NULL"
	if g.ordering == rheo.OrderingKey {
		key = eventKey
	}
	_, err := s.exec(ctx, `
		INSERT INTO rheo_deliveries
		       (group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at, key)
		SELECT ?2, j.value ->> 0, j.value ->> 1, 'leased', j.value ->> 2, ?3, 1, ?4, ?5, `+key+`
		  FROM json_each(?6) AS j`,
		stream, g.id, l.consumer, l.leasedAt, l.expiresAt, claimsJSON(claims))
	return err
}

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

// moveCursors sets the group's cursors to cursors, a comma-separated
// list of [partition, next_sequence] pairs.
func (s *session) moveCursors(ctx context.Context, g groupRow, cursors []byte) error {
	if len(cursors) == 0 {
		return nil
	}
	// The cursor rows exist: a batched UPDATE, as in leaseAgain.
	_, err := s.exec(ctx, `
		INSERT INTO rheo_cursors (group_id, "partition", next_sequence)
		SELECT ?1, j.value ->> 0, j.value ->> 1
		  FROM json_each(?2) AS j
		 WHERE true
		    ON CONFLICT (group_id, "partition") DO UPDATE SET next_sequence = excluded.next_sequence`,
		g.id, "["+string(cursors)+"]")
	return err
}

// leases returns the leases of claims with their events, ordered by
// (partition, sequence).
func (s *session) leases(ctx context.Context, stream, group string, l leasing, claims []claim) ([]rheo.Lease, error) {
	slices.SortFunc(claims, func(x, y claim) int {
		return cmp.Or(cmp.Compare(x.partition, y.partition), cmp.Compare(x.sequence, y.sequence))
	})
	leases := make([]rheo.Lease, len(claims))
	index := make(map[[2]int64]int, len(claims))
	for i, c := range claims {
		index[[2]int64{int64(c.partition), c.sequence}] = i
		leases[i] = rheo.Lease{
			LeaseID:    c.leaseID,
			Receipt:    c.leaseID,
			Group:      group,
			ConsumerID: l.consumer,
			Attempt:    c.attempt,
			LeasedAt:   fromMicros(l.leasedAt),
			ExpiresAt:  fromMicros(l.expiresAt),
		}
	}
	// CROSS JOIN keeps json_each outside: one primary key probe per lease.
	rows, err := s.query(ctx, `
		SELECT `+eventColumns+`
		  FROM json_each(?2) AS j
		 CROSS JOIN rheo_events AS e ON e.stream = ?1 AND e."partition" = j.value ->> 0 AND e.sequence = j.value ->> 1`,
		stream, claimsJSON(claims))
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		ev, err := scanEvent(rows, stream)
		if err != nil {
			return err
		}
		leases[index[[2]int64{int64(ev.Partition), ev.Sequence}]].Event = ev
		return nil
	})
	if err != nil {
		return nil, err
	}
	return leases, nil
}

// deadLetterExpired dead-letters, in the partitions of scopeJSON, the
// leases that expired at the group's attempt limit, and unblocks their
// keys.
func (s *session) deadLetterExpired(ctx context.Context, g groupRow, scopeJSON string) error {
	// INDEXED BY: the planner, without statistics, prefers the primary
	// key, which reads every delivery in progress instead of the expired
	// ones only.
	const expired = `rheo_deliveries AS d INDEXED BY rheo_deliveries_due
		WHERE d.group_id = ?1 AND d."partition" IN (SELECT value FROM json_each(?2))
		  AND d.expires_at <= ?3 AND d.state <> 'blocked' AND d.state = 'leased' AND d.attempt >= ?4`
	res, err := s.exec(ctx, `
		INSERT INTO rheo_dead_letters (group_id, "partition", sequence, attempt, reason, dead_lettered_at)
		SELECT d.group_id, d."partition", d.sequence, d.attempt, 'lease_expired', ?3
		  FROM `+expired, g.id, scopeJSON, s.now, g.maxAttempts)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	rows, err := s.query(ctx, `DELETE FROM `+expired+` RETURNING group_id, "partition", key`,
		g.id, scopeJSON, s.now, g.maxAttempts)
	keys, err := scanKeys(rows, err)
	if err != nil {
		return err
	}
	return s.unblock(ctx, keys)
}

// fetchableWork returns, in partition order, what each partition of
// scope can give: up to maxCount deliveries claimable again, and the
// events past the cursor claimable now, as the group's ordering allows.
func (s *session) fetchableWork(ctx context.Context, stream string, g groupRow, scope []int, maxCount int) ([]partitionWork, error) {
	var all []partitionWork
	var highs []int64
	// A cursor is read as at least the low watermark, as on PostgreSQL:
	// pruned events are terminal for every group.
	rows, err := s.query(ctx, `
		SELECT c."partition", max(c.next_sequence, p.low_watermark), p.high_watermark
		  FROM rheo_cursors AS c
		  JOIN rheo_partitions AS p ON p.stream = ?1 AND p."partition" = c."partition"
		 WHERE c.group_id = ?2 AND c."partition" IN (SELECT value FROM json_each(?3))
		 ORDER BY c."partition"`, stream, g.id, intsJSON(scope))
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var w partitionWork
		var high int64
		err := rows.Scan(&w.partition, &w.next, &high)
		w.fresh = max(0, min(int64(maxCount), high-w.next+1))
		all = append(all, w)
		highs = append(highs, high)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range all {
		w := &all[i]
		switch g.ordering {
		case rheo.OrderingPartition:
			err = s.partitionTurn(ctx, g, w)
		case rheo.OrderingKey:
			if w.due, err = s.dueInKeyOrder(ctx, g, w.partition, maxCount); err != nil {
				return nil, err
			}
			// The fresh count stays an upper bound until the walk from
			// the cursor finds which events may be leased (fill).
			w.walk = &walk{end: w.next, high: highs[i], held: map[string]bool{},
				stop: min(highs[i], w.next+int64(max(walkMin, walkFactor*maxCount))-1)}
		default:
			w.due, err = s.dueRows(ctx, g, w.partition, maxCount)
		}
		if err != nil {
			return nil, err
		}
	}
	return all, nil
}

// dueRows reads the deliveries of a partition that are due again
// (pending past its delay, or an expired lease), the first maxCount by
// sequence, through the due index, which leaves the blocked ones out.
func (s *session) dueRows(ctx context.Context, g groupRow, partition, maxCount int) ([]claim, error) {
	var due []claim
	// The due index yields only what is due; the first maxCount by
	// sequence are kept as it is read.
	rows, err := s.query(ctx, `
		SELECT d.sequence, d.attempt FROM rheo_deliveries AS d INDEXED BY rheo_deliveries_due
		 WHERE d.group_id = ?1 AND d."partition" = ?2 AND d.expires_at <= ?3 AND d.state <> 'blocked'
		 ORDER BY d.sequence
		 LIMIT ?4`, g.id, partition, s.now, maxCount)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		c := claim{partition: partition}
		err := rows.Scan(&c.sequence, &c.attempt)
		c.attempt++ // the lease about to be made
		due = append(due, c)
		return err
	})
	return due, err
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
	var c claim
	var expiresAt int64
	err := s.queryRow(ctx, `
		SELECT d.sequence, d.attempt, d.expires_at FROM rheo_deliveries AS d
		 WHERE d.group_id = ?1 AND d."partition" = ?2
		 ORDER BY d.sequence
		 LIMIT 1`, g.id, w.partition).Scan(&c.sequence, &c.attempt, &expiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		w.fresh = min(w.fresh, 1)
		return nil
	}
	if err != nil {
		return err
	}
	w.fresh = 0
	if expiresAt <= s.now {
		c.partition, c.attempt = w.partition, c.attempt+1
		w.due = []claim{c}
	}
	return nil
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
			var inProgress bool
			if err := rows.Scan(&c.sequence, &key, &inProgress); err != nil {
				return err
			}
			wk.end = c.sequence + 1
			switch {
			case !key.Valid:
				wk.candidates = append(wk.candidates, c)
			case inProgress || wk.held[key.String]:
				wk.blocked = append(wk.blocked, c)
			default:
				wk.held[key.String] = true
				wk.candidates = append(wk.candidates, c)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
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

// share sets each partition's quota: round-robin, one lease per
// partition per round, from work[start], until maxCount or no work is
// left. When k partitions have work and maxCount >= k, each gets one.
func share(work []*partitionWork, maxCount, start int) {
	left := maxCount
	for left > 0 {
		progress := false
		for i := range work {
			w := work[(start+i)%len(work)]
			if left > 0 && int64(w.quota) < int64(len(w.due))+w.fresh {
				w.quota++
				left--
				progress = true
			}
		}
		if !progress {
			return
		}
	}
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

// claimsJSON renders claims as [[partition, sequence, lease_id], ...].
func claimsJSON(claims []claim) string {
	b := make([]byte, 0, 64*len(claims))
	b = append(b, '[')
	for i, c := range claims {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(c.partition), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, c.sequence, 10)
		b = append(b, ',', '"')
		b = append(b, c.leaseID...) // a UUID needs no escaping
		b = append(b, '"', ']')
	}
	return string(append(b, ']'))
}

// appendPair appends "[a,b]" to a comma-separated list.
func appendPair(b []byte, x, y int64) []byte {
	if len(b) > 0 {
		b = append(b, ',')
	}
	b = append(b, '[')
	b = strconv.AppendInt(b, x, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, y, 10)
	return append(b, ']')
}

func staleLease(id string) error {
	return rheo.Errorf(rheo.ErrStaleLease, "lease %s is no longer held", id)
}

// renew extends a held lease to clock + leaseMS.
func (s *session) renew(ctx context.Context, id string, leaseMS int64) (time.Time, error) {
	if leaseMS < 1 {
		return time.Time{}, rheo.Errorf(rheo.ErrInvalidArgument, "lease_ms must be >= 1, got %d", leaseMS)
	}
	var expires int64
	err := s.queryRow(ctx, `
		UPDATE rheo_deliveries SET expires_at = ?1
		 WHERE lease_id = ?2 AND state = 'leased'
		RETURNING expires_at`, s.now+leaseMS*1000, id).Scan(&expires)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, staleLease(id)
	}
	return fromMicros(expires), err
}

// ack settles a held lease as done. The delivery row is deleted: the
// frontier is derived from what remains, so an ack writes nothing else,
// but for the next delivery of its key, unblocked if it was blocked.
func (s *session) ack(ctx context.Context, id string) error {
	rows, err := s.query(ctx, `
		DELETE FROM rheo_deliveries WHERE lease_id = ? AND state = 'leased'
		RETURNING group_id, "partition", key`, id)
	n := 0
	var keys []groupKey
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		n++
		var k groupKey
		var key sql.NullString
		err := rows.Scan(&k.groupID, &k.partition, &key)
		if key.Valid {
			k.key = key.String
			keys = append(keys, k)
		}
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return staleLease(id)
	}
	return s.unblock(ctx, keys)
}

// ackBatch acks the held leases among ids and returns the set of those it
// settled.
func (s *session) ackBatch(ctx context.Context, ids []string) (map[string]bool, error) {
	settled := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return settled, nil
	}
	var keys []groupKey
	rows, err := s.query(ctx, `
		DELETE FROM rheo_deliveries
		 WHERE lease_id IN (SELECT value FROM json_each(?)) AND state = 'leased'
		RETURNING lease_id, group_id, "partition", key`, stringsJSON(ids))
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var id string
		var k groupKey
		var key sql.NullString
		err := rows.Scan(&id, &k.groupID, &k.partition, &key)
		settled[id] = true
		if key.Valid {
			k.key = key.String
			keys = append(keys, k)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return settled, s.unblock(ctx, keys)
}

// heldDelivery is the delivery a held lease names.
type heldDelivery struct {
	groupID     int64
	partition   int
	sequence    int64
	attempt     int
	maxAttempts int
	key         sql.NullString
}

func (s *session) held(ctx context.Context, id string) (heldDelivery, error) {
	var h heldDelivery
	err := s.queryRow(ctx, `
		SELECT d.group_id, d."partition", d.sequence, d.attempt, g.max_attempts, d.key
		  FROM rheo_deliveries AS d
		  JOIN rheo_groups AS g ON g.group_id = d.group_id
		 WHERE d.lease_id = ? AND d.state = 'leased'`, id).
		Scan(&h.groupID, &h.partition, &h.sequence, &h.attempt, &h.maxAttempts, &h.key)
	if errors.Is(err, sql.ErrNoRows) {
		return h, staleLease(id)
	}
	return h, err
}

// deadLetter moves a held delivery to the dead letters and unblocks the
// next delivery of its key.
func (s *session) deadLetter(ctx context.Context, h heldDelivery, reason string) error {
	if _, err := s.exec(ctx, `
		DELETE FROM rheo_deliveries WHERE group_id = ? AND "partition" = ? AND sequence = ?`,
		h.groupID, h.partition, h.sequence); err != nil {
		return err
	}
	if _, err := s.exec(ctx, `
		INSERT INTO rheo_dead_letters (group_id, "partition", sequence, attempt, reason, dead_lettered_at)
		VALUES (?, ?, ?, ?, ?, ?)`, h.groupID, h.partition, h.sequence, h.attempt, reason, s.now); err != nil {
		return err
	}
	if !h.key.Valid {
		return nil
	}
	return s.unblock(ctx, []groupKey{{groupID: h.groupID, partition: h.partition, key: h.key.String}})
}

// retry gives a held lease back: claimable again after delayMS, or
// dead-lettered at the attempt limit. An empty reason is NULL, stored as
// "max_attempts" on a dead letter.
func (s *session) retry(ctx context.Context, id, reason string, delayMS int64) (rheo.RetryOutcome, error) {
	if delayMS < 0 {
		return "", rheo.Errorf(rheo.ErrInvalidArgument, "delay_ms must be >= 0, got %d", delayMS)
	}
	h, err := s.held(ctx, id)
	if err != nil {
		return "", err
	}
	if h.attempt >= h.maxAttempts {
		if err := s.deadLetter(ctx, h, cmp.Or(reason, "max_attempts")); err != nil {
			return "", err
		}
		return rheo.DeadLettered, nil
	}
	_, err = s.exec(ctx, `
		UPDATE rheo_deliveries
		   SET state = 'pending', lease_id = NULL, consumer_id = NULL, reason = ?, expires_at = ?
		 WHERE group_id = ? AND "partition" = ? AND sequence = ?`,
		sql.NullString{String: reason, Valid: reason != ""}, s.now+delayMS*1000,
		h.groupID, h.partition, h.sequence)
	if err != nil {
		return "", err
	}
	return rheo.Retrying, nil
}

// reject dead-letters the event of a held lease now.
func (s *session) reject(ctx context.Context, id, reason string) error {
	h, err := s.held(ctx, id)
	if err != nil {
		return err
	}
	return s.deadLetter(ctx, h, cmp.Or(reason, "rejected"))
}
