package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

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
	delayMS, err := driverutil.Millis("retry delay", opts.Delay)
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
