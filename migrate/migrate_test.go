package migrate_test

import (
	"context"
	"database/sql"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/migrate"
	rheosql "github.com/rheo-go/rheo/sql"
)

func TestMigratePostgres(t *testing.T) {
	ctx := context.Background()

	setup := func(t *testing.T) *pgx.Conn {
		t.Helper()
		return migrateConnect(t, testdb.NewDatabase(t))
	}

	t.Run("an empty database is at version 0 with no functions", func(t *testing.T) {
		conn := setup(t)
		applied, latest, err := migrate.PostgresStatus(ctx, conn)
		require.NoError(t, err)
		require.Zero(t, applied, "status = %d of %d, want 0 of %d", applied, latest, migrateSchemaFiles(t))
		require.Equal(t, migrateSchemaFiles(t), latest, "status = %d of %d, want 0 of %d", applied, latest, migrateSchemaFiles(t))
		migrateWantFunctionsCurrent(t, conn, false)
	})

	t.Run("up installs the schema and working functions", func(t *testing.T) {
		conn := setup(t)
		var logs migrateLogs
		require.NoError(t, migrate.Postgres(ctx, conn, &migrate.Options{Logger: slog.New(&logs)}))
		migrateWantCurrent(t, conn)
		for _, name := range []string{"create_stream", "create_group", "append", "append_batch", "read",
			"fetch", "renew", "ack", "ack_batch", "retry", "reject", "replay", "reset_group", "lag",
			"list_streams", "list_groups", "dead_letters", "group_info"} {
			var n int
			require.NoError(t, conn.QueryRow(ctx, `
SELECT count(*) FROM pg_proc WHERE pronamespace = 'rheo'::regnamespace AND proname = $1`, name).Scan(&n))
			assert.EqualValues(t, 1, n, "rheo.%s: %d functions, want 1", name, n)
		}
		// The install works end to end.
		_, err := conn.Exec(ctx, `SELECT rheo.create_stream('orders')`)
		require.NoError(t, err)
		var seq int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT sequence FROM rheo.append('orders', '{"type": "placed"}')`).Scan(&seq))
		require.EqualValues(t, 1, seq, "first append got sequence %d, want 1", seq)
		files, err := fs.Glob(rheosql.Schema, "*.sql")
		require.NoError(t, err)
		var want []string
		for i, name := range files {
			want = append(want, "applying schema migration version="+strconv.Itoa(i+1)+" name="+name)
		}
		got := logs.messages()
		require.Len(t, got, len(want)+1, "log records %q, want %q then a record starting %q", got, want, "installed functions")
		require.Equal(t, want, got[:len(want)], "log records %q, want %q then a record starting %q", got, want, "installed functions")
		require.True(t, strings.HasPrefix(got[len(want)], "installed functions"), "log records %q, want %q then a record starting %q", got, want, "installed functions")
	})

	t.Run("a second up changes nothing", func(t *testing.T) {
		conn := setup(t)
		require.NoError(t, migrate.Postgres(ctx, conn, nil))
		before := migratePostgresState(t, conn)
		var logs migrateLogs
		require.NoError(t, migrate.Postgres(ctx, conn, &migrate.Options{Logger: slog.New(&logs)}))
		after := migratePostgresState(t, conn)
		require.Equal(t, before, after, "second run changed the database:\nbefore %+v\nafter  %+v", before, after)
		got := logs.messages()
		require.Len(t, got, 1, "log records %q, want only \"functions are current\"", got)
		require.True(t, strings.HasPrefix(got[0], "functions are current"), "log records %q, want only \"functions are current\"", got)
	})

	t.Run("two concurrent ups both succeed", func(t *testing.T) {
		url := testdb.NewDatabase(t)
		conns := []*pgx.Conn{migrateConnect(t, url), migrateConnect(t, url), migrateConnect(t, url)}
		errs := migrateAtOnce(conns, func(conn *pgx.Conn) error { return migrate.Postgres(ctx, conn, nil) })
		for i, err := range errs {
			assert.NoError(t, err, "run %d", i)
		}
		migrateWantCurrent(t, conns[0])
	})

	t.Run("changed functions are reinstalled over the installed ones", func(t *testing.T) {
		conn := setup(t)
		require.NoError(t, migrate.Postgres(ctx, conn, nil))
		before := migratePostgresState(t, conn)
		_, err := conn.Exec(ctx, `UPDATE rheo.function_set SET sha256 = 'from an older build'`)
		require.NoError(t, err)
		migrateWantFunctionsCurrent(t, conn, false)
		require.NoError(t, migrate.Postgres(ctx, conn, nil))
		migrateWantCurrent(t, conn)
		after := migratePostgresState(t, conn)
		require.Equal(t, before.definitions, after.definitions, "reinstalling the same files changed the function definitions")
		require.NotEqual(t, before.functionXmins, after.functionXmins, "the functions were not reinstalled")
		require.NotEqual(t, before.installedAt, after.installedAt, "the functions were not reinstalled")
	})

	t.Run("a database newer than this build is refused", func(t *testing.T) {
		conn := setup(t)
		require.NoError(t, migrate.Postgres(ctx, conn, nil))
		_, err := conn.Exec(ctx, `UPDATE rheo.schema_version SET version = version + 1`)
		require.NoError(t, err)
		err = migrate.Postgres(ctx, conn, nil)
		require.ErrorIs(t, err, rheo.ErrFailed, "err = %v, want failed: … newer than this build …", err)
		require.ErrorContains(t, err, "newer than this build", "err = %v, want failed: … newer than this build …", err)
	})

	t.Run("a closed connection is backend_unavailable", func(t *testing.T) {
		conn := setup(t)
		require.NoError(t, conn.Close(ctx))
		err := migrate.Postgres(ctx, conn, nil)
		require.ErrorIs(t, err, rheo.ErrBackendUnavailable, "err = %v, want backend_unavailable", err)
	})

	t.Run("the install SQL gives the same database and reruns as a no-op", func(t *testing.T) {
		viaGo := setup(t)
		require.NoError(t, migrate.Postgres(ctx, viaGo, nil))
		viaSQL := setup(t)
		migrateRunScript(t, viaSQL, migrate.PostgresSQL())
		migrateWantCurrent(t, viaSQL)
		want, got := migratePostgresState(t, viaGo), migratePostgresState(t, viaSQL)
		require.Equal(t, want.definitions, got.definitions, "install SQL differs from migrate.Postgres:\nSQL %+v\nGo  %+v", got, want)
		require.Equal(t, want.tables, got.tables, "install SQL differs from migrate.Postgres:\nSQL %+v\nGo  %+v", got, want)
		require.Equal(t, want.sha256, got.sha256, "install SQL differs from migrate.Postgres:\nSQL %+v\nGo  %+v", got, want)
		require.Equal(t, want.privileges, got.privileges, "install SQL differs from migrate.Postgres:\nSQL %+v\nGo  %+v", got, want)

		migrateRunScript(t, viaSQL, migrate.PostgresSQL())
		again := migratePostgresState(t, viaSQL)
		require.Equal(t, got, again, "rerunning the install SQL changed the database:\nbefore %+v\nafter  %+v", got, again)
		require.NoError(t, migrate.Postgres(ctx, viaSQL, nil))
		again = migratePostgresState(t, viaSQL)
		require.Equal(t, got, again, "migrate.Postgres after the install SQL changed the database:\nbefore %+v\nafter  %+v", got, again)
	})
}

// TestMigratePostgresInstallers installs Rheo as roles of every kind an
// installer can be: a superuser (the other tests), a role with
// CREATEROLE (a managed server's administrator) and a database owner that
// may not create roles.
func TestMigratePostgresInstallers(t *testing.T) {
	ctx := context.Background()

	// installAs makes a database owned by a new login role with the given
	// attributes and returns the role, a connection as it, and one as the
	// superuser.
	installAs := func(t *testing.T, attributes string) (role string, conn, admin *pgx.Conn) {
		t.Helper()
		role = testdb.NewRole(t, attributes)
		url := testdb.NewDatabase(t)
		admin = migrateConnect(t, url)
		_, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{admin.Config().Database}.Sanitize()+
			" OWNER TO "+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
		return role, migrateConnect(t, testdb.AsRole(t, url, role)), admin
	}

	t.Run("an installer with CREATEROLE hands Rheo to rheo_owner and keeps no membership", func(t *testing.T) {
		role, conn, admin := installAs(t, "CREATEROLE")
		require.NoError(t, migrate.Postgres(ctx, conn, nil))
		migrateWantOwnedBy(t, admin, migrate.OwnerRole)
		migrateWantNoMembership(t, admin, role)
		migrateWantCurrent(t, conn)
		before := migratePostgresState(t, admin)
		require.NoError(t, migrate.Postgres(ctx, conn, nil), "second run")
		after := migratePostgresState(t, admin)
		require.Equal(t, before, after, "second run changed the database:\nbefore %+v\nafter  %+v", before, after)
		migrateWantNoMembership(t, admin, role)
	})

	t.Run("the install SQL run with CREATEROLE gives the same database", func(t *testing.T) {
		role, conn, admin := installAs(t, "CREATEROLE")
		migrateRunScript(t, conn, migrate.PostgresSQL())
		migrateWantOwnedBy(t, admin, migrate.OwnerRole)
		migrateWantNoMembership(t, admin, role)
		_, viaGo, viaGoAdmin := installAs(t, "CREATEROLE")
		require.NoError(t, migrate.Postgres(ctx, viaGo, nil))
		got, want := migratePostgresState(t, admin), migratePostgresState(t, viaGoAdmin)
		require.Equal(t, want.privileges, got.privileges, "install SQL privileges differ:\nSQL %s\nGo  %s", got.privileges, want.privileges)
	})

	t.Run("an installer that may not create roles installs Rheo as its own and roles hands it over", func(t *testing.T) {
		role, conn, admin := installAs(t, "")
		var logs migrateLogs
		require.NoError(t, migrate.Postgres(ctx, conn, &migrate.Options{Logger: slog.New(&logs)}))
		warning := role + " may not act as rheo_owner, so Rheo's functions run as " + role
		require.True(t, slices.ContainsFunc(logs.messages(), func(m string) bool { return strings.HasPrefix(m, warning) }), "log records %q, want one starting %q", logs.messages(), warning)
		migrateWantOwnedBy(t, admin, role)
		err := migrate.PostgresRoles(ctx, conn, nil)
		require.ErrorIs(t, err, rheo.ErrFailed, "roles as %s", role)
		require.ErrorContains(t, err, role+" may not create roles", "roles as %s", role)

		require.NoError(t, migrate.PostgresRoles(ctx, admin, nil))
		migrateWantOwnedBy(t, admin, migrate.OwnerRole)
		migrateWantCurrent(t, admin)
		state, err := migrate.PostgresRoleState(ctx, admin)
		require.NoError(t, err, "role state")
		require.True(t, state.Settled(), "role state = %+v, want settled", state)
		// Rheo now belongs to rheo_owner, which the database owner may not
		// act as: it is told so instead of failing on a permission.
		err = migrate.Postgres(ctx, conn, nil)
		require.ErrorIs(t, err, rheo.ErrFailed, "up as %s after roles: err = %v, want failed: Rheo in this database belongs to rheo_owner …", role, err)
		require.ErrorContains(t, err, "Rheo in this database belongs to rheo_owner and "+role+" may not act as it", "up as %s after roles: err = %v, want failed: Rheo in this database belongs to rheo_owner …", role, err)
		_, _, err = migrate.PostgresStatus(ctx, conn)
		require.ErrorContains(t, err, "may not act as it", "status as %s after roles: err = %v, want … may not act as it", role, err)
	})

	t.Run("installs into several databases at once share the roles", func(t *testing.T) {
		conns := []*pgx.Conn{
			migrateConnect(t, testdb.NewDatabase(t)), migrateConnect(t, testdb.NewDatabase(t)),
			migrateConnect(t, testdb.NewDatabase(t)),
		}
		errs := migrateAtOnce(conns, func(conn *pgx.Conn) error { return migrate.Postgres(ctx, conn, nil) })
		for i, err := range errs {
			assert.NoError(t, err, "run %d", i)
			migrateWantOwnedBy(t, conns[i], migrate.OwnerRole)
		}
	})
}

// migrateAtOnce runs run on each target in goroutines released together,
// and returns each one's error.
func migrateAtOnce[T any](targets []T, run func(T) error) []error {
	errs := make([]error, len(targets))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, target := range targets {
		wg.Go(func() {
			<-start
			errs[i] = run(target)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// migrateWantOwnedBy checks that owner owns schema rheo and everything in
// it.
func migrateWantOwnedBy(t *testing.T, conn *pgx.Conn, owner string) {
	t.Helper()
	var others []string
	err := conn.QueryRow(context.Background(), `
SELECT ARRAY(
    SELECT 'schema rheo' FROM pg_namespace n WHERE n.nspname = 'rheo' AND n.nspowner::regrole::text <> $1
    UNION ALL
    SELECT c.oid::regclass::text FROM pg_class c
     WHERE c.relnamespace = 'rheo'::regnamespace AND c.relowner::regrole::text <> $1
    UNION ALL
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'rheo'::regnamespace AND p.proowner::regrole::text <> $1)`, owner).Scan(&others)
	require.NoError(t, err)
	require.Empty(t, others, "not owned by %s", owner)
}

// migrateWantNoMembership checks that role is no member of rheo_owner.
func migrateWantNoMembership(t *testing.T, conn *pgx.Conn, role string) {
	t.Helper()
	var member bool
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT pg_has_role($1, $2, 'MEMBER')`, role, migrate.OwnerRole).Scan(&member))
	require.False(t, member, "%s is still a member of %s", role, migrate.OwnerRole)
}

