package postgres_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testdb"
)

// recordedLogs is a slog.Handler that keeps the messages of its records.
type recordedLogs struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordedLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordedLogs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *recordedLogs) WithGroup(string) slog.Handler            { return l }

func (l *recordedLogs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Message)
	return nil
}

func (l *recordedLogs) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func TestVacuum(t *testing.T) {
	t.Parallel()
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

	// settleOn appends n events and acks them all, in batches of 4,
	// through a driver on pool with opts. It returns the driver, still
	// open.
	settleOn := func(t *testing.T, pool *pgxpool.Pool, opts *postgres.Options, n int) *postgres.Driver {
		t.Helper()
		d := postgres.New(pool, opts)
		t.Cleanup(func() { _ = d.Close() })
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		require.NoError(t, d.CreateGroup(ctx, "s", "g", nil))
		items := make([]rheo.BatchItem, n)
		for i := range items {
			items[i] = rheo.BatchItem{Payload: json.RawMessage(`{}`)}
		}
		_, err := d.AppendBatch(ctx, "s", items, nil)
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
		return d
	}

	// settle does settleOn with the given VacuumEvery on a fresh database,
	// as the superuser that installed Rheo. It returns the pool and the
	// driver, still open.
	settle := func(t *testing.T, every, n int) (*pgxpool.Pool, *postgres.Driver) {
		t.Helper()
		pool, err := pgxpool.New(ctx, newDatabase(t))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pool, settleOn(t, pool, &postgres.Options{VacuumEvery: every}, n)
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

	t.Run("a role that may not vacuum says so once and leaves the table to autovacuum", func(t *testing.T) {
		app := testdb.NewRole(t, "")
		url := newDatabase(t)
		admin, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(admin.Close)
		_, err = admin.Exec(ctx, "GRANT rheo_admin TO "+app)
		require.NoError(t, err)
		pool, err := pgxpool.New(ctx, testdb.AsRole(t, url, app))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		var logs recordedLogs
		d := settleOn(t, pool, &postgres.Options{VacuumEvery: 4, Logger: slog.New(&logs)}, 24)
		require.Eventually(t, func() bool { return len(logs.messages()) > 0 }, 30*time.Second, 20*time.Millisecond)
		require.NoError(t, d.Close())
		require.Equal(t, []string{"rheo: this role may not VACUUM rheo.deliveries, which is left to autovacuum; " +
			"see the driver's VacuumEvery option"}, logs.messages())
		require.Zero(t, vacuums(t, admin))
	})

	t.Run("a negative VacuumEvery never vacuums", func(t *testing.T) {
		pool, d := settle(t, -1, 12)
		require.NoError(t, d.Close())
		require.Zero(t, vacuums(t, pool))
	})
}
