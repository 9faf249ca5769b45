package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
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

// PostgresRoles does what an install by a role that may not create
// roles left undone: it creates Rheo's roles, hands the schema rheo and
// everything in it over to the owner role and installs the functions
// again with their privileges, in one transaction. Rheo must be
// installed already (Postgres), with the role prefix of opts
// (Options.RolePrefix). The current role must be a superuser or have
// CREATEROLE. Running it again changes nothing but the functions'
// install time. Errors are those of Postgres.
func PostgresRoles(ctx context.Context, conn *pgx.Conn, opts *Options) error {
	log := opts.logger()
	names, err := opts.roleNames()
	if err != nil {
		return err
	}
	return inInstall(ctx, conn, names, func(tx pgx.Tx, in installer, fail func(string, error) error) error {
		if !in.createRole {
			return fail("roles", fmt.Errorf("%s may not create roles: run rheo-migrate roles as a superuser or a role with CREATEROLE", in.name))
		}
		var installed bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('rheo.function_set') IS NOT NULL`).Scan(&installed); err != nil {
			return fail("look for Rheo", err)
		}
		if !installed {
			return fail("roles", errors.New("Rheo is not installed in this database: run rheo-migrate up first"))
		}
		set, err := loadFunctions()
		if err != nil {
			return fail("load functions", err)
		}
		if err := installFunctions(ctx, tx, in, true, log, set); err != nil {
			return fail("install functions", err)
		}
		return nil
	})
}

// inInstall runs fn in one transaction on conn, under the session
// advisory lock AdvisoryLockKey, after CREATE SCHEMA IF NOT EXISTS rheo,
// with the roles of names prepared (createRolesSQL, ownerAccessSQL) and the
// role prefix recorded (createPrefixTableSQL); when fn succeeds, the
// run's membership in the owner role ends (ownerReleaseSQL) and the
// transaction commits. fail, which fn uses for its errors, puts a
// failed step in the error vocabulary.
func inInstall(ctx context.Context, conn *pgx.Conn, names RoleNames, fn func(tx pgx.Tx, in installer, fail func(string, error) error) error) (err error) {
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

	tx, err := conn.Begin(ctx)
	if err != nil {
		return fail("begin", err)
	}
	// After a commit the rollback is a no-op.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, setPrefixSQL, names.prefix()); err != nil {
		return fail("set the role prefix", err)
	}
	for _, step := range []struct{ name, sql string }{
		{"make the roles on the Citus workers", citusRolesSQL},
		{"create schema rheo", "CREATE SCHEMA IF NOT EXISTS rheo"},
		{"create roles", createRolesSQL},
		{"act as " + names.Owner, ownerAccessSQL},
		{"record the role prefix", createPrefixTableSQL},
	} {
		if _, err := tx.Exec(ctx, step.sql); err != nil {
			return fail(step.name, err)
		}
	}
	in, err := readInstaller(ctx, tx, names)
	if err != nil {
		return fail("read the current role", err)
	}
	if err := fn(tx, in, fail); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, ownerReleaseSQL); err != nil {
		return fail("end the membership in "+names.Owner, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail("commit", err)
	}
	return nil
}

// installFunctions hands Rheo over to the owner role, when the current
// role may act as it, and installs the functions set unless the
// installed ones are current and the roles have their privileges; force
// installs them in any case. The functions are created as the owner
// role, so that they belong to it.
func installFunctions(ctx context.Context, tx pgx.Tx, in installer, force bool, log *slog.Logger, set functionSet) error {
	if in.asOwner {
		if _, err := tx.Exec(ctx, handOverSQL); err != nil {
			return fmt.Errorf("hand Rheo over to %s: %w", in.roles.Owner, err)
		}
	}
	var current, missing bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM rheo.function_set WHERE sha256 = $1), (`+grantsMissingSQL+`)`,
		set.sha256).Scan(&current, &missing); err != nil {
		return fmt.Errorf("read rheo.function_set: %w", err)
	}
	if current && !missing && !force {
		log.DebugContext(ctx, "functions are current", logKeySHA256, set.sha256)
		return nil
	}
	var role string
	if err := tx.QueryRow(ctx, `SELECT current_setting('role')`).Scan(&role); err != nil {
		return err
	}
	if in.asOwner {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{in.roles.Owner}.Sanitize()); err != nil {
			return err
		}
	}
	for _, f := range set.files {
		// No arguments: pgx sends the file with the simple protocol,
		// which runs all of its statements.
		if _, err := tx.Exec(ctx, f.sql); err != nil {
			return fmt.Errorf("install functions: %s: %w", f.name, err)
		}
	}
	if _, err := tx.Exec(ctx, `
INSERT INTO rheo.function_set (id, sha256, installed_at) VALUES (true, $1, now())
ON CONFLICT (id) DO UPDATE SET sha256 = excluded.sha256, installed_at = excluded.installed_at`, set.sha256); err != nil {
		return err
	}
	// Back to the role the run started as.
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+roleName(role)); err != nil {
		return err
	}
	log.InfoContext(ctx, "installed functions", logKeySHA256, set.sha256)
	return nil
}