func TestMigrateSQLite(t *testing.T) {
	ctx := context.Background()

	setup := func(t *testing.T) (*sql.DB, string) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "rheo.db")
		return migrateOpenSQLite(t, path), path
	}

	t.Run("an empty database is at version 0", func(t *testing.T) {
		db, _ := setup(t)
		applied, latest, err := migrate.SQLiteStatus(ctx, db)
		require.NoError(t, err)
		require.Zero(t, applied, "status = %d of %d, want 0 of %d", applied, latest, migrateSchemaFiles(t))
		require.Equal(t, migrateSchemaFiles(t), latest, "status = %d of %d, want 0 of %d", applied, latest, migrateSchemaFiles(t))
	})

	t.Run("migrating twice installs once", func(t *testing.T) {
		db, _ := setup(t)
		require.NoError(t, migrate.SQLite(ctx, db))
		migrateWantSQLiteCurrent(t, db)
		before := migrateSQLiteSchema(t, db)
		require.Contains(t, before, "rheo_events", "no rheo_events table after migrating; schema:\n%s", before)
		require.NoError(t, migrate.SQLite(ctx, db))
		migrateWantSQLiteCurrent(t, db)
		after := migrateSQLiteSchema(t, db)
		require.Equal(t, before, after, "second run changed the schema:\nbefore %s\nafter  %s", before, after)
	})

	t.Run("concurrent runs on one file all succeed", func(t *testing.T) {
		db, path := setup(t)
		dbs := []*sql.DB{db, db, migrateOpenSQLite(t, path)}
		errs := migrateAtOnce(dbs, func(db *sql.DB) error { return migrate.SQLite(ctx, db) })
		for i, err := range errs {
			assert.NoError(t, err, "run %d", i)
		}
		migrateWantSQLiteCurrent(t, db)
	})

	t.Run("the install SQL gives the same schema", func(t *testing.T) {
		viaGo, _ := setup(t)
		require.NoError(t, migrate.SQLite(ctx, viaGo))
		viaSQL, _ := setup(t)
		tx, err := viaSQL.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, migrate.SQLiteSQL())
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		migrateWantSQLiteCurrent(t, viaSQL)
		got, want := migrateSQLiteSchema(t, viaSQL), migrateSQLiteSchema(t, viaGo)
		require.Equal(t, want, got, "install SQL schema differs:\nSQL %s\nGo  %s", got, want)
		require.NoError(t, migrate.SQLite(ctx, viaSQL), "migrate after the install SQL")
	})

	t.Run("a database newer than this build is refused", func(t *testing.T) {
		db, _ := setup(t)
		require.NoError(t, migrate.SQLite(ctx, db))
		_, err := db.ExecContext(ctx, `UPDATE rheo_schema_version SET version = version + 1`)
		require.NoError(t, err)
		err = migrate.SQLite(ctx, db)
		require.ErrorIs(t, err, rheo.ErrFailed, "err = %v, want failed: … newer than this build …", err)
		require.ErrorContains(t, err, "newer than this build", "err = %v, want failed: … newer than this build …", err)
	})
}

