package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/dburl"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/migrate"
	rheosql "github.com/rheo-go/rheo/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runResult is what one command line did.
type runResult struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, args ...string) runResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return runResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// wantFailure checks a failure: status 1, nothing on stdout, and exactly
// one line on stderr.
func (r runResult) wantFailure(t *testing.T, want string) {
	t.Helper()
	require.Equal(t, runResult{code: 1, stderr: want + "\n"}, r, "want status 1, no stdout, stderr %q", want+"\n")
}

func (r runResult) wantOutput(t *testing.T, want ...string) {
	t.Helper()
	r.wantStatus(t, exitOK, want...)
}

// wantPending checks the output of status while a migration is pending:
// exitPending, for release steps.
func (r runResult) wantPending(t *testing.T, want ...string) {
	t.Helper()
	r.wantStatus(t, exitPending, want...)
}

func (r runResult) wantStatus(t *testing.T, code int, want ...string) {
	t.Helper()
	require.Equal(t, runResult{code: code, stdout: strings.Join(want, "\n") + "\n"}, r,
		"want status %d and stdout %q", code, strings.Join(want, "\n")+"\n")
}

func TestUsage(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	tests := []struct {
		name string
		args []string
		want string // the first line on stderr
	}{
		{"no command", nil, "Usage:"},
		{"an unknown command", []string{"down"}, `rheo-migrate: unknown command "down"`},
		{"an unknown flag", []string{"up", "--force"}, "flag provided but not defined: -force"},
		{"a flag of another command", []string{"sql", "--database-url", "sqlite:x.db"}, "flag provided but not defined: -database-url"},
		{"an extra argument", []string{"status", "--database-url", "sqlite:x.db", "now"}, `rheo-migrate status: unexpected argument "now"`},
		{"no database URL", []string{"up"}, "rheo-migrate up: no database URL: pass --database-url or set DATABASE_URL"},
		{"an unsupported scheme", []string{"up", "--database-url", "mysql://db/app"},
			`rheo-migrate up: unsupported database URL scheme "mysql"; use one of ` + dburl.Forms},
		{"a malformed PostgreSQL URL, without its password", []string{"status", "--database-url", "postgres://app:secret@db:port/app"},
			`rheo-migrate status: invalid PostgreSQL URL: invalid port ":port" after host`},
		{"a PostgreSQL URL with a setting pgx refuses", []string{"up", "--database-url", "postgres://app:secret@db/app?sslmode=bogus"},
			"rheo-migrate up: invalid PostgreSQL URL: cannot parse `postgres://app:xxxxx@db/app?sslmode=bogus`: failed to configure TLS (sslmode is invalid)"},
		{"roles on SQLite", []string{"roles", "--database-url", "sqlite::memory:"}, "rheo-migrate roles: SQLite has no roles; it applies to PostgreSQL only"},
		{"a role prefix on SQLite", []string{"up", "--database-url", "sqlite::memory:", "--role-prefix", "acme_"},
			"rheo-migrate up: SQLite has no roles; --role-prefix applies to PostgreSQL only"},
		{"a role prefix for the SQLite install SQL", []string{"sql", "--sqlite", "--role-prefix", "acme_"},
			"rheo-migrate sql: SQLite has no roles; --role-prefix applies to PostgreSQL only"},
		{"an invalid role prefix", []string{"up", "--database-url", "postgres://app@db/app", "--role-prefix", "Acme"},
			`rheo-migrate up: --role-prefix: role prefix "Acme": want lower-case letters, digits and underscores, beginning with a letter, at most 40 bytes (such as acme_)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCmd(t, tt.args...)
			require.Equal(t, exitUsage, r.code, "status; stdout %q", r.stdout)
			require.Empty(t, r.stdout, "want no stdout")
			first, _, _ := strings.Cut(r.stderr, "\n")
			require.Equal(t, tt.want, first, "stderr %q, want %q then the usage", r.stderr, tt.want)
			require.Contains(t, r.stderr, "Usage:", "stderr %q, want %q then the usage", r.stderr, tt.want)
			require.NotContains(t, r.stderr, "secret", "stderr repeats the password")
		})
	}

	t.Run("help prints the usage on stdout, with the exit statuses", func(t *testing.T) {
		r := runCmd(t, "help")
		require.Zero(t, r.code, "got %+v, want status 0 and the usage on stdout", r)
		require.True(t, strings.HasPrefix(r.stdout, "Usage:"), "got %+v, want status 0 and the usage on stdout", r)
		require.Empty(t, r.stderr, "got %+v, want status 0 and the usage on stdout", r)
		for _, want := range []string{"\n  1  failed", "\n  2  bad command line", "\n  3  status only: a migration is pending",
			"\n  4  status only: the database is newer than this build"} {
			assert.Contains(t, r.stdout, want, "the usage does not document %q", want)
		}
	})
}

func TestFailures(t *testing.T) {
	// A port nothing listens on: take a free one and give it back.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := l.Addr().String()
	require.NoError(t, l.Close())
	missing := filepath.Join(t.TempDir(), "missing.db")

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unreachable database", []string{"up", "--database-url", "postgres://postgres@" + closedAddr + "/app"},
			"rheo-migrate: cannot reach the database at " + closedAddr + ": connection refused"},
		{"an unreachable database in status", []string{"status", "--database-url", "postgresql://postgres@" + closedAddr + "/app"},
			"rheo-migrate: cannot reach the database at " + closedAddr + ": connection refused"},
		{"an SQLite file in a missing directory", []string{"up", "--database-url", "sqlite://" + missing + "/nested.db"},
			"rheo-migrate: cannot open the SQLite database at " + missing + "/nested.db: unable to open database file: no such file or directory"},
		{"status of a missing SQLite file", []string{"status", "--database-url", "sqlite://" + missing},
			"rheo-migrate: no SQLite database at " + missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runCmd(t, tt.args...).wantFailure(t, tt.want)
		})
	}

	_, err = os.Stat(missing)
	require.ErrorIs(t, err, fs.ErrNotExist, "status created %s", missing)
}

func TestPostgres(t *testing.T) {
	url := testdb.NewDatabase(t)
	latest := schemaVersions(t)

	t.Run("status of an empty database, with the URL from DATABASE_URL, exits 3", func(t *testing.T) {
		t.Setenv("DATABASE_URL", url)
		runCmd(t, "status").wantPending(t,
			fmt.Sprintf("schema: version 0 of %d", latest),
			"functions: not current",
			"status: pending, run rheo-migrate up")
	})
	t.Run("roles before up asks for up", func(t *testing.T) {
		runCmd(t, "roles", "--database-url", url).wantFailure(t,
			"rheo-migrate: migrate: failed: roles: Rheo is not installed in this database: run rheo-migrate up first")
	})
	t.Run("up installs", func(t *testing.T) {
		runCmd(t, "up", "--database-url", url).wantOutput(t,
			fmt.Sprintf("schema: version 0 -> %d", latest),
			"functions: installed",
			settledRoles)
	})
	t.Run("up again changes nothing", func(t *testing.T) {
		runCmd(t, "up", "--database-url", url).wantOutput(t,
			fmt.Sprintf("schema: version %d, already current", latest),
			"functions: current",
			settledRoles)
	})
	t.Run("status of an installed database exits 0", func(t *testing.T) {
		runCmd(t, "status", "--database-url", url).wantOutput(t,
			fmt.Sprintf("schema: version %d of %d", latest, latest),
			"functions: current",
			settledRoles,
			"status: up to date")
	})
	t.Run("status of a database one version newer, with this build's functions, exits 4", func(t *testing.T) {
		newer := testdb.NewDatabase(t)
		runCmd(t, "up", "--database-url", newer).wantStatus(t, exitOK,
			fmt.Sprintf("schema: version 0 -> %d", latest), "functions: installed", settledRoles)
		_, err := pgxConnect(t, newer).Exec(context.Background(), "UPDATE rheo.schema_version SET version = version + 1")
		require.NoError(t, err)
		runCmd(t, "status", "--database-url", newer).wantStatus(t, exitNewer,
			fmt.Sprintf("schema: version %d of %d", latest+1, latest),
			"functions: current",
			settledRoles,
			fmt.Sprintf("status: the database is newer than this build (schema version %d, this build's latest %d); use a newer rheo-migrate", latest+1, latest))
		runCmd(t, "up", "--database-url", newer).wantFailure(t, fmt.Sprintf(
			"rheo-migrate: migrate: failed: schema migration: the database is at schema version %d, newer than this build's latest, %d; use a newer build", latest+1, latest))
	})
	t.Run("status of a database with follow-ups left exits 3, and up runs them", func(t *testing.T) {
		left := testdb.NewDatabase(t)
		runCmd(t, "up", "--database-url", left).wantStatus(t, exitOK,
			fmt.Sprintf("schema: version 0 -> %d", latest), "functions: installed", settledRoles)
		_, err := pgxConnect(t, left).Exec(context.Background(), `
CREATE TABLE rheo.upgrade_follow_ups (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, after timestamptz NOT NULL, sql text NOT NULL);
INSERT INTO rheo.upgrade_follow_ups (after, sql) VALUES (now(), 'SELECT 1')`)
		require.NoError(t, err)
		runCmd(t, "status", "--database-url", left).wantPending(t,
			fmt.Sprintf("schema: version %d of %d", latest, latest),
			"functions: current",
			"follow-ups: 1 left by the last upgrade",
			settledRoles,
			"status: pending, run rheo-migrate up")
		runCmd(t, "up", "--database-url", left).wantOutput(t,
			fmt.Sprintf("schema: version %d, already current", latest), "functions: current", settledRoles)
		runCmd(t, "status", "--database-url", left).wantOutput(t,
			fmt.Sprintf("schema: version %d of %d", latest, latest), "functions: current", settledRoles, "status: up to date")
	})
	t.Run("roles on a settled install changes nothing", func(t *testing.T) {
		runCmd(t, "roles", "--database-url", url).wantOutput(t, settledRoles)
	})
	t.Run("roles of an install owned by its installer hands it over", func(t *testing.T) {
		installer := testdb.NewRole(t, "")
		fresh := testdb.NewDatabase(t)
		conn := pgxConnect(t, fresh)
		_, err := conn.Exec(context.Background(), "ALTER DATABASE "+dbName(t, fresh)+" OWNER TO "+installer)
		require.NoError(t, err)
		runCmd(t, "up", "--database-url", testdb.AsRole(t, fresh, installer)).wantOutput(t,
			fmt.Sprintf("schema: version 0 -> %d", latest),
			"functions: installed",
			"roles: Rheo belongs to "+installer+", not rheo_owner; run rheo-migrate roles as a superuser or a role with CREATEROLE")
		runCmd(t, "roles", "--database-url", testdb.AsRole(t, fresh, installer)).wantFailure(t,
			"rheo-migrate: migrate: failed: roles: "+installer+" may not create roles: run rheo-migrate roles as a superuser or a role with CREATEROLE")
		runCmd(t, "roles", "--database-url", fresh).wantOutput(t, settledRoles)
		runCmd(t, "status", "--database-url", testdb.AsRole(t, fresh, installer)).wantFailure(t,
			"rheo-migrate: migrate: failed: read rheo.schema_version: Rheo in this database belongs to rheo_owner and "+
				installer+" may not act as it: run rheo-migrate as a superuser or a role with CREATEROLE, or GRANT rheo_owner TO "+
				installer+" for the run")
	})
	t.Run("a database the server does not have", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(url)
		require.NoError(t, err)
		addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
		runCmd(t, "up", "--database-url", testdb.WithDatabase(t, url, "rheo_no_such_db")).wantFailure(t,
			"rheo-migrate: cannot connect to the database at "+addr+`: database "rheo_no_such_db" does not exist`)
	})
}

// TestRolePrefix runs each command with a role prefix: up installs with
// the prefix's roles and reports them, status and up want the same
// prefix again, roles hands an install over to the prefix's owner, and
// sql prints the install for the prefix.
func TestRolePrefix(t *testing.T) {
	prefix := testdb.NewRolePrefix(t)
	url := testdb.NewDatabase(t)
	latest := schemaVersions(t)
	settled := "roles: " + prefix + "rheo_owner owns Rheo; grant " + prefix + "rheo_reader, " + prefix + "rheo_producer, " +
		prefix + "rheo_consumer, " + prefix + "rheo_admin to login roles"

	runCmd(t, "up", "--database-url", url, "--role-prefix", prefix).wantOutput(t,
		fmt.Sprintf("schema: version 0 -> %d", latest), "functions: installed", settled)
	runCmd(t, "status", "--database-url", url, "--role-prefix", prefix).wantOutput(t,
		fmt.Sprintf("schema: version %d of %d", latest, latest), "functions: current", settled, "status: up to date")
	runCmd(t, "roles", "--database-url", url, "--role-prefix", prefix).wantOutput(t, settled)
	mismatch := "rheo-migrate: Rheo in this database was installed with role prefix " + prefix +
		", not the default ones, and an install keeps its role names: run rheo-migrate with --role-prefix " + prefix
	runCmd(t, "status", "--database-url", url).wantFailure(t, mismatch)
	runCmd(t, "up", "--database-url", url).wantFailure(t, "rheo-migrate: migrate: failed: prepare: "+strings.TrimPrefix(mismatch, "rheo-migrate: "))

	t.Run("roles of an install owned by its installer hands it over to the prefix's owner", func(t *testing.T) {
		installer, other := testdb.NewRole(t, ""), testdb.NewRolePrefix(t)
		fresh := testdb.NewDatabase(t)
		_, err := pgxConnect(t, fresh).Exec(context.Background(), "ALTER DATABASE "+dbName(t, fresh)+" OWNER TO "+installer)
		require.NoError(t, err)
		runCmd(t, "up", "--database-url", testdb.AsRole(t, fresh, installer), "--role-prefix", other).wantOutput(t,
			fmt.Sprintf("schema: version 0 -> %d", latest),
			"functions: installed",
			"roles: "+other+"rheo_owner, "+other+"rheo_reader, "+other+"rheo_producer, "+other+"rheo_consumer, "+other+
				"rheo_admin missing; run rheo-migrate roles as a superuser or a role with CREATEROLE")
		runCmd(t, "roles", "--database-url", fresh, "--role-prefix", other).wantOutput(t, strings.ReplaceAll(settled, prefix, other))
	})

	t.Run("sql prints the install for the prefix", func(t *testing.T) {
		want, err := migrate.PostgresSQLFor(&migrate.Options{RolePrefix: prefix})
		require.NoError(t, err)
		require.NotEqual(t, migrate.PostgresSQL(), want, "migrate.PostgresSQLFor(%s) is the install without a prefix", prefix)
		r := runCmd(t, "sql", "--role-prefix", prefix)
		require.Zero(t, r.code, "status; stderr %q", r.stderr)
		require.Empty(t, r.stderr)
		require.Equal(t, want, r.stdout, "want the %d bytes of migrate.PostgresSQLFor(%s)", len(want), prefix)
	})
}

// settledRoles is the roles line of an install that rheo_owner owns.
const settledRoles = "roles: rheo_owner owns Rheo; grant rheo_reader, rheo_producer, rheo_consumer, rheo_admin to login roles"

// dbName returns the database of url.
func dbName(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	return cfg.Database
}

func pgxConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(context.Background())) })
	return conn
}

func TestSQLite(t *testing.T) {
	latest := schemaVersions(t)
	path := filepath.Join(t.TempDir(), "rheo.db")
	url := "sqlite://" + path // path is absolute: sqlite:///…

	t.Run("up creates and installs the file", func(t *testing.T) {
		runCmd(t, "up", "--database-url", url).wantOutput(t, fmt.Sprintf("schema: version 0 -> %d", latest))
	})
	t.Run("up again changes nothing", func(t *testing.T) {
		runCmd(t, "up", "--database-url", url).wantOutput(t, fmt.Sprintf("schema: version %d, already current", latest))
	})
	t.Run("status of an empty file exits 3, and 0 once installed", func(t *testing.T) {
		empty := filepath.Join(t.TempDir(), "empty.db")
		require.NoError(t, os.WriteFile(empty, nil, 0o644))
		runCmd(t, "status", "--database-url", "sqlite://"+empty).wantPending(t,
			fmt.Sprintf("schema: version 0 of %d", latest), "status: pending, run rheo-migrate up")
		runCmd(t, "status", "--database-url", url).wantOutput(t,
			fmt.Sprintf("schema: version %d of %d", latest, latest), "status: up to date")
	})
	t.Run("status of a file newer than this build exits 4", func(t *testing.T) {
		newer := filepath.Join(t.TempDir(), "newer.db")
		runCmd(t, "up", "--database-url", "sqlite://"+newer).wantOutput(t, fmt.Sprintf("schema: version 0 -> %d", latest))
		db, err := sql.Open(sqlite.DefaultDriverName(), newer)
		require.NoError(t, err)
		_, err = db.Exec("UPDATE rheo_schema_version SET version = version + 1")
		require.NoError(t, err)
		_ = db.Close()
		runCmd(t, "status", "--database-url", "sqlite://"+newer).wantStatus(t, exitNewer,
			fmt.Sprintf("schema: version %d of %d", latest+1, latest),
			fmt.Sprintf("status: the database is newer than this build (schema version %d, this build's latest %d); use a newer rheo-migrate", latest+1, latest))
	})
	t.Run("a relative path is relative to the working directory", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		runCmd(t, "up", "--database-url", "sqlite:relative.db").wantOutput(t, fmt.Sprintf("schema: version 0 -> %d", latest))
		_, err := os.Stat(filepath.Join(dir, "relative.db"))
		require.NoError(t, err)
	})
	t.Run("an in-memory database", func(t *testing.T) {
		runCmd(t, "up", "--database-url", "sqlite::memory:").wantOutput(t, fmt.Sprintf("schema: version 0 -> %d", latest))
	})
}

func TestSQL(t *testing.T) {
	t.Run("prints the PostgreSQL install", func(t *testing.T) {
		r := runCmd(t, "sql")
		require.Zero(t, r.code, "status; stderr %q", r.stderr)
		require.Empty(t, r.stderr)
		require.Equal(t, migrate.PostgresSQL(), r.stdout, "want the %d bytes of migrate.PostgresSQL()", len(migrate.PostgresSQL()))
	})
	t.Run("prints the SQLite install with --sqlite", func(t *testing.T) {
		r := runCmd(t, "sql", "--sqlite")
		require.Zero(t, r.code, "status; stderr %q", r.stderr)
		require.Empty(t, r.stderr)
		require.Equal(t, migrate.SQLiteSQL(), r.stdout, "want the %d bytes of migrate.SQLiteSQL()", len(migrate.SQLiteSQL()))
	})
}

// schemaVersions is the number of schema migrations this build carries.
func schemaVersions(t *testing.T) int {
	t.Helper()
	names, err := fs.Glob(rheosql.Schema, "*.sql")
	require.NoError(t, err, "no schema migrations")
	require.NotEmpty(t, names, "no schema migrations")
	return len(names)
}
