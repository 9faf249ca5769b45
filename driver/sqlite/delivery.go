package sqlite

import (
	"cmp"
	"context"
	"database/sql"
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
	fresh     int64   // events past the cursor, capped at max_count
	due       []claim // deliveries claimable again, in sequence order
	quota     int     // how many leases this fetch takes here
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
// cursor. Every step reads an index range, so the cost is O(leases
// returned + deliveries claimable again), never O(history). The
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
	// a fetch of zero leases does that too, like rheo.fetch.
	if err := s.deadLetterExpired(ctx, g, intsJSON(scope)); err != nil {
		return nil, err
	}
	if a.maxCount == 0 {
		return []rheo.Lease{}, nil
	}
	work, err := s.fetchableWork(ctx, stream, g, scope, a.maxCount)
	if err != nil || len(work) == 0 {
		return []rheo.Lease{}, err
	}
	share(work, a.maxCount, int(s.d.rotation.Add(1)%uint64(len(work))))

	// Within a partition the deliveries to claim again all precede the
	// cursor: they come first, then the events past it.
	var again, fresh []claim
	for _, w := range work {
		n := min(w.quota, len(w.due))
		again = append(again, w.due[:n]...)
		for seq := w.next; seq < w.next+int64(w.quota-n); seq++ {
			fresh = append(fresh, claim{partition: w.partition, sequence: seq, attempt: 1})
		}
	}
	l := leasing{consumer: a.consumerID, leasedAt: s.now, expiresAt: s.now + a.leaseMS*1000}
	if l.consumer == "" {
		l.consumer = "consumer-" + newLeaseID()
	}
	if err := s.leaseAgain(ctx, g, l, again); err != nil {
		return nil, err
	}
	if err := s.leaseFresh(ctx, g, l, fresh); err != nil {
		return nil, err
	}
	return s.leases(ctx, stream, group, l, append(again, fresh...))
}

// leasing is what the leases of one fetch share.
type leasing struct {
	consumer  string
	leasedAt  int64
	expiresAt int64
}

// leaseAgain leases again the deliveries of claims, each under a new
// lease id, at the next attempt.
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

