package migrate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	tern "github.com/jackc/tern/v2/migrate"

	rheosql "github.com/rheo-go/rheo/sql"
)

// sqliteVersionTable holds one row: the number of the last SQLite
// migration applied.
const sqliteVersionTable = "rheo_schema_version"

const sqliteCreateVersionTable = `CREATE TABLE IF NOT EXISTS rheo_schema_version (version INTEGER NOT NULL);
INSERT INTO rheo_schema_version (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM rheo_schema_version);`

// sqliteMu serializes SQLite migrations within the process, whatever the
// busy timeout of the caller's database handle.
var sqliteMu sync.Mutex

// SQLite brings the SQLite database db up to date: it applies the
// migrations of rheosql.SQLite (NNN_name.sql, the same version numbers as
// the PostgreSQL schema) that are newer than the version recorded in
// rheo_schema_version, each in its own BEGIN IMMEDIATE transaction
// together with the new version. A second run changes nothing; concurrent
// runs in one process wait for each other, and runs in several processes
// wait on SQLite's write lock (so give db a busy timeout). db is opened by
// the caller, with github.com/mattn/go-sqlite3, modernc.org/sqlite or
// another driver that accepts several statements in one Exec.
//
// Errors are *rheo.FailedError; running SQLite again after an error is
// safe.
func SQLite(ctx context.Context, db *sql.DB) error {
	ms, err := loadSQLite()
	if err != nil {
		return wrapErr(ctx, "load SQLite migrations", err, false)
	}
	sqliteMu.Lock()
	defer sqliteMu.Unlock()

	conn, err := db.Conn(ctx)
	if err != nil {
		return wrapErr(ctx, "open a connection", err, false)
	}
	defer conn.Close()

	latest := int32(len(ms))
	for _, m := range ms {
		if err := sqliteStep(ctx, conn, m, latest); err != nil {
			return wrapErr(ctx, "SQLite migration "+m.name, err, false)
		}
	}
	return nil
}

// sqliteStep applies migration m unless it is already applied.
func sqliteStep(ctx context.Context, conn *sql.Conn, m sqliteMigration, latest int32) (err error) {
	// BEGIN IMMEDIATE takes the write lock before reading the version, so
	// two processes cannot both decide to apply m.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			// Never hand a connection stuck in a transaction back to the pool.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	if _, err := conn.ExecContext(ctx, sqliteCreateVersionTable); err != nil {
		return err
	}
	var applied int32
	if err := conn.QueryRowContext(ctx, "SELECT version FROM rheo_schema_version").Scan(&applied); err != nil {
		return err
	}
	if applied > latest {
		return newerSchemaError(applied, latest)
	}
	if applied < m.version {
		if _, err := conn.ExecContext(ctx, m.sql); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, "UPDATE rheo_schema_version SET version = ?", m.version); err != nil {
			return err
		}
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}

// SQLiteStatus reports the number of the last SQLite migration applied to
// db (0 when Rheo was never installed) and the latest one this build
// carries.
func SQLiteStatus(ctx context.Context, db *sql.DB) (applied, latest int32, err error) {
	ms, err := loadSQLite()
	if err != nil {
		return 0, 0, wrapErr(ctx, "load SQLite migrations", err, false)
	}
	latest = int32(len(ms))
	var exists bool
	err = db.QueryRowContext(ctx,
		"SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?)", sqliteVersionTable).Scan(&exists)
	if err != nil {
		return 0, 0, wrapErr(ctx, "read the schema", err, false)
	}
	if !exists {
		return 0, latest, nil
	}
	if err := db.QueryRowContext(ctx, "SELECT version FROM rheo_schema_version").Scan(&applied); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, 0, wrapErr(ctx, "read "+sqliteVersionTable, err, false)
	}
	return applied, latest, nil
}

// SQLiteSQL returns the whole SQLite install as one SQL script, for hosts
// that run migrations with their own tool: every migration in order, then
// rheo_schema_version set to the latest version, so SQLite sees the
// database as current afterwards. Unlike PostgresSQL it is meant for an
// empty database only: SQLite has no conditional DDL, so running it on an
// installed database fails. It has no BEGIN or COMMIT of its own; run it
// in one transaction.
//
// SQLiteSQL panics if the embedded SQL cannot be loaded, which the
// package's tests rule out for every build.
func SQLiteSQL() string {
	ms, err := loadSQLite()
	if err != nil {
		panic(fmt.Sprintf("rheo migrate: load SQLite migrations: %v", err))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- Rheo SQLite install: migrations 1 to %d, for an empty database. Run it in one transaction.\n\n", len(ms))
	b.WriteString(sqliteCreateVersionTable + "\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "\n-- Migration %d: %s\n", m.version, m.name)
		b.WriteString(strings.TrimRight(m.sql, "\n") + "\n")
	}
	fmt.Fprintf(&b, "\nUPDATE rheo_schema_version SET version = %d;\n", len(ms))
	return b.String()
}

type sqliteMigration struct {
	version int32
	name    string
	sql     string
}

// loadSQLite reads rheosql.SQLite, checking that versions run from 1
// without gaps or duplicates.
func loadSQLite() ([]sqliteMigration, error) {
	names, err := tern.FindMigrations(rheosql.SQLite)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no SQLite migrations")
	}
	ms := make([]sqliteMigration, len(names))
	for i, name := range names {
		body, err := fs.ReadFile(rheosql.SQLite, name)
		if err != nil {
			return nil, err
		}
		ms[i] = sqliteMigration{version: int32(i + 1), name: name, sql: string(body)}
	}
	return ms, nil
}

// SQLiteCompatibleFrom reports the oldest schema version whose builds
// still work on db, as its latest migration recorded it (0 when it
// records none). A build whose latest migration is older must not use
// the database.
func SQLiteCompatibleFrom(ctx context.Context, db *sql.DB) (int32, error) {
	var recorded bool
	if err := db.QueryRowContext(ctx,
		"SELECT EXISTS (SELECT 1 FROM pragma_table_info(?) WHERE name = 'compatible_from')", sqliteVersionTable).Scan(&recorded); err != nil {
		return 0, wrapErr(ctx, "read the schema", err, false)
	}
	if !recorded {
		return 0, nil
	}
	var from int32
	if err := db.QueryRowContext(ctx, "SELECT coalesce(max(compatible_from), 0) FROM rheo_schema_version").Scan(&from); err != nil {
		return 0, wrapErr(ctx, "read "+sqliteVersionTable, err, false)
	}
	return from, nil
}