// migrateSchemaFiles counts the PostgreSQL schema migrations, which the
// SQLite migrations match version for version.
func migrateSchemaFiles(t *testing.T) int32 {
	t.Helper()
	pg, err := fs.Glob(rheosql.Schema, "*.sql")
	require.NoError(t, err)
	lite, err := fs.Glob(rheosql.SQLite, "*.sql")
	require.NoError(t, err)
	require.Len(t, pg, len(lite), "%d PostgreSQL migrations but %d SQLite ones", len(pg), len(lite))
	for i := range pg {
		require.Equal(t, strings.SplitN(lite[i], "_", 2)[0], strings.SplitN(pg[i], "_", 2)[0], "migration versions differ: %s and %s", pg[i], lite[i])
	}
	return int32(len(pg))
}

func migrateWantCurrent(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	applied, latest, err := migrate.PostgresStatus(context.Background(), conn)
	require.NoError(t, err)
	require.Equal(t, latest, applied, "status = %d of %d, want %d of %d", applied, latest, migrateSchemaFiles(t), migrateSchemaFiles(t))
	require.Equal(t, migrateSchemaFiles(t), latest, "status = %d of %d, want %d of %d", applied, latest, migrateSchemaFiles(t), migrateSchemaFiles(t))
	migrateWantFunctionsCurrent(t, conn, true)
}

