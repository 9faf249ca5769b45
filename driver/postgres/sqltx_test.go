package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/postgres"
)

// TestWithSQLTx runs the operations in database/sql transactions, through
// pgx's stdlib and through lib/pq: what they write commits with the
// host's own writes, their arguments and results cross database/sql
// intact, their errors are Rheo's, and a failed one leaves the
// transaction usable.
func TestWithSQLTx(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"pgx-stdlib", "lib-pq"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			d, pool := setup(t)
			var db *sql.DB
			if name == "pgx-stdlib" {
				db = stdlib.OpenDBFromPool(pool)
			} else {
				var err error
				db, err = sql.Open("postgres", pool.Config().ConnString())
				require.NoError(t, err)
			}
			t.Cleanup(func() { _ = db.Close() })
			_, err := db.ExecContext(ctx, `CREATE TABLE host_orders (id text PRIMARY KEY)`)
			require.NoError(t, err)
			require.NoError(t, d.CreateStream(ctx, "s", 2))
			require.NoError(t, d.CreateGroup(ctx, "s", "g", nil))

			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer tx.Rollback()
			rtx := d.WithSQLTx(tx)
			require.Same(t, tx, rtx.Native())

			_, err = tx.ExecContext(ctx, `INSERT INTO host_orders VALUES ('o-1')`)
			require.NoError(t, err)
			p := 1
			ev, err := rtx.Append(ctx, "s", json.RawMessage(`{"type": "order.placed", "n": "a\"b"}`),
				&rheo.AppendOptions{ID: "o-1", Key: "k", Partition: &p, Metadata: json.RawMessage(`{"m": 1}`)})
			require.NoError(t, err)
			require.Equal(t, 1, ev.Partition)
			require.Equal(t, "order.placed", ev.Type)
			require.JSONEq(t, `{"m": 1}`, string(ev.Metadata))

			_, err = rtx.Append(ctx, "missing", json.RawMessage(`{}`), nil)
			require.ErrorIs(t, err, rheo.ErrStreamNotFound)
			_, err = rtx.Append(ctx, "s", json.RawMessage(`{"other": true}`), &rheo.AppendOptions{ID: "o-1"})
			require.ErrorIs(t, err, rheo.ErrAlreadyExists)

			batch, err := rtx.AppendBatch(ctx, "s", []rheo.BatchItem{
				{Payload: json.RawMessage(`{"i": 1}`), ID: "b-1"}, {Payload: json.RawMessage(`{"i": 2}`), ID: "b-2"}}, nil)
			require.NoError(t, err)
			require.Len(t, batch, 2)

			leases, err := rtx.Fetch(ctx, "s", "g", &rheo.FetchOptions{MaxCount: 10, LeaseDuration: time.Minute, Partitions: []int{0, 1}})
			require.NoError(t, err)
			require.Len(t, leases, 3)
			require.NoError(t, rtx.Ack(ctx, leases[0].LeaseID))
			results, err := rtx.AckBatch(ctx, []string{leases[1].LeaseID, leases[0].LeaseID})
			require.NoError(t, err)
			require.Equal(t, []bool{true, false}, []bool{results[0].OK, results[1].OK})
			outcome, err := rtx.Retry(ctx, leases[2].LeaseID, &rheo.RetryOptions{Delay: time.Second, Reason: "later"})
			require.NoError(t, err)
			require.Equal(t, rheo.Retrying, outcome)
			require.ErrorIs(t, rtx.Ack(ctx, leases[0].LeaseID), rheo.ErrStaleLease)

			lag, err := rtx.Lag(ctx, "s", "g", []int{0, 1})
			require.NoError(t, err)
			require.Equal(t, int64(1), lag.Total)
			require.NoError(t, rtx.SetRetention(ctx, "s", 36*time.Hour))
			info, err := rtx.StreamInfo(ctx, "s")
			require.NoError(t, err)
			require.Equal(t, 36*time.Hour, info.MaxAge)
			n, err := rtx.Replay(ctx, "s", "g", &rheo.ReplayOptions{EventIDs: []string{ev.ID, `b-"1`}})
			require.NoError(t, err)
			require.GreaterOrEqual(t, n, int64(0))

			_, err = tx.ExecContext(ctx, `INSERT INTO host_orders VALUES ('o-2')`)
			require.NoError(t, err, "the transaction is usable after the failed calls")
			require.NoError(t, tx.Commit())

			var orders, events int
			require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM host_orders),
				(SELECT count(*) FROM rheo.events WHERE stream = 's')`).Scan(&orders, &events))
			require.Equal(t, 2, orders)
			require.Equal(t, 3, events)
		})
	}
}

// The outbox with database/sql (sqlx, GORM, Bun and ent hand out a
// *sql.Tx too): the order and its event commit together.
func ExampleDriver_WithSQLTx() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://localhost/shop") // or "postgres", with lib/pq
	if err != nil {
		panic(err)
	}
	defer db.Close()
	// The driver itself runs on a pgx pool: its workers and wakeups need
	// one.
	drv, err := postgres.Open(ctx, "postgres://localhost/shop", nil)
	if err != nil {
		panic(err)
	}
	defer drv.Close()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES ($1)`, "order-42"); err != nil {
		panic(err)
	}
	if _, err := drv.WithSQLTx(tx).Append(ctx, "orders", json.RawMessage(`{"type": "order.placed", "order_id": "order-42"}`),
		&rheo.AppendOptions{ID: "order-42"}); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
}
