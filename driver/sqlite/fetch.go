package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"strconv"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
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

// freshCount is how many events past a partition's cursor (next) a fetch
// of at most maxCount leases may take: those up to the high watermark,
// capped at maxCount (rheo._fresh).
func freshCount(next, high int64, maxCount int) int64 {
	return max(0, min(int64(maxCount), high-next+1))
}

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
	if err := driverutil.CheckLength("consumer_id", a.consumerID); err != nil {
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
		w.fresh = freshCount(w.next, high, maxCount)
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

// share sets each partition's quota: round-robin, one lease per
// partition per round, from work[start], until maxCount or no work is
// left. When k partitions have work and maxCount >= k, each gets one.
func share(work []*partitionWork, maxCount, start int) {
	quotas := make([]int, len(work))
	avail := make([]int64, len(work))
	for i, w := range work {
		quotas[i], avail[i] = w.quota, int64(len(w.due))+w.fresh
	}
	for i, q := range quota(quotas, avail, maxCount, start) {
		work[i].quota = q
	}
}

// quota deals up to left more leases on top of quotas, among partitions
// that can give avail each: round-robin, one lease per partition per
// round from index start, to those that can give more than their quota,
// until left are dealt or none can. It returns the new quotas and leaves
// quotas as it was. rheo._quota deals the same from zero quotas, in
// closed form; both follow the table of tests/sql/_quota_test.sql.
func quota(quotas []int, avail []int64, left, start int) []int {
	dealt := slices.Clone(quotas)
	for left > 0 {
		progress := false
		for i := range dealt {
			j := (start + i) % len(dealt)
			if left > 0 && int64(dealt[j]) < avail[j] {
				dealt[j]++
				left--
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	return dealt
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

// Fetch claims up to MaxCount events for one consumer. opts may be nil.
func (o ops) Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
	opts = driverutil.WithDefaults(opts)
	maxCount := opts.MaxCount
	leaseMS, err := driverutil.Millis("lease duration", opts.LeaseDuration)
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
