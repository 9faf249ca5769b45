package migrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/migrate"
)

// TestPostgresReleasesItsLock makes migrate.Postgres fail on a pooled
// connection, before its transactions and inside one, and checks that
// the connection goes back to the pool without the migration lock (also
// a hold that an earlier run left on it), so that the next run does not
// wait for it.
func TestPostgresReleasesItsLock(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		setup string // makes the run fail
		want  string
	}{
		{"a database newer than this build", "", "newer than this build"},
		{"a step that fails in its transaction", `CREATE SCHEMA rheo; CREATE VIEW rheo.key_wakeups AS SELECT 1 AS x`, "005_ordering.sql"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := testdb.NewDatabase(t)
			cfg, err := pgxpool.ParseConfig(url)
			require.NoError(t, err)
			cfg.MaxConns = 1
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			if tt.setup == "" {
				require.NoError(t, migrate.Postgres(ctx, conn.Conn(), nil))
				tt.setup = `UPDATE rheo.schema_version SET version = version + 1`
			}
			// A hold of the lock that an earlier failed run left on the
			// session, as tern's did.
			_, err = conn.Exec(ctx, tt.setup)
			require.NoError(t, err)
			_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrate.AdvisoryLockKey)
			require.NoError(t, err)
			err = migrate.Postgres(ctx, conn.Conn(), nil)
			require.ErrorIs(t, err, rheo.ErrFailed, "err = %v, want failed: …%s…", err, tt.want)
			require.ErrorContains(t, err, tt.want, "err = %v, want failed: …%s…", err, tt.want)
			conn.Release()

			other := connect(t, url)
			var held int
			require.NoError(t, other.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&held))
			require.Zero(t, held, "%d advisory locks held after the failed run", held)
			// The pooled connection is usable, and the next run takes
			// the lock at once.
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			conn, err = pool.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			var taken bool
			err = other.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, migrate.AdvisoryLockKey).Scan(&taken)
			require.NoError(t, err, "another session could not take the migration lock: %v %v", taken, err)
			require.True(t, taken, "another session could not take the migration lock: %v %v", taken, err)
		})
	}
}

// TestPostgresGivesUpBehindALongTransaction upgrades the first release's
// schema while another session holds a lock of a table in a transaction
// that does not end: the switch gives up after its tries, with a message
// that says why, and queues nobody behind it meanwhile; once the
// transaction ends, the next run succeeds.
func TestPostgresGivesUpBehindALongTransaction(t *testing.T) {
	ctx := context.Background()
	fixture := releaseSchema(t, "54ed27f")
	url := testdb.NewDatabase(t)
	setup := connect(t, url)
	require.NoError(t, pgx.BeginFunc(ctx, setup, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, string(fixture))
		return err
	}))
	exec(t, setup, `SELECT rheo.create_stream('orders')`)

	long := connect(t, url)
	tx, err := long.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE rheo.groups IN ACCESS SHARE MODE`)
	require.NoError(t, err)

	// Connected here: connect may stop the test, which only the test's
	// own goroutine may do.
	migrator := connect(t, url)
	done := make(chan error, 1)
	go func() {
		done <- migrate.Postgres(ctx, migrator, &migrate.Options{Attempts: 5, LockTimeout: 20 * time.Millisecond})
	}()
	// Meanwhile appends go through, each quickly: the switch's lock
	// requests give up instead of queueing them.
	app := connect(t, url)
	var slowest time.Duration
	for running := true; running; {
		select {
		case err = <-done:
			running = false
		default:
			start := time.Now()
			_, err := app.Exec(ctx, `SELECT rheo.append('orders', '{"type": "placed"}')`)
			require.NoError(t, err, "append during the upgrade")
			slowest = max(slowest, time.Since(start))
		}
	}
	require.ErrorIs(t, err, rheo.ErrFailed, "err = %v, want failed: … gave up after 5 tries …", err)
	require.ErrorContains(t, err, "gave up after 5 tries", "err = %v, want failed: … gave up after 5 tries …", err)
	assert.LessOrEqual(t, slowest, time.Second, "an append waited %s behind the upgrade", slowest)
	t.Logf("the slowest append during the tries took %s", slowest)

	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, migrate.Postgres(ctx, connect(t, url), nil), "the run after the transaction ended")
}
