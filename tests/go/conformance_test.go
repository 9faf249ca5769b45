package tests

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/migrate"
)

// TestConformance runs the driver conformance suite against both drivers,
// with the same case names under each: SQLite twice, on mattn's cgo
// driver and on the pure-Go modernc.org/sqlite.
func TestConformance(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		drivertest.Exercise(t, postgresHarness(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		drivertest.Exercise(t, sqliteHarness(sqlite.DriverMattn))
	})
	t.Run("sqlite_modernc", func(t *testing.T) {
		drivertest.Exercise(t, sqliteHarness(sqlite.DriverModernc))
	})
}

// postgresHarness migrates one database for the whole run; every driver
// shares its pool, and the cases keep apart by stream name. The drivers
// log in as an application would: as a role granted rheo_admin (which
// includes every other Rheo role) and nothing else. The raw writes are
// tried as the superuser that installed Rheo, which the guard refuses
// too.
func postgresHarness(tb testing.TB) drivertest.Harness {
	tb.Helper()
	ctx := context.Background()
	app := testdb.NewRole(tb, "")
	url := testdb.NewDatabase(tb)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(tb, err)
	require.NoError(tb, migrate.Postgres(ctx, conn, nil))
	_, err = conn.Exec(ctx, "GRANT rheo_admin TO "+pgx.Identifier{app}.Sanitize())
	require.NoError(tb, err)
	require.NoError(tb, conn.Close(ctx))
	pool, err := pgxpool.New(ctx, url)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	appPool, err := pgxpool.New(ctx, testdb.AsRole(tb, url, app))
	require.NoError(tb, err)
	tb.Cleanup(appPool.Close)

	return drivertest.Harness{
		NewDriver: func(tb testing.TB, clock driver.Clock) driver.Driver {
			d := postgres.New(appPool, &postgres.Options{Clock: clock})
			tb.Cleanup(func() { _ = d.Close() })
			return d
		},
		RawWrites: func(ctx context.Context, tb testing.TB, _ driver.Driver, stream string) map[string]error {
			statements := map[string]string{
				"update": `UPDATE rheo.events SET payload = '{}' WHERE stream = $1`,
				"delete": `DELETE FROM rheo.events WHERE stream = $1`,
				"insert": `INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
					VALUES ($1, 0, 100, 'forged', NULL, '{}', '{}', now())`,
				"truncate": `TRUNCATE rheo.events`,
			}
			errs := map[string]error{}
			for kind, sql := range statements {
				var err error
				if kind == "truncate" {
					_, err = pool.Exec(ctx, sql)
				} else {
					_, err = pool.Exec(ctx, sql, stream)
				}
				errs[kind] = postgresVocabulary(err)
			}
			return errs
		},
	}
}

// postgresVocabulary maps a raw statement's error to its Rheo word, as the
// driver does for the rheo functions.
func postgresVocabulary(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if sentinel := rheo.ErrorForSQLState(pgErr.Code); sentinel != nil {
			return rheo.Errorf(sentinel, "%s", pgErr.Detail)
		}
	}
	return err
}

// sqliteHarness gives every case a private in-memory database, opened
// with the database/sql driver registered as driverName.
func sqliteHarness(driverName string) drivertest.Harness {
	return drivertest.Harness{
		NewDriver: func(tb testing.TB, clock driver.Clock) driver.Driver {
			ctx := context.Background()
			d, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Clock: clock, DriverName: driverName})
			require.NoError(tb, err)
			tb.Cleanup(func() { _ = d.Close() })
			require.NoError(tb, migrate.SQLite(ctx, d.DB()))
			return d
		},
		// SQLite's triggers refuse UPDATE and DELETE; it has no TRUNCATE,
		// and cannot tell the driver's INSERTs from others.
		RawWrites: func(ctx context.Context, tb testing.TB, d driver.Driver, stream string) map[string]error {
			db := d.(*sqlite.Driver).DB()
			errs := map[string]error{}
			for kind, sql := range map[string]string{
				"update": `UPDATE rheo_events SET payload = '{}' WHERE stream = ?`,
				"delete": `DELETE FROM rheo_events WHERE stream = ?`,
			} {
				_, err := db.ExecContext(ctx, sql, stream)
				if err != nil && strings.Contains(err.Error(), rheo.ErrImmutableEvent.Reason) {
					err = rheo.Errorf(rheo.ErrImmutableEvent, "%s", err)
				}
				errs[kind] = err
			}
			return errs
		},
	}
}