// leaseFresh leases the events of claims, past their partitions'
// cursors, at attempt 1, and moves the cursors past them.
func (s *session) leaseFresh(ctx context.Context, g groupRow, l leasing, claims []claim) error {
	if len(claims) == 0 {
		return nil
	}
	var cursors []byte // [partition, next_sequence], ...
	for i, c := range claims {
		claims[i].leaseID = newLeaseID()
		// Claims are in (partition, sequence) order and contiguous, so a
		// partition's last one sets its cursor.
		if i == len(claims)-1 || claims[i+1].partition != c.partition {
			cursors = appendPair(cursors, int64(c.partition), c.sequence+1)
		}
	}
	if _, err := s.exec(ctx, `
		INSERT INTO rheo_deliveries
		       (group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at)
		SELECT ?1, j.value ->> 0, j.value ->> 1, 'leased', j.value ->> 2, ?2, 1, ?3, ?4
		  FROM json_each(?5) AS j`,
		g.id, l.consumer, l.leasedAt, l.expiresAt, claimsJSON(claims)); err != nil {
		return err
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
// leases that expired at the group's attempt limit.
func (s *session) deadLetterExpired(ctx context.Context, g groupRow, scopeJSON string) error {
	// INDEXED BY: the planner, without statistics, prefers the primary
	// key, which reads every delivery in progress instead of the expired
	// ones only.
	const expired = `rheo_deliveries AS d INDEXED BY rheo_deliveries_due
		WHERE d.group_id = ?1 AND d."partition" IN (SELECT value FROM json_each(?2))
		  AND d.expires_at <= ?3 AND d.state = 'leased' AND d.attempt >= ?4`
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
	_, err = s.exec(ctx, `DELETE FROM `+expired, g.id, scopeJSON, s.now, g.maxAttempts)
	return err
}

// fetchableWork returns, in partition order, the partitions of scope that
// have claimable work: up to maxCount deliveries claimable again each,
// and their count of events past the cursor.
func (s *session) fetchableWork(ctx context.Context, stream string, g groupRow, scope []int, maxCount int) ([]partitionWork, error) {
	var all []partitionWork
	rows, err := s.query(ctx, `
		SELECT c."partition", c.next_sequence, p.high_watermark
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
		return err
	})
	if err != nil {
		return nil, err
	}
	var work []partitionWork
	for _, w := range all {
		// The due index yields only what is due; the first maxCount by
		// sequence are kept as it is read.
		rows, err := s.query(ctx, `
			SELECT d.sequence, d.attempt FROM rheo_deliveries AS d INDEXED BY rheo_deliveries_due
			 WHERE d.group_id = ?1 AND d."partition" = ?2 AND d.expires_at <= ?3
			 ORDER BY d.sequence
			 LIMIT ?4`, g.id, w.partition, s.now, maxCount)
		err = scanAll(rows, err, func(rows *sql.Rows) error {
			c := claim{partition: w.partition}
			err := rows.Scan(&c.sequence, &c.attempt)
			c.attempt++ // the lease about to be made
			w.due = append(w.due, c)
			return err
		})
		if err != nil {
			return nil, err
		}
		if w.fresh > 0 || len(w.due) > 0 {
			work = append(work, w)
		}
	}
	return work, nil
}

// share sets each partition's quota: round-robin, one lease per
// partition per round, from work[start], until maxCount or no work is
// left. When k partitions have work and maxCount >= k, each gets one.
func share(work []partitionWork, maxCount, start int) {
	left := maxCount
	for left > 0 {
		progress := false
		for i := range work {
			w := &work[(start+i)%len(work)]
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
// frontier is derived from what remains, so an ack writes nothing else.
func (s *session) ack(ctx context.Context, id string) error {
	res, err := s.exec(ctx, `DELETE FROM rheo_deliveries WHERE lease_id = ? AND state = 'leased'`, id)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err == nil && n == 0 {
		return staleLease(id)
	}
	return err
}

// ackBatch acks the held leases among ids and returns the set of those it
// settled.
func (s *session) ackBatch(ctx context.Context, ids []string) (map[string]bool, error) {
	settled := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return settled, nil
	}
	rows, err := s.query(ctx, `
		DELETE FROM rheo_deliveries
		 WHERE lease_id IN (SELECT value FROM json_each(?)) AND state = 'leased'
		RETURNING lease_id`, stringsJSON(ids))
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var id string
		err := rows.Scan(&id)
		settled[id] = true
		return err
	})
	return settled, err
}

// heldDelivery is the delivery a held lease names.
type heldDelivery struct {
	groupID     int64
	partition   int
	sequence    int64
	attempt     int
	maxAttempts int
}

func (s *session) held(ctx context.Context, id string) (heldDelivery, error) {
	var h heldDelivery
	err := s.queryRow(ctx, `
		SELECT d.group_id, d."partition", d.sequence, d.attempt, g.max_attempts
		  FROM rheo_deliveries AS d
		  JOIN rheo_groups AS g ON g.group_id = d.group_id
		 WHERE d.lease_id = ? AND d.state = 'leased'`, id).
		Scan(&h.groupID, &h.partition, &h.sequence, &h.attempt, &h.maxAttempts)
	if errors.Is(err, sql.ErrNoRows) {
		return h, staleLease(id)
	}
	return h, err
}

// deadLetter moves a held delivery to the dead letters.
func (s *session) deadLetter(ctx context.Context, h heldDelivery, reason string) error {
	if _, err := s.exec(ctx, `
		DELETE FROM rheo_deliveries WHERE group_id = ? AND "partition" = ? AND sequence = ?`,
		h.groupID, h.partition, h.sequence); err != nil {
		return err
	}
	_, err := s.exec(ctx, `
		INSERT INTO rheo_dead_letters (group_id, "partition", sequence, attempt, reason, dead_lettered_at)
		VALUES (?, ?, ?, ?, ?, ?)`, h.groupID, h.partition, h.sequence, h.attempt, reason, s.now)
	return err
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