func migrateWantFunctionsCurrent(t *testing.T, conn *pgx.Conn, want bool) {
	t.Helper()
	current, err := migrate.PostgresFunctionsCurrent(context.Background(), conn)
	require.NoError(t, err)
	require.Equal(t, want, current, "functions current = %v, want %v", current, want)
}

// migratePostgresState is what an install leaves behind. functionXmins
// changes whenever a function is replaced, even by an identical one.
type migratePgState struct {
	version       int32
	sha256        string
	installedAt   time.Time
	definitions   string
	functionXmins string
	tables        string
	privileges    string // owners and ACLs of the schema and everything in it
}

func migratePostgresState(t *testing.T, conn *pgx.Conn) migratePgState {
	t.Helper()
	var s migratePgState
	err := conn.QueryRow(context.Background(), `
SELECT (SELECT version FROM rheo.schema_version),
       f.sha256, f.installed_at,
       (SELECT string_agg(line, E'\n' ORDER BY line) FROM (
          SELECT p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid)) AS line
          FROM pg_proc p WHERE p.pronamespace = 'rheo'::regnamespace) l),
       (SELECT string_agg(line, E'\n' ORDER BY line) FROM (
          SELECT p.oid::regprocedure::text || ' ' || p.xmin::text AS line
          FROM pg_proc p WHERE p.pronamespace = 'rheo'::regnamespace) l),
       (SELECT string_agg(line, E'\n' ORDER BY line) FROM (
          SELECT c.relname || ' ' || c.relkind::text AS line
          FROM pg_class c WHERE c.relnamespace = 'rheo'::regnamespace) l),
       (SELECT string_agg(line, E'\n' ORDER BY line) FROM (
          SELECT 'schema ' || n.nspowner::regrole::text || ' ' || coalesce(n.nspacl::text, '') AS line
          FROM pg_namespace n WHERE n.nspname = 'rheo'
          UNION ALL
          SELECT c.relname || ' ' || c.relowner::regrole::text || ' ' || coalesce(c.relacl::text, '')
          FROM pg_class c WHERE c.relnamespace = 'rheo'::regnamespace
          UNION ALL
          SELECT p.oid::regprocedure::text || ' ' || p.proowner::regrole::text || ' ' || p.prosecdef::text
                 || ' ' || coalesce(p.proacl::text, '')
          FROM pg_proc p WHERE p.pronamespace = 'rheo'::regnamespace) l)
FROM rheo.function_set f`).Scan(&s.version, &s.sha256, &s.installedAt, &s.definitions, &s.functionXmins, &s.tables, &s.privileges)
	require.NoError(t, err, "read install state")
	return s
}

