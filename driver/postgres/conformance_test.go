package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testdb"
)

// TestConformance runs the driver conformance suite (driver/drivertest)
// against the PostgreSQL driver.
func TestConformance(t *testing.T) {
	t.Parallel()
	drivertest.Exercise(t, postgresHarness(t))
}

// BenchmarkDriver measures the driver's hot paths with the conformance
// harness: go test -run '^$' -bench BenchmarkDriver ./driver/postgres
func BenchmarkDriver(b *testing.B) {
	drivertest.Benchmark(b, postgresHarness(b))
}

// postgresHarness copies one migrated database for the whole run; every driver
// shares its pool, and the cases keep apart by stream name. The drivers
// log in as an application would: as a role granted rheo_admin (which
// includes every other Rheo role) and nothing else. The raw writes are
// tried as the superuser that installed Rheo, which the guard refuses
// too.
func postgresHarness(tb testing.TB) drivertest.Harness {
	tb.Helper()
	ctx := context.Background()
	app := testdb.NewRole(tb, "")
	url := testbackend.PostgresURL(tb)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(tb, err)
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
			return rawWrites(ctx, pool, stream)
		},
	}
}

// rawWrites tries to change stream's logged events in plain SQL as the
// superuser of pool, and returns each attempt's error in Rheo's
// vocabulary.
func rawWrites(ctx context.Context, pool *pgxpool.Pool, stream string) map[string]error {
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
