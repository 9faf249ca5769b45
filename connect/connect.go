// Package connect opens a Rheo driver from a database URL, so that a
// program can be pointed at PostgreSQL, SQLite or a registered database
// by configuration alone:
//
//	drv, err := connect.Open(ctx, os.Getenv("DATABASE_URL"), nil)
//
// The URLs it knows itself are postgres://… and postgresql://…
// (PostgreSQL, through driver/postgres), sqlite:///abs/path.db,
// sqlite://relative.db or sqlite:relative.db (an SQLite file, through
// driver/sqlite), and sqlite::memory: (a private in-memory SQLite
// database).
//
// Other databases come with drivers that register their URL schemes,
// as database/sql learns its drivers: a driver package calls Register
// from its init function, so a program that imports it (a blank import
// is enough) opens its URLs with Open, and with every Rheo command built
// into it. The Redis driver, its own module, registers redis:// and
// rediss://:
//
//	import _ "github.com/rheo-go/rheo/driver/redis"
//
//	drv, err := connect.Open(ctx, "redis://127.0.0.1:6379/0", nil)
//
// Schemes lists what is registered, and Forms every accepted form, for
// usage texts; an unknown scheme is a *URLError that lists them too.
// docs/drivers.md says how to write and register a driver.
//
// SQLite needs an SQLite driver linked into the program: with cgo on (the
// default where a C compiler is at hand) driver/sqlite links
// github.com/mattn/go-sqlite3, and with the build tag rheo_modernc the
// pure-Go modernc.org/sqlite. A program built with CGO_ENABLED=0 and
// without the tag has PostgreSQL only, and Open refuses SQLite URLs with
// an error wrapping sqlite.ErrNoDriver, which says how to build it.
//
// Options also carries what a program sets once for its database: a
// Clock, a Logger and, for PostgreSQL, the pool's size and connection
// lifetimes (which the URL's pool_max_conns and the like set as well):
//
//	drv, err := connect.Open(ctx, url, &connect.Options{
//		Logger:   logger,
//		MaxConns: 20,
//	})
//
// Open runs no migration unless Options.Migrate is set. Without it, Open
// checks that the database already holds this build's schema, so a
// missing install is reported once, at startup, rather than by the first
// operation.
package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/dburl"
	"github.com/rheo-go/rheo/migrate"
)

// Options are the optional settings of Open. A nil *Options means the
// defaults.
type Options struct {
	// Clock is given to the driver: every operation reads time from it.
	// Defaults to nil: the database's clock on PostgreSQL, the system
	// clock on SQLite.
	Clock driver.Clock
	// Migrate installs or upgrades Rheo's schema before Open returns
	// (package migrate), and lets Open create a missing SQLite file.
	// Defaults to false: Open changes nothing in the database, and fails
	// with a *SchemaError when the schema is missing or out of date.
	Migrate bool
	// RolePrefix is the role prefix of the install that Migrate makes or
	// upgrades on PostgreSQL (migrate.Options.RolePrefix); SQLite has no
	// roles and ignores it. Defaults to "": the default role names.
	RolePrefix string
	// Logger receives the PostgreSQL driver's records (its wakeup
	// listener's connection problems, failed vacuums; see
	// postgres.Options.Logger) and, with Migrate, the migration's
	// (migrate.Options.Logger). The SQLite driver logs nothing. Defaults
	// to slog.Default() for the driver, as for every logger of Rheo's
	// that runs with the application, and to none for the migration.
	Logger *slog.Logger

	// The PostgreSQL connection pool's settings (pgxpool.Config's), for
	// PostgreSQL URLs; a zero value keeps pgx's default, or the URL's
	// pool_max_conns, pool_min_conns, pool_max_conn_lifetime and
	// pool_max_conn_idle_time parameters, which set the same. The SQLite
	// driver manages its connections itself and ignores them.

	// MaxConns is the most connections the pool opens. pgx's default is
	// the larger of 4 and the number of CPUs. A worker needs one per
	// handler in flight with a TxHandler, plus a few for its fetches and
	// acks.
	MaxConns int32
	// MinConns is how many connections the pool keeps open when idle.
	MinConns int32
	// MaxConnLifetime is how long a connection lives before the pool
	// closes it (pgx: 1 hour).
	MaxConnLifetime time.Duration
	// MaxConnIdleTime is how long an idle connection stays open (pgx: 30
	// minutes).
	MaxConnIdleTime time.Duration
}