// migrateRunScript runs a script with the simple protocol in one
// transaction, as psql -1 would.
func migrateRunScript(t *testing.T, conn *pgx.Conn, script string) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), script)
		return err
	})
	if err != nil {
		// DescribeError needs the error: the message is built only then.
		require.FailNow(t, "run install SQL", testdb.DescribeError(err, script))
	}
}

func migrateOpenSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=5000")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func migrateWantSQLiteCurrent(t *testing.T, db *sql.DB) {
	t.Helper()
	applied, latest, err := migrate.SQLiteStatus(context.Background(), db)
	require.NoError(t, err)
	require.Equal(t, latest, applied, "status = %d of %d, want %d of %d", applied, latest, migrateSchemaFiles(t), migrateSchemaFiles(t))
	require.Equal(t, migrateSchemaFiles(t), latest, "status = %d of %d, want %d of %d", applied, latest, migrateSchemaFiles(t), migrateSchemaFiles(t))
}

// migrateSQLiteSchema returns the definitions of everything in db.
func migrateSQLiteSchema(t *testing.T, db *sql.DB) string {
	t.Helper()
	var schema string
	err := db.QueryRow(`
SELECT group_concat(type || ' ' || name || ': ' || coalesce(sql, ''), char(10))
FROM (SELECT type, name, sql FROM sqlite_master ORDER BY type, name)`).Scan(&schema)
	require.NoError(t, err)
	return schema
}

// migrateLogs is a slog.Handler that keeps each record as its message
// followed by its attributes, key=value.
type migrateLogs struct {
	mu    sync.Mutex
	lines []string
}

func (l *migrateLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *migrateLogs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *migrateLogs) WithGroup(string) slog.Handler            { return l }

func (l *migrateLogs) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	return nil
}

func (l *migrateLogs) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// migrateConnect opens a connection that is closed when t ends.
func migrateConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err, "connect")
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(context.Background())) })
	return conn
}
