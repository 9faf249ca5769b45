package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

// TestConcurrentAckBatchDuringRenew settles a held lease with ack_batch
// while another transaction has just renewed it and not yet committed (a
// renew, or a 'key' fetch marking the delivery as having waiters, the
// other writes of a held delivery): the batch waits for that transaction
// and then settles the lease, as an ack does, instead of reporting it
// stale while it is still held.
func TestConcurrentAckBatchDuringRenew(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		for _, tc := range []struct {
			name     string
			ordering string
			writer   string // the write in progress on the delivery of $1
		}{
			{"renew", "none", `SELECT rheo.renew($1, lease_ms => 60000)`},
			// The fetch takes the wakeup that the previous one left when it
			// blocked the key's second event, and marks the lease's delivery.
			{"a 'key' fetch marking waiters", "key",
				`SELECT count(*) FROM rheo.fetch('s', 'g', max_count => 1, lease_ms => 60000) WHERE $1::text IS NOT NULL`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				concExec(ctx, t, pool, `SELECT rheo.drop_stream('s', confirm => true) FROM rheo.streams WHERE stream = 's'`)
				concExec(ctx, t, pool, `SELECT rheo.create_stream('s')`)
				concExec(ctx, t, pool, `SELECT rheo.create_group('s', 'g', ordering => $1)`, tc.ordering)
				concExec(ctx, t, pool, `SELECT rheo.append('s', '{}', key => 'k')`)
				var lease string
				require.NoError(t, pool.QueryRow(ctx, `SELECT lease_id::text FROM rheo.fetch('s', 'g', max_count => 1, lease_ms => 60000)`).Scan(&lease))
				// The second event of the key: a 'key' fetch blocks it behind
				// the lease and leaves a wakeup of the key.
				concExec(ctx, t, pool, `SELECT rheo.append('s', '{}', key => 'k')`)
				concExec(ctx, t, pool, `SELECT count(*) FROM rheo.fetch('s', 'g', max_count => 1)`)

				tx, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer tx.Rollback(context.WithoutCancel(ctx))
				_, err = tx.Exec(ctx, tc.writer, lease)
				require.NoError(t, err)
				require.True(t, concWroteDelivery(ctx, t, pool, tx, lease), "the setup did not write the lease's delivery in the open transaction")

				var oks []bool
				ack := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
					rows, _ := conn.Query(ctx, `SELECT ok FROM rheo.ack_batch(ARRAY[$1::uuid])`, lease)
					var err error
					oks, err = pgx.CollectRows(rows, pgx.RowTo[bool])
					return err
				})
				concWaitForLock(ctx, t, pool, ack.pid)
				require.NoError(t, tx.Commit(ctx))
				require.NoError(t, ack.wait(), "ack_batch")
				assert.Equal(t, []bool{true}, oks, "ack_batch of a lease held throughout reported %v, want [true]", oks)
				var left int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rheo.deliveries WHERE lease_id = $1`, lease).Scan(&left))
				assert.Equal(t, 0, left, "the lease's delivery is still there after ack_batch")
			})
		}
	})
}

// TestConcurrentForcedPruneDuringAckBatch prunes two partitions with
// force while an ack_batch settles a lease of each of two groups: g1's in
// partition 1 and g2's in partition 0. A prune that locked the deliveries
// of partition 0 (g2's lease) before the cursors of partition 1, which a
// third transaction holds here, then waited for that lease's row which
// the batch held (g1's lease first, in primary key order) while the batch
// waited for g2's: 40P01. The prune takes every cursor before any
// delivery, and the deliveries in primary key order, like the batch: one
// waits for the other and both finish.
func TestConcurrentForcedPruneDuringAckBatch(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 5, func(ctx context.Context, t *testing.T, pool *concDB) {

		concExec(ctx, t, pool, `SELECT rheo.create_stream('aged', 2)`)
		concExec(ctx, t, pool, `SELECT rheo.set_retention('aged', '1 hour')`)
		concExec(ctx, t, pool, `SELECT rheo.create_group('aged', 'g1')`)
		concExec(ctx, t, pool, `SELECT rheo.create_group('aged', 'g2')`)
		for p := 0; p < 2; p++ {
			concExec(ctx, t, pool, `SELECT rheo.append('aged', '{}', "partition" => $1, clock => '2030-01-01 00:00Z')`, p)
		}
		lease := func(group string, p int) string {
			var id string
			require.NoError(t, pool.QueryRow(ctx, `SELECT lease_id::text FROM rheo.fetch('aged', $1, partitions => ARRAY[$2::int],
				lease_ms => 3600000, clock => '2030-01-01 00:00Z')`, group, p).Scan(&id))
			return id
		}
		leases := []string{lease("g1", 1), lease("g2", 0)}

		// 1. A transaction holds g1's cursor of partition 1.
		holder, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer holder.Rollback(context.WithoutCancel(ctx))
		_, err = holder.Exec(ctx, `SELECT 1 FROM rheo.cursors c JOIN rheo.groups g USING (stream, group_id)
			WHERE g.stream = 'aged' AND g.group_name = 'g1' AND c."partition" = 1 FOR UPDATE OF c`)
		require.NoError(t, err)

		// 2. The forced prune waits for it.
		var pruned int64
		prune := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			return conn.QueryRow(ctx, `SELECT rheo.prune('aged', force => true, clock => '2030-01-01 02:00Z')`).Scan(&pruned)
		})
		concWaitForLock(ctx, t, pool, prune.pid)

		// 3. The batch runs meanwhile: it either finishes or waits for the
		// prune.
		var oks []bool
		ack := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			rows, _ := conn.Query(ctx, `SELECT ok FROM rheo.ack_batch($1::uuid[])`, leases)
			var err error
			oks, err = pgx.CollectRows(rows, pgx.RowTo[bool])
			return err
		})
		concFinishedOrWaiting(ctx, t, pool, ack)

		require.NoError(t, holder.Commit(ctx))
		assert.NoError(t, prune.wait(), "prune")
		assert.NoError(t, ack.wait(), "ack_batch")
		assert.Equal(t, int64(2), pruned, "the forced prune deleted %d events, want 2", pruned)
		assert.Equal(t, []bool{true, true}, oks, "ack_batch reported %v, want [true true]: it held both leases before the prune wanted them", oks)
	})
}

// TestConcurrentFetchHoldingCursorDuringForcedPrune puts a fetch into
// its wait (every partition with work held by others) while its
// transaction holds the cursor of a partition without work, as the
// fetch's own locking read leaves it when a fetch committing meanwhile
// took that partition's work, and a forced prune, which locks every
// partition's cursors in turn, waits for the partitions before it. A
// fetch that waited then would close a cycle with the prune (40P01, as
// TestChurn met): it reports nothing instead, and the prune goes on
// once the others commit.
func TestConcurrentFetchHoldingCursorDuringForcedPrune(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 6, func(ctx context.Context, t *testing.T, pool *concDB) {

		concExec(ctx, t, pool, `SELECT rheo.create_stream('held', 3)`)
		concExec(ctx, t, pool, `SELECT rheo.set_retention('held', '1 hour')`)
		concExec(ctx, t, pool, `SELECT rheo.create_group('held', 'g')`)
		for p := 0; p < 3; p++ {
			concExec(ctx, t, pool, `SELECT rheo.append('held', '{}', "partition" => $1, clock => '2030-01-01 00:00Z')`, p)
		}
		// Partition 2 has no work left.
		concExec(ctx, t, pool, `SELECT rheo.ack(lease_id) FROM rheo.fetch('held', 'g', partitions => ARRAY[2])`)

		// 1. A fetch's transaction holds the cursor of partition 1.
		claimer, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer claimer.Rollback(context.WithoutCancel(ctx))
		var claimed int
		require.NoError(t, claimer.QueryRow(ctx, `SELECT count(*) FROM rheo.fetch('held', 'g', partitions => ARRAY[1])`).Scan(&claimed))
		require.Equal(t, 1, claimed, "the claimer's fetch")

		// 2. Another transaction holds the cursor of partition 2.
		fetcher, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer fetcher.Rollback(context.WithoutCancel(ctx))
		_, err = fetcher.Exec(ctx, `SELECT 1 FROM rheo.cursors c JOIN rheo.groups g USING (stream, group_id)
			WHERE g.stream = 'held' AND c."partition" = 2 FOR NO KEY UPDATE OF c`)
		require.NoError(t, err)

		// 3. The forced prune holds partition 0's cursor and waits for 1's.
		var pruned int64
		prune := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			return conn.QueryRow(ctx, `SELECT rheo.prune('held', force => true, clock => '2030-01-01 02:00Z')`).Scan(&pruned)
		})
		concWaitForLock(ctx, t, pool, prune.pid)

		// 4. The fetch finds partitions 0 and 1 taken and 2 without work.
		fetched := make(chan error, 1)
		var got int
		go func() {
			fetched <- fetcher.QueryRow(ctx, `SELECT count(*) FROM rheo.fetch('held', 'g')`).Scan(&got)
		}()
		// Whether it reaches its wait before or after the claimer commits,
		// the prune then waits for partition 2's cursor.
		require.NoError(t, claimer.Commit(ctx))
		require.NoError(t, <-fetched, "the fetch holding a cursor")
		assert.Zero(t, got, "the fetch holding a cursor claimed %d leases, want none", got)
		require.NoError(t, fetcher.Commit(ctx))
		require.NoError(t, prune.wait(), "the forced prune")
		assert.Equal(t, int64(3), pruned, "the forced prune deleted %d events, want 3", pruned)
	})
}

// TestReadCommittedOnly calls each function that acts on what the
// transactions it waits for commit inside REPEATABLE READ and
// SERIALIZABLE transactions: each refuses with invalid_argument, whose
// detail says why, and changes nothing; at READ COMMITTED each runs.
// Before, a prune at REPEATABLE READ racing a replay(event_ids) deleted
// the event just reopened, and one racing a create_group left the new
// group's cursor below the low watermark.
func TestReadCommittedOnly(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 2, func(ctx context.Context, t *testing.T, pool *concDB) {
		concExec(ctx, t, pool, `SELECT rheo.create_stream('s')`)
		concExec(ctx, t, pool, `SELECT rheo.create_group('s', 'g')`)
		concExec(ctx, t, pool, `SELECT rheo.set_retention('s', '1 hour')`)
		concExec(ctx, t, pool, `SELECT rheo.append('s', '{}', id => 'e1', clock => '2030-01-01 00:00Z')`)

		calls := []struct{ name, sql string }{
			{"prune", `SELECT rheo.prune('s', clock => '2030-01-01 02:00Z')`},
			{"prune", `SELECT rheo.prune('s', force => true, clock => '2030-01-01 02:00Z')`},
			{"replay", `SELECT rheo.replay('s', 'g', event_ids => '{e1}')`},
			{"replay", `SELECT rheo.replay('s', 'g', from_sequence => 0)`},
			{"reset_group", `SELECT rheo.reset_group('s', 'g', confirm => true)`},
			{"create_group", `SELECT rheo.create_group('s', 'other')`},
			{"set_ordering", `SELECT rheo.set_ordering('s', 'g', 'key')`},
			{"drop_group", `SELECT rheo.drop_group('s', 'g', confirm => true)`},
			{"drop_stream", `SELECT rheo.drop_stream('s', confirm => true)`},
		}
		for _, level := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
			for _, c := range calls {
				t.Run(fmt.Sprintf("%s at %s", c.sql, level), func(t *testing.T) {
					tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
					require.NoError(t, err)
					defer tx.Rollback(context.WithoutCancel(ctx))
					_, err = tx.Exec(ctx, c.sql)
					var pgErr *pgconn.PgError
					want := fmt.Sprintf("%s must run at READ COMMITTED, not %s", c.name, strings.ToUpper(string(level)))
					require.True(t, errors.As(err, &pgErr) && pgErr.Code == rheo.ErrInvalidArgument.Code && strings.HasPrefix(pgErr.Detail, want), "got %v, want invalid_argument with a detail starting %q", err, want)
				})
			}
		}
		for _, c := range calls {
			concExec(ctx, t, pool, c.sql)
		}
	})
}

// TestFetchCursorBelowLowWatermark fetches a group whose cursor lies
// below the low watermark, which only a race of a prune with a
// create_group, a replay or a reset at REPEATABLE READ could leave (they
// now refuse it): the fetch reads from the low watermark, the events
// pruned being terminal, and a second fetch goes on from the first
// instead of failing with 23505 on deliveries_pkey.
func TestFetchCursorBelowLowWatermark(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 2, func(ctx context.Context, t *testing.T, pool *concDB) {
		concExec(ctx, t, pool, `SELECT rheo.create_stream('s')`)
		concExec(ctx, t, pool, `SELECT rheo.set_retention('s', '1 hour')`)
		concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch('s',
			(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 10) n), clock => '2030-01-01 00:00Z')`)
		concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch('s',
			(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(11, 20) n), clock => '2030-01-01 02:00Z')`)
		n := concCount(ctx, t, pool, `SELECT rheo.prune('s', clock => '2030-01-01 02:00Z')`)
		require.Equal(t, int64(10), n, "pruned %d, want 10", n)
		concExec(ctx, t, pool, `SELECT rheo.create_group('s', 'g')`)
		concExec(ctx, t, pool, `UPDATE rheo.cursors SET next_sequence = 4`)

		var got []int64
		for range 2 {
			rows, _ := pool.Query(ctx, `SELECT sequence FROM rheo.fetch('s', 'g', max_count => 5)`)
			seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			require.NoError(t, err, "fetch after %v", got)
			got = append(got, seqs...)
		}
		assert.Equal(t, []int64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, got, "two fetches from a cursor below the low watermark returned %v, want 11 to 20", got)
	})
}

// concCount runs a query of one bigint and returns it.
func concCount(ctx context.Context, t *testing.T, pool *concDB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&n), "%s", sql)
	return n
}

// concWroteDelivery reports whether the open transaction tx has written
// the delivery of lease, in stream s. On Citus, where the transaction's
// writes ran on the stream's node as Rheo's owner, in a transaction of
// that node's own, a read of those rows in tx by another role is refused
// (placements modified in the transaction by a different user), and tx
// has no transaction id of its own there: it reads the row's xmin, and
// the transaction id that its backend serving it there writes under,
// as Rheo's owner.
func concWroteDelivery(ctx context.Context, t *testing.T, pool *concDB, tx pgx.Tx, lease string) bool {
	t.Helper()
	var wrote bool
	if !pool.onCitus() {
		require.NoError(t, tx.QueryRow(ctx, `SELECT xmin::text = txid_current()::text FROM rheo.deliveries WHERE lease_id = $1`, lease).Scan(&wrote))
		return wrote
	}
	_, err := tx.Exec(ctx, `SET LOCAL ROLE rheo_owner`)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT xmin::text = (SELECT backend_xid::text FROM citus_stat_activity
		WHERE global_pid = citus_backend_gpid() AND backend_xid IS NOT NULL AND nodeid <> $2)
		FROM rheo.deliveries WHERE stream = 's' AND lease_id = $1`, lease, pool.coordinator).Scan(&wrote))
	_, err = tx.Exec(ctx, `RESET ROLE`)
	require.NoError(t, err)
	return wrote
}