// URLError reports a database URL that Open cannot use: an unknown
// scheme (its message lists the accepted forms, the registered schemes
// included), a malformed URL, an SQLite URL without a file. It matches
// rheo.ErrInvalidArgument with errors.Is. Its message never repeats a
// password.
type URLError struct {
	// Err says what is wrong with the URL.
	Err error
}

func (e *URLError) Error() string { return "database URL: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *URLError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, rheo.ErrInvalidArgument) true.
func (e *URLError) Is(target error) bool { return target == rheo.ErrInvalidArgument }

// SchemaError reports a database that does not hold this build's schema
// (Rheo was never installed, or a migration is pending) while
// Options.Migrate was not set, or one migrated by a newer build that
// records that builds as old as this one no longer work on it. Open
// returns it inside a *rheo.FailedError (of kind rheo.KindSchemaMissing
// when a migration is missing); find it with errors.As.
type SchemaError struct {
	// Database names the database: the URL without its password, or the
	// SQLite path.
	Database string
	// Applied is the last schema migration applied, 0 when none is.
	Applied int32
	// Latest is the last schema migration this build carries.
	Latest int32
	// CompatibleFrom, for a database newer than this build, is the oldest
	// schema version whose builds still work on it (0 when the database
	// does not record one).
	CompatibleFrom int32
}

func (e *SchemaError) Error() string {
	if e.Applied > e.Latest {
		return fmt.Sprintf("the database %s is at Rheo schema version %d, which builds of schema version %d or later use; "+
			"this build's latest is %d: upgrade the application to a newer build of Rheo",
			e.Database, e.Applied, e.CompatibleFrom, e.Latest)
	}
	if e.Applied == 0 {
		return fmt.Sprintf("the database %s has no Rheo schema; install it with rheo-migrate up", e.Database)
	}
	return fmt.Sprintf("the database %s is at Rheo schema version %d of %d; upgrade it with rheo-migrate up",
		e.Database, e.Applied, e.Latest)
}

// Open returns a driver for the database at url. The caller closes it.
// A URL of a registered scheme goes to its driver's Opener with opts
// (never nil there), which then decides everything below; PostgreSQL and
// SQLite URLs are Open's own.
//
// Errors are a *URLError (errors.Is rheo.ErrInvalidArgument) for a URL it
// cannot use, an error wrapping rheo.ErrBackendUnavailable when the
// database cannot be reached (for SQLite without Options.Migrate: when
// the file does not exist, which Open then does not create), and a
// *rheo.FailedError wrapping a *SchemaError when the schema is missing or
// out of date, or wrapping sqlite.ErrNoDriver for an SQLite URL in a
// program built without SQLite. opts may be nil.
//
// A PostgreSQL URL takes pgx's parameters and those of driver/postgres's
// Open, so that a pooler in transaction mode (PgBouncer) is a matter of
// configuration too: default_query_exec_mode=exec for pgx, and
// rheo_listen_url=<a percent-encoded direct URL> for the wakeup
// listener, or rheo_poll_only=true where the server cannot be reached
// directly (docs/pgbouncer.md).
func Open(ctx context.Context, url string, opts *Options) (driver.Driver, error) {
	if opts == nil {
		opts = &Options{}
	}
	if open := registered(url); open != nil {
		return open(ctx, url, opts)
	}
	target, err := dburl.ParseAlso(url, Schemes())
	if err != nil {
		return nil, &URLError{Err: err}
	}
	if target.Kind == dburl.Postgres {
		return openPostgres(ctx, target, opts)
	}
	return openSQLite(ctx, target, opts)
}

func openPostgres(ctx context.Context, target dburl.Target, opts *Options) (driver.Driver, error) {
	if opts.MaxConns < 0 || opts.MinConns < 0 || opts.MaxConnLifetime < 0 || opts.MaxConnIdleTime < 0 {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "connect.Options: the pool settings must not be negative")
	}
	config, err := pgxpool.ParseConfig(target.DSN)
	if err != nil {
		return nil, &URLError{Err: rheo.Errorf(rheo.ErrInvalidArgument, "database url: %v", err)}
	}
	if opts.MaxConns > 0 {
		config.MaxConns = opts.MaxConns
	}
	if opts.MinConns > 0 {
		config.MinConns = opts.MinConns
	}
	if opts.MaxConnLifetime > 0 {
		config.MaxConnLifetime = opts.MaxConnLifetime
	}
	if opts.MaxConnIdleTime > 0 {
		config.MaxConnIdleTime = opts.MaxConnIdleTime
	}
	d, err := postgres.OpenConfig(ctx, config, &postgres.Options{Clock: opts.Clock, Logger: opts.Logger})
	if err != nil {
		if errors.Is(err, rheo.ErrInvalidArgument) {
			// pgx rejected the connection settings the URL carries.
			return nil, &URLError{Err: err}
		}
		return nil, err
	}
	if err := preparePostgres(ctx, d, target, opts); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// preparePostgres migrates the database, or checks that it needs no
// migration, on a connection of d's pool.
func preparePostgres(ctx context.Context, d *postgres.Driver, target dburl.Target, opts *Options) error {
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		return &rheo.UnavailableError{Op: "open " + target.Redacted(), Err: err}
	}
	defer conn.Release()
	if opts.Migrate {
		return migrate.Postgres(ctx, conn.Conn(), &migrate.Options{RolePrefix: opts.RolePrefix, Logger: opts.Logger})
	}
	applied, latest, err := migrate.PostgresStatus(ctx, conn.Conn())
	if err != nil {
		return err
	}
	if applied < latest {
		return &rheo.FailedError{Op: "open", Kind: rheo.KindSchemaMissing, Err: &SchemaError{Database: target.Redacted(), Applied: applied, Latest: latest}}
	}
	if applied > latest {
		from, err := migrate.PostgresCompatibleFrom(ctx, conn.Conn())
		if err != nil {
			return err
		}
		if from > latest {
			return &rheo.FailedError{Op: "open", Err: &SchemaError{Database: target.Redacted(), Applied: applied, Latest: latest, CompatibleFrom: from}}
		}
	}
	return nil
}

