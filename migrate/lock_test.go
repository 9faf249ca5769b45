package migrate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 1
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tt.setup == "" {
				if err := migrate.Postgres(ctx, conn.Conn(), nil); err != nil {
					t.Fatal(err)
				}
				tt.setup = `UPDATE rheo.schema_version SET version = version + 1`
			}
			// A hold of the lock that an earlier failed run left on the
			// session, as tern's did.
			if _, err := conn.Exec(ctx, tt.setup); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrate.AdvisoryLockKey); err != nil {
				t.Fatal(err)
			}
			err = migrate.Postgres(ctx, conn.Conn(), nil)
			if !errors.Is(err, rheo.ErrFailed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want failed: …%s…", err, tt.want)
			}
			conn.Release()

			other := connect(t, url)
			var held int
			if err := other.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&held); err != nil {
				t.Fatal(err)
			}
			if held != 0 {
				t.Fatalf("%d advisory locks held after the failed run", held)
			}
			// The pooled connection is usable, and the next run takes
			// the lock at once.
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			conn, err = pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			var taken bool
			if err := other.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, migrate.AdvisoryLockKey).Scan(&taken); err != nil || !taken {
				t.Fatalf("another session could not take the migration lock: %v %v", taken, err)
			}
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
	if err := pgx.BeginFunc(ctx, setup, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, string(fixture))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	exec(t, setup, `SELECT rheo.create_stream('orders')`)

	long := connect(t, url)
	tx, err := long.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE rheo.groups IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		done <- migrate.Postgres(ctx, connect(t, url), &migrate.Options{Attempts: 5, LockTimeout: 20 * time.Millisecond})
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
			if _, err := app.Exec(ctx, `SELECT rheo.append('orders', '{"type": "placed"}')`); err != nil {
				t.Fatalf("append during the upgrade: %v", err)
			}
			slowest = max(slowest, time.Since(start))
		}
	}
	if !errors.Is(err, rheo.ErrFailed) || !strings.Contains(err.Error(), "gave up after 5 tries") {
		t.Fatalf("err = %v, want failed: … gave up after 5 tries …", err)
	}
	if slowest > time.Second {
		t.Errorf("an append waited %s behind the upgrade", slowest)
	}
	t.Logf("the slowest append during the tries took %s", slowest)

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := migrate.Postgres(ctx, connect(t, url), nil); err != nil {
		t.Fatalf("the run after the transaction ended: %v", err)
	}
}
