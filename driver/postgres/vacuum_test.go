package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/postgres"
)

func TestVacuum(t *testing.T) {
	ctx := t.Context()

	// vacuums is how many manual VACUUMs rheo.deliveries has had.
	vacuums := func(t *testing.T, pool *pgxpool.Pool) int64 {
		t.Helper()
		var n int64
		require.NoError(t, pool.QueryRow(context.WithoutCancel(ctx),
			`SELECT vacuum_count FROM pg_stat_user_tables WHERE schemaname = 'rheo' AND relname = 'deliveries'`).
			Scan(&n))
		return n
	}

	// settle appends n events and acks them all, in batches of 4, through
	// a driver with the given VacuumEvery. It returns the pool and the
	// driver, still open.
	settle := func(t *testing.T, every, n int) (*pgxpool.Pool, *postgres.Driver) {
		t.Helper()
		pool, err := pgxpool.New(ctx, newDatabase(t))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		d := postgres.New(pool, &postgres.Options{VacuumEvery: every})
		t.Cleanup(func() { _ = d.Close() })
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		require.NoError(t, d.CreateGroup(ctx, "s", "g", nil))
		items := make([]rheo.BatchItem, n)
		for i := range items {
			items[i] = rheo.BatchItem{Payload: json.RawMessage(`{}`)}
		}
		_, err = d.AppendBatch(ctx, "s", items, nil)
		require.NoError(t, err)
		for acked := 0; acked < n; {
			leases, err := d.Fetch(ctx, "s", "g", &rheo.FetchOptions{MaxCount: 4, LeaseDuration: time.Minute})
			require.NoError(t, err)
			require.NotEmpty(t, leases)
			ids := make([]string, len(leases))
			for i, l := range leases {
				ids[i] = l.LeaseID
			}
			_, err = d.AckBatch(ctx, ids)
			require.NoError(t, err)
			acked += len(leases)
		}
		return pool, d
	}

	t.Run("settles past VacuumEvery vacuum rheo.deliveries in the background", func(t *testing.T) {
		pool, _ := settle(t, 6, 12)
		// The VACUUM runs in the background: wait for the statistics to
		// show it.
		require.Eventually(t, func() bool { return vacuums(t, pool) >= 1 }, 30*time.Second, 20*time.Millisecond)
	})

	t.Run("fewer settles than VacuumEvery leave the table to autovacuum", func(t *testing.T) {
		pool, d := settle(t, 100, 12)
		require.NoError(t, d.Close())
		require.Zero(t, vacuums(t, pool))
	})

	t.Run("a negative VacuumEvery never vacuums", func(t *testing.T) {
		pool, d := settle(t, -1, 12)
		require.NoError(t, d.Close())
		require.Zero(t, vacuums(t, pool))
	})
}