func openSQLite(ctx context.Context, target dburl.Target, opts *Options) (driver.Driver, error) {
	// Said before anything else about the file: without a driver nothing
	// can be done with it.
	if sqlite.DefaultDriverName() == "" {
		return nil, &rheo.FailedError{Op: "open " + target.Redacted(), Err: sqlite.ErrNoDriver}
	}
	if !target.Memory && !opts.Migrate {
		// Opening a missing file would create an empty database.
		if _, err := os.Stat(target.Path); errors.Is(err, os.ErrNotExist) {
			return nil, &rheo.UnavailableError{Op: "open", Kind: rheo.KindDatabaseNotFound,
				Err: fmt.Errorf("no SQLite database file at %s", target.Path)}
		}
	}
	d, err := sqlite.Open(ctx, target.SQLiteDSN(), &sqlite.Options{Clock: opts.Clock, Migrate: opts.Migrate})
	if err != nil {
		return nil, err
	}
	if !opts.Migrate {
		applied, latest, err := migrate.SQLiteStatus(ctx, d.DB())
		if err == nil && applied < latest {
			err = &rheo.FailedError{Op: "open", Kind: rheo.KindSchemaMissing, Err: &SchemaError{Database: target.Redacted(), Applied: applied, Latest: latest}}
		}
		if err == nil && applied > latest {
			var from int32
			if from, err = migrate.SQLiteCompatibleFrom(ctx, d.DB()); err == nil && from > latest {
				err = &rheo.FailedError{Op: "open", Err: &SchemaError{Database: target.Redacted(), Applied: applied, Latest: latest, CompatibleFrom: from}}
			}
		}
		if err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}
