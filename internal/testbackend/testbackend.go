// Package testbackend runs a test once per backend, on a fresh migrated
// database of each kind:
//
//	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
//		drv := b.Open(t, clock)
//		…
//	})
//
// runs the function as the subtests "sqlite" and "postgres". Each
// subtest prepares its own database, so a missing PostgreSQL skips (or,
// under CI=true, fails) the "postgres" subtest alone: the SQLite cases
// need nothing but the test binary.
//
// A PostgreSQL database is a copy (CREATE DATABASE … TEMPLATE) of one
// migrated once per test binary, which costs a fraction of a migration.
package testbackend

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testskip"
	"github.com/rheo-go/rheo/migrate"
)

// The backends' names, which are the subtests' names.
const (
	NamePostgres = "postgres"
	NameSQLite   = "sqlite"
)

// Backend is a migrated database of one kind, of the test's own.
type Backend struct {
	// Name is NamePostgres or NameSQLite.
	Name string
	// DSN is what the backend's driver opens: the PostgreSQL database's
	// URL, or the SQLite file's path.
	DSN string
	// URL is the database URL connect.Open and the commands take:
	// postgres://… or sqlite://path.
	URL string
	// Placeholder is the first positional parameter of plain SQL: $1 or ?.
	Placeholder string
}

// Runner is a *testing.T or a *testing.B.
type Runner[T any] interface {
	testing.TB
	Run(name string, f func(T)) bool
}

// Run runs fn as one subtest (or sub-benchmark) per backend, "sqlite"
// then "postgres", each on a fresh migrated database.
func Run[T Runner[T]](t T, fn func(t T, b *Backend)) {
	t.Helper()
	t.Run(NameSQLite, func(t T) { fn(t, SQLite(t)) })
	t.Run(NamePostgres, func(t T) { fn(t, Postgres(t)) })
}

// SQLite returns a fresh migrated SQLite file in t's temporary directory.
func SQLite(t testing.TB) *Backend {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rheo.db")
	d, err := sqlite.Open(context.Background(), path, &sqlite.Options{Migrate: true})
	require.NoError(t, err, "migrate the test's SQLite file")
	require.NoError(t, d.Close())
	return &Backend{Name: NameSQLite, DSN: path, URL: "sqlite://" + path, Placeholder: "?"}
}

// Postgres returns a fresh migrated PostgreSQL database, dropped when t
// ends; it skips t when there is no PostgreSQL server (see testdb).
func Postgres(t testing.TB) *Backend {
	t.Helper()
	u := PostgresURL(t)
	return &Backend{Name: NamePostgres, DSN: u, URL: u, Placeholder: "$1"}
}

// Open opens a new driver on the database, with clock as the database's
// notion of now (nil: the real time); it is closed when t ends.
func (b *Backend) Open(t testing.TB, clock driver.Clock) driver.Driver {
	t.Helper()
	ctx := context.Background()
	var (
		d   driver.Driver
		err error
	)
	switch b.Name {
	case NamePostgres:
		d, err = postgres.Open(ctx, b.DSN, &postgres.Options{Clock: clock})
	case NameSQLite:
		d, err = sqlite.Open(ctx, b.DSN, &sqlite.Options{Clock: clock})
	default:
		require.FailNow(t, fmt.Sprintf("unknown backend %q", b.Name))
	}
	require.NoError(t, err, "open a %s driver", b.Name)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// PostgresURL returns the URL of a fresh migrated PostgreSQL database,
// dropped when t ends; it skips t when there is no PostgreSQL server.
func PostgresURL(t testing.TB) string {
	t.Helper()
	admin := testdb.ServerURL(t)
	templateOnce.Do(func() { templateName, templateErr = makeTemplate(t, admin) })
	require.NoError(t, templateErr, "migrate the template database")
	return testdb.NewDatabaseFrom(t, templateName)
}

// makeTemplate creates and migrates the database the tests' databases
// are copied from; it is dropped when the test binary ends (testskip.Run).
func makeTemplate(t testing.TB, admin string) (string, error) {
	ctx := context.Background()
	testdb.DropOrphanTemplates(ctx, admin, templatePrefix)
	name, err := testdb.CreateDatabase(ctx, admin, templatePrefix)
	if err != nil {
		return "", err
	}
	testskip.AtExit(func() {
		if err := testdb.DropDatabase(context.Background(), admin, name); err != nil {
			fmt.Printf("rheo tests: drop the template database %s: %v\n", name, err)
		}
	})
	conn, err := pgx.Connect(ctx, testdb.WithDatabase(t, admin, name))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+pgx.Identifier{name}.Sanitize()+" IS "+quoteLiteral(testdb.TemplateOwner())); err != nil {
		return "", fmt.Errorf("mark %s: %w", name, err)
	}
	if err := migrate.Postgres(ctx, conn, nil); err != nil {
		return "", fmt.Errorf("migrate %s: %w", name, err)
	}
	return name, nil
}

// templatePrefix begins the names of the template databases.
const templatePrefix = "rheo_test_template_"

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