// roleName is the argument of SET ROLE that restores the setting role,
// as current_setting('role') reports it.
func roleName(setting string) string {
	if setting == "none" {
		return "NONE"
	}
	return pgx.Identifier{setting}.Sanitize()
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
	err = readInstalled(ctx, conn, "read "+versionTable, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT coalesce((SELECT max(version) FROM rheo.schema_version), 0)`).Scan(&applied)
	})
	return applied, latest, err
}

// PostgresFunctionsCurrent reports whether the functions installed in the
// database behind conn are the ones this build carries, with the roles'
// privileges (false when none are installed).
func PostgresFunctionsCurrent(ctx context.Context, conn *pgx.Conn) (bool, error) {
	set, err := loadFunctions()
	if err != nil {
		return false, wrapErr(ctx, "load functions", err, false)
	}
	var current bool
	err = readInstalled(ctx, conn, "read rheo.function_set", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM rheo.function_set WHERE sha256 = $1) AND NOT (`+grantsMissingSQL+`)`,
			set.sha256).Scan(&current)
	})
	return current, err
}

// readInstalled runs fn in a transaction that is rolled back, so that
// nothing outlives the read. A role granted rheo_reader (an application
// checking the schema as it connects) reads the version tables as they
// are; any other role, such as an installer, acts as the install's owner
// role where it may (see ownerAccessSQL). The transaction's role prefix
// (rheo.role_prefix) is the install's. A database where Rheo was never
// installed leaves the results at their zero values.
func readInstalled(ctx context.Context, conn *pgx.Conn, step string, fn func(tx pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var exists, readable bool
		if err := tx.QueryRow(ctx, `
SELECT n.oid IS NOT NULL,
       coalesce(has_schema_privilege(n.oid, 'USAGE')
                AND has_table_privilege(to_regclass('rheo.schema_version'), 'SELECT')
                AND has_table_privilege(to_regclass('rheo.function_set'), 'SELECT'), false)
  FROM (SELECT) AS one
  LEFT JOIN pg_namespace n ON n.nspname = 'rheo'`).Scan(&exists, &readable); err != nil || !exists {
			return err
		}
		setPrefix := func() error {
			prefix, err := installedPrefix(ctx, tx)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, setPrefixSQL, deref(prefix))
			return err
		}
		if err := setPrefix(); err != nil {
			return err
		}
		if !readable {
			if _, err := tx.Exec(ctx, ownerAccessSQL); err != nil {
				return err
			}
			// Now readable: the prefix as recorded.
			if err := setPrefix(); err != nil {
				return err
			}
		}
		var installed bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('rheo.function_set') IS NOT NULL`).Scan(&installed); err != nil || !installed {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		return errRollBack
	})
	if err == nil || errors.Is(err, errRollBack) {
		return nil
	}
	return wrapErr(ctx, step, err, conn.IsClosed())
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// errRollBack ends readInstalled's transaction without committing.
var errRollBack = errors.New("roll back")

// PostgresSQL returns the whole PostgreSQL install as one SQL script, for
// hosts that run migrations with psql or their own tool, with the
// default role names (PostgresSQLFor gives it for a role prefix). It
// does what Postgres does, in the same order, recorded in the same
// tables, so either may follow the other: the roles, the schema
// migrations in order, the hand-over to rheo_owner, then the functions. What an install
// by a role that may not create roles leaves undone is said in a NOTICE.
//
// Rerunning it changes nothing: each migration runs inside a DO block only
// when rheo.schema_version is below its version, and the functions only
// when rheo.function_set holds another checksum or the roles lack their
// privileges. Each DO block is atomic on its own, together with its
// bookkeeping. Run the script in one transaction (psql -1 -v
// ON_ERROR_STOP=1 -f rheo.sql, or as one migration of the host's tool) so
// that its first statement, a transaction-level advisory lock on
// AdvisoryLockKey, keeps concurrent installs apart, and so that a
// temporary membership in rheo_owner (see Postgres) cannot outlive it;
// the script has no BEGIN or COMMIT of its own.
//
// Being one transaction, the script is not for an upgrade under load:
// it builds indexes without CONCURRENTLY, runs backfills whole and holds
// every lock it takes until it commits (docs/upgrading.md). The
// follow-ups of its migrations, which Postgres runs once the calls in
// flight at the switch have ended, run at its end.
//
// PostgresSQL panics if the embedded SQL cannot be loaded, which the
// package's tests rule out for every build.
func PostgresSQL() string {
	script, err := PostgresSQLFor(nil)
	if err != nil {
		panic(fmt.Sprintf("rheo migrate: %v", err))
	}
	return script
}

// PostgresSQLFor is PostgresSQL for the role prefix of opts
// (Options.RolePrefix; its other fields do not apply to the script): the
// script creates and grants the roles of RoleNamesFor(opts.RolePrefix),
// records the prefix in a new install and refuses to run on an install
// made with another one. Its error, for an invalid prefix, wraps
// rheo.ErrInvalidArgument.
func PostgresSQLFor(opts *Options) (string, error) {
	names, err := opts.roleNames()
	if err != nil {
		return "", err
	}
	ms, err := loadMigrations()
	if err != nil {
		panic(fmt.Sprintf("rheo migrate: load schema migrations: %v", err))
	}
	set, err := loadFunctions()
	if err != nil {
		panic(fmt.Sprintf("rheo migrate: load functions: %v", err))
	}

	var b strings.Builder
	fmt.Fprintf(&b, `-- Rheo PostgreSQL install: roles, schema migrations 1 to %d, then the
-- functions (sha256 %s). Run it in one transaction; rerunning it changes
-- nothing.

DO $$BEGIN PERFORM pg_advisory_xact_lock(%d); END$$;

CREATE SCHEMA IF NOT EXISTS rheo;

-- The role prefix of this install: %s.
%s;

-- Roles: created when missing, if the current role may create roles (on
-- a Citus cluster, on every worker too).
%s;

%s;

%s;

%s;

%s;

-- Whether Rheo was installed before this script.
%s;

-- What an earlier upgrade left to do once the previous release's calls
-- in flight had ended.
%s;
`, len(ms), set.sha256, AdvisoryLockKey, prefixComment(names), setPrefixLiteral(names.prefix(), false),
		citusRolesSQL, createRolesSQL, ownerAccessSQL, createVersionTableSQL, createPrefixTableSQL, upgradingSQL, runFollowUpsSQL)

	for _, m := range ms {
		fmt.Fprintf(&b, "\n-- Schema migration %d: %s\n", m.version, m.name)
		body := m.scriptSQL()
		if f := append(m.followUps(stepSwitch), m.followUps(stepInstall)...); len(f) > 0 {
			body += createFollowUpsSQL + ";\n"
			for _, sql := range f {
				body += "INSERT INTO rheo.upgrade_follow_ups (after, sql) VALUES (clock_timestamp(), " + dollarQuote(sql, "rheo_follow_up") + ");\n"
			}
		}
		b.WriteString(doBlock(
			fmt.Sprintf("(SELECT version FROM %s) < %d", versionTable, m.version),
			body,
			fmt.Sprintf("UPDATE %s SET version = %d;", versionTable, m.version),
			"",
		))
	}

	b.WriteString("\n-- The roles that used a release before " + names.Owner + " keep their access.\n" + keepAccessSQL + ";\n")
	b.WriteString("\n-- The schema and everything in it belong to " + names.Owner + ".\n" + handOverSQL + ";\n")
	b.WriteString("\n-- The previous owner keeps its privileges until the follow-ups.\n" + keepOwnerAccessSQL + ";\n")

	b.WriteString("\n-- Functions, created as " + names.Owner + ": " + strings.Join(set.names(), ", ") + "\n")
	b.WriteString(doBlock(
		fmt.Sprintf(`NOT EXISTS (SELECT FROM rheo.function_set WHERE sha256 = '%s')
     OR (%s)`, set.sha256, grantsMissingSQL),
		set.concat(),
		fmt.Sprintf(`INSERT INTO rheo.function_set (id, sha256, installed_at) VALUES (true, '%s', now())
    ON CONFLICT (id) DO UPDATE SET sha256 = excluded.sha256, installed_at = excluded.installed_at;`, set.sha256),
		names.Owner,
	))
	b.WriteString("\n-- The follow-ups of the migrations: in one transaction, no call of\n-- the previous release can still be in flight when it commits.\n" + runFollowUpsSQL + ";\n")
	b.WriteString("\n" + ownerReleaseSQL + ";\n")
	return b.String(), nil
}

// prefixComment says in the install script which roles it installs.
func prefixComment(n RoleNames) string {
	if n.prefix() == "" {
		return "none, the default role names"
	}
	return n.prefix() + ", roles " + strings.Join(n.All(), ", ")
}

// doBlock returns a DO statement that, when cond holds, executes body
// (any number of statements) and then the bookkeeping statement after.
// A non-empty owner (a name RoleNamesFor made, which needs no quoting)
// runs both as that role when the current role may act as it, and then
// returns to the role it ran as.
func doBlock(cond, body, after, owner string) string {
	inner := dollarQuote(body, "rheo_sql")
	var block string
	if owner != "" {
		block = fmt.Sprintf(`DECLARE
  v_role text := current_setting('role');
BEGIN
  IF %s THEN
    IF pg_has_role(current_user, '%s', 'MEMBER') THEN
      SET LOCAL ROLE %[2]s;
    END IF;
    EXECUTE %s;
    %s
    EXECUTE 'SET LOCAL ROLE ' || CASE v_role WHEN 'none' THEN 'NONE' ELSE quote_ident(v_role) END;
  END IF;
END
`, cond, owner, inner, after)
	} else {
		block = fmt.Sprintf("BEGIN\n  IF %s THEN\n    EXECUTE %s;\n    %s\n  END IF;\nEND\n", cond, inner, after)
	}
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
