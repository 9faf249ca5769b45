package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	tern "github.com/jackc/tern/v2/migrate"

	rheosql "github.com/rheo-go/rheo/sql"
)

// AdvisoryLockKey is the PostgreSQL advisory lock that serializes Rheo
// installs: Postgres holds it as a session lock for its whole run, and the
// SQL of PostgresSQL takes it as a transaction lock. Its value is the
// ASCII bytes "rheomigr" read as a big-endian int64.
const AdvisoryLockKey int64 = 0x7268656f6d696772

// versionTable is tern's version table: one row holding the number of the
// last schema migration applied.
const versionTable = "rheo.schema_version"

// Postgres brings the database behind conn up to date, under the session
// advisory lock AdvisoryLockKey, so concurrent runs wait for each other:
//
//  1. CREATE SCHEMA IF NOT EXISTS rheo;
//  2. the schema migrations (rheosql.Schema, with tern), each in its own
//     transaction, tracked in rheo.schema_version;
//  3. the functions (rheosql.Functions, all files in lexical order) in one
//     transaction, skipped when the sha256 of the files equals the one
//     recorded in rheo.function_set.
//
// A second run changes nothing. conn must be a session of its own (not in
// a transaction, not behind a transaction-pooling proxy, which would lose
// the session lock); its session settings are reset (RESET ALL) after each
// schema migration. opts may be nil.
//
// Errors wrap rheo.ErrBackendUnavailable when the connection broke, and
// are *rheo.FailedError otherwise. Every step is atomic, so running
// Postgres again after an error is safe.
func Postgres(ctx context.Context, conn *pgx.Conn, opts *Options) (err error) {
	log := opts.logger()
	fail := func(step string, err error) error { return wrapErr(ctx, step, err, conn.IsClosed()) }

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", AdvisoryLockKey); err != nil {
		return fail("take the migration lock", err)
	}
	defer func() {
		if conn.IsClosed() {
			return // the session, and its lock, are gone
		}
		// Release the lock even when ctx was cancelled after a step.
		_, uerr := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", AdvisoryLockKey)
		if err == nil && uerr != nil {
			err = fail("release the migration lock", uerr)
		}
	}()

	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS rheo"); err != nil {
		return fail("create schema rheo", err)
	}

	m, err := tern.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return fail("create "+versionTable, err)
	}
	if err := m.LoadMigrations(rheosql.Schema); err != nil {
		return fail("load schema migrations", err)
	}
	current, err := m.GetCurrentVersion(ctx)
	if err != nil {
		return fail("read "+versionTable, err)
	}
	if latest := int32(len(m.Migrations)); current > latest {
		return fail("schema migration", newerSchemaError(current, latest))
	}
	m.OnStart = func(version int32, name, _, _ string) {
		log.InfoContext(ctx, "applying schema migration", logKeyVersion, version, logKeyName, name)
	}
	if err := m.Migrate(ctx); err != nil {
		return fail("schema migration", err)
	}

	set, err := loadFunctions()
	if err != nil {
		return fail("load functions", err)
	}
	var installed string
	err = conn.QueryRow(ctx, "SELECT sha256 FROM rheo.function_set").Scan(&installed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fail("read rheo.function_set", err)
	}
	if installed == set.sha256 {
		log.DebugContext(ctx, "functions are current", logKeySHA256, set.sha256)
		return nil
	}
	if err := installFunctions(ctx, conn, set); err != nil {
		return fail("install functions", err)
	}
	log.InfoContext(ctx, "installed functions", logKeySHA256, set.sha256)
	return nil
}

func installFunctions(ctx context.Context, conn *pgx.Conn, set functionSet) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, f := range set.files {
			// No arguments: pgx sends the file with the simple protocol,
			// which runs all of its statements.
			if _, err := tx.Exec(ctx, f.sql); err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
		}
		_, err := tx.Exec(ctx, `
INSERT INTO rheo.function_set (id, sha256, installed_at) VALUES (true, $1, now())
ON CONFLICT (id) DO UPDATE SET sha256 = excluded.sha256, installed_at = excluded.installed_at`,
			set.sha256)
		return err
	})
}

// PostgresStatus reports the number of the last schema migration applied
// to the database behind conn (0 when Rheo was never installed) and the
// latest one this build carries.
func PostgresStatus(ctx context.Context, conn *pgx.Conn) (applied, latest int32, err error) {
	names, err := tern.FindMigrations(rheosql.Schema)
	if err != nil {
		return 0, 0, wrapErr(ctx, "load schema migrations", err, false)
	}
	latest = int32(len(names))
	err = conn.QueryRow(ctx, `
SELECT coalesce((SELECT max(version) FROM rheo.schema_version), 0)`).Scan(&applied)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never installed
		return 0, latest, nil
	}
	if err != nil {
		return 0, 0, wrapErr(ctx, "read "+versionTable, err, conn.IsClosed())
	}
	return applied, latest, nil
}

// PostgresFunctionsCurrent reports whether the functions installed in the
// database behind conn are the ones this build carries (false when none
// are installed).
func PostgresFunctionsCurrent(ctx context.Context, conn *pgx.Conn) (bool, error) {
	set, err := loadFunctions()
	if err != nil {
		return false, wrapErr(ctx, "load functions", err, false)
	}
	var current bool
	err = conn.QueryRow(ctx, `
SELECT EXISTS (SELECT FROM rheo.function_set WHERE sha256 = $1)`, set.sha256).Scan(&current)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never installed
		return false, nil
	}
	if err != nil {
		return false, wrapErr(ctx, "read rheo.function_set", err, conn.IsClosed())
	}
	return current, nil
}

