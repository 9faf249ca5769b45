package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

func staleLease(id string) error {
	return rheo.Errorf(rheo.ErrStaleLease, "lease %s is no longer held", id)
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
	d := retryOf(h.attempt, h.maxAttempts, reason, s.now, delayMS)
	if d.outcome == rheo.DeadLettered {
		if err := s.deadLetter(ctx, h, d.reason.String); err != nil {
			return "", err
		}
		return d.outcome, nil
	}
	_, err = s.exec(ctx, `
		UPDATE rheo_deliveries
		   SET state = 'pending', lease_id = NULL, consumer_id = NULL, reason = ?, expires_at = ?
		 WHERE group_id = ? AND "partition" = ? AND sequence = ?`,
		d.reason, d.dueAt, h.groupID, h.partition, h.sequence)
	if err != nil {
		return "", err
	}
	return d.outcome, nil
}

// retryDecision is what a retry does with a held delivery.
type retryDecision struct {
	outcome rheo.RetryOutcome
	// reason is what is stored: on the dead letter (never NULL), or on
	// the delivery retried (NULL for an empty one).
	reason sql.NullString
	// dueAt is when a retried delivery is claimable again, in
	// microseconds; 0 for a dead letter.
	dueAt int64
}

// retryOf decides a retry of a delivery at attempt of maxAttempts, at
// now (microseconds) with a delay of delayMS: at the attempt limit it is
// dead-lettered with the reason, "max_attempts" for an empty one;
// otherwise it is retrying, due at now plus the delay (rheo.retry).
func retryOf(attempt, maxAttempts int, reason string, now, delayMS int64) retryDecision {
	if attempt >= maxAttempts {
		return retryDecision{outcome: rheo.DeadLettered,
			reason: sql.NullString{String: cmp.Or(reason, "max_attempts"), Valid: true}}
	}
	return retryDecision{outcome: rheo.Retrying, reason: sql.NullString{String: reason, Valid: reason != ""},
		dueAt: now + delayMS*1000}
}

// reject dead-letters the event of a held lease now.
func (s *session) reject(ctx context.Context, id, reason string) error {
	h, err := s.held(ctx, id)
	if err != nil {
		return err
	}
	return s.deadLetter(ctx, h, cmp.Or(reason, "rejected"))
}

// Ack settles a held lease as done. A lease id that is not a UUID was
// never issued: stale_lease.
func (o ops) Ack(ctx context.Context, leaseID string) error {
	id, err := driverutil.ParseLeaseID(leaseID)
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
		ids[i], _ = driverutil.ParseLeaseID(s)
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
	id, err := driverutil.ParseLeaseID(leaseID)
	if err != nil {
		return "", err
	}
	delayMS, err := driverutil.Millis("retry delay", opts.Delay)
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
	id, err := driverutil.ParseLeaseID(leaseID)
	if err != nil {
		return err
	}
	return o.runClocked(ctx, "reject", []string{reason}, func(s *session) error { return s.reject(ctx, id, reason) })
}
