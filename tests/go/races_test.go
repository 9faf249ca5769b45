package tests

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

// TestConcurrentAckBatchDuringRenew settles a held lease with ack_batch
// while another transaction has just renewed it and not yet committed (a
// renew, or a 'key' fetch marking the delivery as having waiters, the
// other writes of a held delivery): the batch waits for that transaction
// and then settles the lease, as an ack does, instead of reporting it
// stale while it is still held.
func TestConcurrentAckBatchDuringRenew(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), concTimeout)
	defer cancel()
	pool := concPool(t, 4)
	defer pool.Close()

	for _, tc := range []struct {
		name   string
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
			if err := pool.QueryRow(ctx, `SELECT lease_id::text FROM rheo.fetch('s', 'g', max_count => 1, lease_ms => 60000)`).Scan(&lease); err != nil {
				t.Fatal(err)
			}
			// The second event of the key: a 'key' fetch blocks it behind
			// the lease and leaves a wakeup of the key.
			concExec(ctx, t, pool, `SELECT rheo.append('s', '{}', key => 'k')`)
			concExec(ctx, t, pool, `SELECT count(*) FROM rheo.fetch('s', 'g', max_count => 1)`)

			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			if _, err := tx.Exec(ctx, tc.writer, lease); err != nil {
				t.Fatal(err)
			}
			var changed bool
			if err := tx.QueryRow(ctx, `SELECT xmin::text = txid_current()::text FROM rheo.deliveries WHERE lease_id = $1`, lease).Scan(&changed); err != nil {
				t.Fatal(err)
			}
			if !changed {
				t.Fatal("the setup did not write the lease's delivery in the open transaction")
			}

			var oks []bool
			ack := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
				rows, _ := conn.Query(ctx, `SELECT ok FROM rheo.ack_batch(ARRAY[$1::uuid])`, lease)
				var err error
				oks, err = pgx.CollectRows(rows, pgx.RowTo[bool])
				return err
			})
			concWaitForLock(ctx, t, pool, ack.pid)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := ack.wait(); err != nil {
				t.Fatalf("ack_batch: %v", err)
			}
			if !slices.Equal(oks, []bool{true}) {
				t.Errorf("ack_batch of a lease held throughout reported %v, want [true]", oks)
			}
			var left int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM rheo.deliveries WHERE lease_id = $1`, lease).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != 0 {
				t.Errorf("the lease's delivery is still there after ack_batch")
			}
		})
	}
}
