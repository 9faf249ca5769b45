package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// Fetch claims up to MaxCount events for one consumer. opts may be nil.
func (o *ops) Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
	opts = driverutil.WithDefaults(opts)
	maxCount := opts.MaxCount
	leaseMS, err := driverutil.Millis("lease duration", opts.LeaseDuration)
	if err != nil {
		return nil, err
	}
	clock, err := o.clockArg()
	if err != nil {
		return nil, err
	}
	args := []any{stream, group, clampInt32(maxCount), textArg(opts.ConsumerID), leaseMS,
		partitionArray(opts.Partitions), clock}
	var leases []rheo.Lease
	err = o.run(ctx, "fetch", true, func(q querier) error {
		if o.inTx() {
			rows, err := q.Query(ctx, fetchSQL, args...)
			if err != nil {
				return err
			}
			leases, err = pgx.CollectRows(rows, scanLease)
			return err
		}
		// A fetch of its own commits asynchronously: see asyncCommitSQL.
		// Both statements go in one round trip and, sent before one Sync,
		// run in one implicit transaction.
		batch := &pgx.Batch{}
		batch.Queue(asyncCommitSQL)
		batch.Queue(fetchSQL, args...)
		results := q.SendBatch(ctx, batch)
		if _, err := results.Exec(); err != nil {
			_ = results.Close()
			return err
		}
		rows, err := results.Query()
		if err == nil {
			leases, err = pgx.CollectRows(rows, scanLease)
		}
		if cerr := results.Close(); err == nil {
			err = cerr
		}
		return err
	})
	return leases, err
}

const fetchSQL = `SELECT l.lease_id::text, l.receipt, l.stream, l.group_name, l.consumer_id,
	l.attempt, l.leased_at, l.expires_at, l.event_id, l."partition", l.sequence, l.key, l.type,
	l.payload, l.metadata, l.ts
	FROM rheo.fetch(stream => $1, group_name => $2, max_count => $3, consumer_id => $4,
		lease_ms => $5, partitions => $6, clock => $7) AS l`

// asyncCommitSQL makes the commit of the transaction it runs in return
// without waiting for its WAL to reach disk. Fetch uses it when it runs
// in a transaction of its own, never in a host's: a claim needs no
// durability of its own. Should the server crash before the claim is on
// disk, the claim is lost whole (cursor and leases together) and the
// events are simply claimable again, which at-least-once delivery allows;
// a settle of such a lost lease fails stale_lease. Every later durable
// commit, such as the ack of one of the leases, flushes the claim to disk
// first, because the WAL is written in order. This removes a disk flush
// from every fetch.
const asyncCommitSQL = `SELECT set_config('synchronous_commit', 'off', true)`
