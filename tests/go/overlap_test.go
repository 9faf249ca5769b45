package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentFetchersOverlap checks that competing fetches of one
// group claim side by side: a fetch locks only the partitions its
// max_count needs, so that a second fetch, while the first's transaction
// still holds its locks, claims from other partitions at once instead of
// waiting for it.
func TestConcurrentFetchersOverlap(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		const stream = "overlap"
		concExec(ctx, t, pool, `SELECT rheo.create_stream($1, 8)`, stream)
		concExec(ctx, t, pool, `SELECT count(rheo.append($1, jsonb_build_object('n', n), "partition" => p))
			FROM generate_series(0, 7) p CROSS JOIN generate_series(1, 4) n`, stream)
		concExec(ctx, t, pool, `SELECT rheo.create_group($1, 'g')`, stream)
		const fetch = `SELECT lease_id::text, "partition", sequence, attempt FROM rheo.fetch($1, 'g', max_count => $2)`

		// The first fetch, in a transaction that keeps its locks.
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.WithoutCancel(ctx))
		rows, _ := tx.Query(ctx, fetch, stream, 2)
		first, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
		require.NoError(t, err)
		require.Len(t, first, 2, "the first fetch: %v", first)

		// The second, on another connection, while the first holds its locks.
		var second []concLease
		b := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			rows, _ := conn.Query(ctx, fetch, stream, 2)
			var err error
			second, err = pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
			return err
		})
		concFinishedOrWaiting(ctx, t, pool, b)
		if !b.finished() {
			require.NoError(t, tx.Rollback(ctx))
			require.NoError(t, b.wait())
			require.Fail(t, "the second fetch waited for the first, which holds two partitions of eight with work")
		}
		require.NoError(t, b.wait(), "the second fetch")
		require.Len(t, second, 2, "the second fetch: %v", second)
		held := map[int]bool{}
		for _, l := range first {
			held[l.Partition] = true
		}
		for _, l := range second {
			assert.False(t, held[l.Partition], "the second fetch claimed %v from a partition the first holds (first: %v)",
				l.event(), first)
		}
		require.NoError(t, tx.Commit(ctx))
	})
}

// TestConcurrentFetchAfterWait checks that a fetch that waited for a
// partition, every partition with work being held by another fetch,
// claims from all of them once that one commits when the partition it
// waited for cannot fill its max_count, and from that one only when it
// can.
func TestConcurrentFetchAfterWait(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		const stream = "after-wait"
		concExec(ctx, t, pool, `SELECT rheo.create_stream($1, 4)`, stream)
		concExec(ctx, t, pool, `SELECT count(rheo.append($1, jsonb_build_object('n', n), "partition" => p))
			FROM generate_series(0, 3) p CROSS JOIN generate_series(1, 4) n`, stream)
		concExec(ctx, t, pool, `SELECT rheo.create_group($1, 'g')`, stream)
		const fetch = `SELECT lease_id::text, "partition", sequence, attempt FROM rheo.fetch($1, 'g', max_count => $2)`

		// The first fetch holds every partition: one lease from each.
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.WithoutCancel(ctx))
		rows, _ := tx.Query(ctx, fetch, stream, 4)
		first, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
		require.NoError(t, err)
		require.Equal(t, "[(0,1) (1,1) (2,1) (3,1)]", fmt.Sprint(concEvents(first)), "the first fetch")

		var second []concLease
		b := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			rows, _ := conn.Query(ctx, fetch, stream, 8)
			var err error
			second, err = pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
			return err
		})
		concFinishedOrWaiting(ctx, t, pool, b)
		require.False(t, b.finished(), "the second fetch returned %v (error %v) while the first held every partition with work, want it to wait",
			concEvents(second), b.err)
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, b.wait(), "the fetch that waited")
		// Eight of the twelve left, dealt round-robin: two from each.
		perPartition := map[int]int{}
		for _, l := range second {
			perPartition[l.Partition]++
			assert.Equal(t, 1, l.Attempt, "%v", l.event())
		}
		assert.Equal(t, map[int]int{0: 2, 1: 2, 2: 2, 3: 2}, perPartition,
			"the fetch that waited got %v, want two leases from each of the four partitions", concEvents(second))

		// Again, with a max_count the partition waited for can fill alone:
		// the waiter claims from it only, and leaves the others to
		// competing fetchers.
		concExec(ctx, t, pool, `SELECT count(rheo.append($1, jsonb_build_object('n', n), "partition" => p))
			FROM generate_series(0, 3) p CROSS JOIN generate_series(1, 4) n`, stream)
		tx, err = pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.WithoutCancel(ctx))
		rows, _ = tx.Query(ctx, fetch, stream, 4)
		first, err = pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
		require.NoError(t, err)
		require.Len(t, first, 4, "the first fetch of the second round: %v", first)
		var third []concLease
		b = concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			rows, _ := conn.Query(ctx, fetch, stream, 2)
			var err error
			third, err = pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
			return err
		})
		concFinishedOrWaiting(ctx, t, pool, b)
		require.False(t, b.finished(), "the third fetch returned %v (error %v) while the first held every partition with work, want it to wait",
			concEvents(third), b.err)
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, b.wait(), "the third fetch")
		require.Len(t, third, 2, "the third fetch: %v", concEvents(third))
		assert.Equal(t, third[0].Partition, third[1].Partition,
			"the third fetch got %v, want both from the partition it waited for, which has four events left", concEvents(third))
	})
}

// concEvents lists the events of leases.
func concEvents(leases []concLease) []concEvent {
	events := make([]concEvent, 0, len(leases))
	for _, l := range leases {
		events = append(events, l.event())
	}
	return events
}