// PostgresSQL returns the whole PostgreSQL install as one SQL script, for
// hosts that run migrations with psql or their own tool: the schema
// migrations in order, then the functions. It is what Postgres does,
// recorded in the same tables, so either may follow the other.
//
// Rerunning it changes nothing: each migration runs inside a DO block only
// when rheo.schema_version is below its version, and the functions only
// when rheo.function_set holds another checksum. Each DO block is atomic
// on its own, together with its bookkeeping. Run the script in one
// transaction (psql -1 -v ON_ERROR_STOP=1 -f rheo.sql, or as one migration
// of the host's tool) so that its first statement, a transaction-level
// advisory lock on AdvisoryLockKey, keeps concurrent installs apart; the
// script has no BEGIN or COMMIT of its own. Migrations that cannot run in
// a transaction cannot be part of it.
//
// PostgresSQL panics if the embedded SQL cannot be loaded, which the
// package's tests rule out for every build.
func PostgresSQL() string {
	ms, err := loadSchema()
	if err != nil {
		panic(fmt.Sprintf("rheo migrate: load schema migrations: %v", err))
	}
	set, err := loadFunctions()
	if err != nil {
		panic(fmt.Sprintf("rheo migrate: load functions: %v", err))
	}

	var b strings.Builder
	fmt.Fprintf(&b, `-- Rheo PostgreSQL install: schema migrations 1 to %d, then the functions
-- (sha256 %s). Run it in one transaction; rerunning it changes nothing.

DO $$BEGIN PERFORM pg_advisory_xact_lock(%d); END$$;

CREATE SCHEMA IF NOT EXISTS rheo;
CREATE TABLE IF NOT EXISTS %s (version int4 NOT NULL);
INSERT INTO %[4]s (version) SELECT 0 WHERE NOT EXISTS (SELECT FROM %[4]s);
`, len(ms), set.sha256, AdvisoryLockKey, versionTable)

	for _, m := range ms {
		fmt.Fprintf(&b, "\n-- Schema migration %d: %s\n", m.Sequence, m.Name)
		b.WriteString(doBlock(
			fmt.Sprintf("(SELECT version FROM %s) < %d", versionTable, m.Sequence),
			m.UpSQL,
			fmt.Sprintf("UPDATE %s SET version = %d;", versionTable, m.Sequence),
		))
	}

	b.WriteString("\n-- Functions: " + strings.Join(set.names(), ", ") + "\n")
	b.WriteString(doBlock(
		fmt.Sprintf("NOT EXISTS (SELECT FROM rheo.function_set WHERE sha256 = '%s')", set.sha256),
		set.concat(),
		fmt.Sprintf(`INSERT INTO rheo.function_set (id, sha256, installed_at) VALUES (true, '%s', now())
    ON CONFLICT (id) DO UPDATE SET sha256 = excluded.sha256, installed_at = excluded.installed_at;`, set.sha256),
	))
	return b.String()
}

// doBlock returns a DO statement that, when cond holds, executes body
// (any number of statements) and then the bookkeeping statement after.
func doBlock(cond, body, after string) string {
	inner := dollarQuote(body, "rheo_sql")
	block := fmt.Sprintf("BEGIN\n  IF %s THEN\n    EXECUTE %s;\n    %s\n  END IF;\nEND\n", cond, inner, after)
	return "DO " + dollarQuote(block, "rheo_do") + ";\n"
}

// dollarQuote quotes s as a dollar-quoted string literal whose tag does
// not occur in s.
func dollarQuote(s, tag string) string {
	t := tag
	for i := 1; strings.Contains(s, "$"+t+"$"); i++ {
		t = tag + "_" + strconv.Itoa(i)
	}
	return "$" + t + "$\n" + s + "\n$" + t + "$"
}

// loadSchema returns the schema migrations as tern reads them.
func loadSchema() ([]*tern.Migration, error) {
	m, err := tern.NewMigrator(context.Background(), nil, versionTable)
	if err != nil {
		return nil, err
	}
	if err := m.LoadMigrations(rheosql.Schema); err != nil {
		return nil, err
	}
	return m.Migrations, nil
}

// functionSet is the content of rheosql.Functions in install order.
type functionSet struct {
	files  []sqlFile
	sha256 string // hex sha256 of the files' bytes, concatenated in order
}

type sqlFile struct {
	name string
	sql  string
}

func (s functionSet) names() []string {
	names := make([]string, len(s.files))
	for i, f := range s.files {
		names[i] = f.name
	}
	return names
}

func (s functionSet) concat() string {
	var b strings.Builder
	for _, f := range s.files {
		b.WriteString(f.sql)
		if !strings.HasSuffix(f.sql, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// loadFunctions reads rheosql.Functions in lexical order: helpers, named
// _name.sql, sort before the functions that use them.
func loadFunctions() (functionSet, error) {
	fsys := rheosql.Functions
	entries, err := fs.ReadDir(fsys, ".") // sorted by name
	if err != nil {
		return functionSet{}, err
	}
	var set functionSet
	h := sha256.New()
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return functionSet{}, err
		}
		h.Write(body)
		set.files = append(set.files, sqlFile{name: e.Name(), sql: string(body)})
	}
	if len(set.files) == 0 {
		return functionSet{}, errors.New("no function files")
	}
	set.sha256 = hex.EncodeToString(h.Sum(nil))
	return set, nil
}
