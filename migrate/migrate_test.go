package migrate_test

import (
	"context"
	"database/sql"
	"errors"
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
		if err != nil {
			t.Fatal(err)
		}
		if applied != 0 || latest != migrateSchemaFiles(t) {
			t.Fatalf("status = %d of %d, want 0 of %d", applied, latest, migrateSchemaFiles(t))
		}
		migrateWantFunctionsCurrent(t, conn, false)
	})

	t.Run("up installs the schema and working functions", func(t *testing.T) {
		conn := setup(t)
		var logs migrateLogs
		if err := migrate.Postgres(ctx, conn, &migrate.Options{Logger: slog.New(&logs)}); err != nil {
			t.Fatal(err)
		}
		migrateWantCurrent(t, conn)
		for _, name := range []string{"create_stream", "create_group", "append", "append_batch", "read",
			"fetch", "renew", "ack", "ack_batch", "retry", "reject", "replay", "reset_group", "lag",
			"list_streams", "list_groups", "dead_letters", "group_info"} {
			var n int
			if err := conn.QueryRow(ctx, `
SELECT count(*) FROM pg_proc WHERE pronamespace = 'rheo'::regnamespace AND proname = $1`, name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("rheo.%s: %d functions, want 1", name, n)
			}
		}
		// The install works end to end.
		if _, err := conn.Exec(ctx, `SELECT rheo.create_stream('orders')`); err != nil {
			t.Fatal(err)
		}
		var seq int64
		if err := conn.QueryRow(ctx, `SELECT sequence FROM rheo.append('orders', '{"type": "placed"}')`).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if seq != 1 {
			t.Fatalf("first append got sequence %d, want 1", seq)
		}
		files, err := fs.Glob(rheosql.Schema, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, name := range files {
			want = append(want, "applying schema migration version="+strconv.Itoa(i+1)+" name="+name)
		}
		if got := logs.messages(); len(got) != len(want)+1 || !slices.Equal(got[:len(want)], want) || !strings.HasPrefix(got[len(want)], "installed functions") {
			t.Fatalf("log records %q, want %q then a record starting %q", got, want, "installed functions")
		}
	})

	t.Run("a second up changes nothing", func(t *testing.T) {
		conn := setup(t)
		if err := migrate.Postgres(ctx, conn, nil); err != nil {
			t.Fatal(err)
		}
		before := migratePostgresState(t, conn)
		var logs migrateLogs
		if err := migrate.Postgres(ctx, conn, &migrate.Options{Logger: slog.New(&logs)}); err != nil {
			t.Fatal(err)
		}
		if after := migratePostgresState(t, conn); after != before {
			t.Fatalf("second run changed the database:\nbefore %+v\nafter  %+v", before, after)
		}
		if got := logs.messages(); len(got) != 1 || !strings.HasPrefix(got[0], "functions are current") {
			t.Fatalf("log records %q, want only \"functions are current\"", got)
		}
	})

	t.Run("two concurrent ups both succeed", func(t *testing.T) {
		url := testdb.NewDatabase(t)
		conns := []*pgx.Conn{migrateConnect(t, url), migrateConnect(t, url), migrateConnect(t, url)}
		errs := make([]error, len(conns))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, conn := range conns {
			wg.Go(func() {
				<-start
				errs[i] = migrate.Postgres(ctx, conn, nil)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		}
		migrateWantCurrent(t, conns[0])
	})

	t.Run("changed functions are reinstalled over the installed ones", func(t *testing.T) {
		conn := setup(t)
		if err := migrate.Postgres(ctx, conn, nil); err != nil {
			t.Fatal(err)
		}
		before := migratePostgresState(t, conn)
		if _, err := conn.Exec(ctx, `UPDATE rheo.function_set SET sha256 = 'from an older build'`); err != nil {
			t.Fatal(err)
		}
		migrateWantFunctionsCurrent(t, conn, false)
		if err := migrate.Postgres(ctx, conn, nil); err != nil {
			t.Fatal(err)
		}
		migrateWantCurrent(t, conn)
		after := migratePostgresState(t, conn)
		if after.definitions != before.definitions {
			t.Fatal("reinstalling the same files changed the function definitions")
		}
		if after.functionXmins == before.functionXmins || after.installedAt == before.installedAt {
			t.Fatal("the functions were not reinstalled")
		}
	})

	t.Run("a database newer than this build is refused", func(t *testing.T) {
		conn := setup(t)
		if err := migrate.Postgres(ctx, conn, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `UPDATE rheo.schema_version SET version = version + 1`); err != nil {
			t.Fatal(err)
		}
		err := migrate.Postgres(ctx, conn, nil)
		if !errors.Is(err, rheo.ErrFailed) || !strings.Contains(err.Error(), "newer than this build") {
			t.Fatalf("err = %v, want failed: … newer than this build …", err)
		}
	})

	t.Run("a closed connection is backend_unavailable", func(t *testing.T) {
		conn := setup(t)
		if err := conn.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := migrate.Postgres(ctx, conn, nil); !errors.Is(err, rheo.ErrBackendUnavailable) {
			t.Fatalf("err = %v, want backend_unavailable", err)
		}
	})

	t.Run("the install SQL gives the same database and reruns as a no-op", func(t *testing.T) {
		viaGo := setup(t)
		if err := migrate.Postgres(ctx, viaGo, nil); err != nil {
			t.Fatal(err)
		}
		viaSQL := setup(t)
		migrateRunScript(t, viaSQL, migrate.PostgresSQL())
		migrateWantCurrent(t, viaSQL)
		want, got := migratePostgresState(t, viaGo), migratePostgresState(t, viaSQL)
		if got.definitions != want.definitions || got.tables != want.tables || got.sha256 != want.sha256 ||
			got.privileges != want.privileges {
			t.Fatalf("install SQL differs from migrate.Postgres:\nSQL %+v\nGo  %+v", got, want)
		}

		migrateRunScript(t, viaSQL, migrate.PostgresSQL())
		if again := migratePostgresState(t, viaSQL); again != got {
			t.Fatalf("rerunning the install SQL changed the database:\nbefore %+v\nafter  %+v", got, again)
		}
		if err := migrate.Postgres(ctx, viaSQL, nil); err != nil {
			t.Fatal(err)
		}
		if again := migratePostgresState(t, viaSQL); again != got {
			t.Fatalf("migrate.Postgres after the install SQL changed the database:\nbefore %+v\nafter  %+v", got, again)
		}
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
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{admin.Config().Database}.Sanitize()+
			" OWNER TO "+pgx.Identifier{role}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		return role, migrateConnect(t, testdb.AsRole(t, url, role)), admin
	}

	t.Run("an installer with CREATEROLE hands Rheo to rheo_owner and keeps no membership", func(t *testing.T) {
		role, conn, admin := installAs(t, "CREATEROLE")
		if err := migrate.Postgres(ctx, conn, nil); err != nil {
			t.Fatal(err)
		}
		migrateWantOwnedBy(t, admin, migrate.OwnerRole)
		migrateWantNoMembership(t, admin, role)
		migrateWantCurrent(t, conn)
		before := migratePostgresState(t, admin)
		if err := migrate.Postgres(ctx, conn, nil); err != nil {
			t.Fatalf("second run: %v", err)
		}
		if after := migratePostgresState(t, admin); after != before {
			t.Fatalf("second run changed the database:\nbefore %+v\nafter  %+v", before, after)
		}
		migrateWantNoMembership(t, admin, role)
	})

	t.Run("the install SQL run with CREATEROLE gives the same database", func(t *testing.T) {
		role, conn, admin := installAs(t, "CREATEROLE")
		migrateRunScript(t, conn, migrate.PostgresSQL())
		migrateWantOwnedBy(t, admin, migrate.OwnerRole)
		migrateWantNoMembership(t, admin, role)
		_, viaGo, viaGoAdmin := installAs(t, "CREATEROLE")
		if err := migrate.Postgres(ctx, viaGo, nil); err != nil {
			t.Fatal(err)
		}
		if got, want := migratePostgresState(t, admin), migratePostgresState(t, viaGoAdmin); got.privileges != want.privileges {
			t.Fatalf("install SQL privileges differ:\nSQL %s\nGo  %s", got.privileges, want.privileges)
		}
	})

	t.Run("an installer that may not create roles installs Rheo as its own and roles hands it over", func(t *testing.T) {
		role, conn, admin := installAs(t, "")
		var logs migrateLogs
		if err := migrate.Postgres(ctx, conn, &migrate.Options{Logger: slog.New(&logs)}); err != nil {
			t.Fatal(err)
		}
		warning := role + " may not act as rheo_owner, so Rheo's functions run as " + role
		if !slices.ContainsFunc(logs.messages(), func(m string) bool { return strings.HasPrefix(m, warning) }) {
			t.Fatalf("log records %q, want one starting %q", logs.messages(), warning)
		}
		migrateWantOwnedBy(t, admin, role)
		if err := migrate.PostgresRoles(ctx, conn, nil); !errors.Is(err, rheo.ErrFailed) ||
			!strings.Contains(err.Error(), role+" may not create roles") {
			t.Fatalf("roles as %s: err = %v, want failed: … may not create roles", role, err)
		}

		if err := migrate.PostgresRoles(ctx, admin, nil); err != nil {
			t.Fatal(err)
		}
		migrateWantOwnedBy(t, admin, migrate.OwnerRole)
		migrateWantCurrent(t, admin)
		state, err := migrate.PostgresRoleState(ctx, admin)
		if err != nil || !state.Settled() {
			t.Fatalf("role state = %+v, %v; want settled", state, err)
		}
		// Rheo now belongs to rheo_owner, which the database owner may not
		// act as: it is told so instead of failing on a permission.
		err = migrate.Postgres(ctx, conn, nil)
		if !errors.Is(err, rheo.ErrFailed) || !strings.Contains(err.Error(), "Rheo in this database belongs to rheo_owner and "+role+" may not act as it") {
			t.Fatalf("up as %s after roles: err = %v, want failed: Rheo in this database belongs to rheo_owner …", role, err)
		}
		if _, _, err := migrate.PostgresStatus(ctx, conn); err == nil || !strings.Contains(err.Error(), "may not act as it") {
			t.Fatalf("status as %s after roles: err = %v, want … may not act as it", role, err)
		}
	})

	t.Run("installs into several databases at once share the roles", func(t *testing.T) {
		conns := []*pgx.Conn{
			migrateConnect(t, testdb.NewDatabase(t)), migrateConnect(t, testdb.NewDatabase(t)),
			migrateConnect(t, testdb.NewDatabase(t)),
		}
		errs := make([]error, len(conns))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, conn := range conns {
			wg.Go(func() {
				<-start
				errs[i] = migrate.Postgres(ctx, conn, nil)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
			migrateWantOwnedBy(t, conns[i], migrate.OwnerRole)
		}
	})
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
	if err != nil {
		t.Fatal(err)
	}
	if len(others) > 0 {
		t.Fatalf("not owned by %s: %v", owner, others)
	}
}

// migrateWantNoMembership checks that role is no member of rheo_owner.
func migrateWantNoMembership(t *testing.T, conn *pgx.Conn, role string) {
	t.Helper()
	var member bool
	if err := conn.QueryRow(context.Background(), `SELECT pg_has_role($1, $2, 'MEMBER')`, role, migrate.OwnerRole).Scan(&member); err != nil {
		t.Fatal(err)
	}
	if member {
		t.Fatalf("%s is still a member of %s", role, migrate.OwnerRole)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		if applied != 0 || latest != migrateSchemaFiles(t) {
			t.Fatalf("status = %d of %d, want 0 of %d", applied, latest, migrateSchemaFiles(t))
		}
	})

	t.Run("migrating twice installs once", func(t *testing.T) {
		db, _ := setup(t)
		if err := migrate.SQLite(ctx, db); err != nil {
			t.Fatal(err)
		}
		migrateWantSQLiteCurrent(t, db)
		before := migrateSQLiteSchema(t, db)
		if !strings.Contains(before, "rheo_events") {
			t.Fatalf("no rheo_events table after migrating; schema:\n%s", before)
		}
		if err := migrate.SQLite(ctx, db); err != nil {
			t.Fatal(err)
		}
		migrateWantSQLiteCurrent(t, db)
		if after := migrateSQLiteSchema(t, db); after != before {
			t.Fatalf("second run changed the schema:\nbefore %s\nafter  %s", before, after)
		}
	})

	t.Run("concurrent runs on one file all succeed", func(t *testing.T) {
		db, path := setup(t)
		dbs := []*sql.DB{db, db, migrateOpenSQLite(t, path)}
		errs := make([]error, len(dbs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, db := range dbs {
			wg.Go(func() {
				<-start
				errs[i] = migrate.SQLite(ctx, db)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		}
		migrateWantSQLiteCurrent(t, db)
	})

	t.Run("the install SQL gives the same schema", func(t *testing.T) {
		viaGo, _ := setup(t)
		if err := migrate.SQLite(ctx, viaGo); err != nil {
			t.Fatal(err)
		}
		viaSQL, _ := setup(t)
		tx, err := viaSQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, migrate.SQLiteSQL()); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		migrateWantSQLiteCurrent(t, viaSQL)
		if got, want := migrateSQLiteSchema(t, viaSQL), migrateSQLiteSchema(t, viaGo); got != want {
			t.Fatalf("install SQL schema differs:\nSQL %s\nGo  %s", got, want)
		}
		if err := migrate.SQLite(ctx, viaSQL); err != nil {
			t.Fatalf("migrate after the install SQL: %v", err)
		}
	})

	t.Run("a database newer than this build is refused", func(t *testing.T) {
		db, _ := setup(t)
		if err := migrate.SQLite(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `UPDATE rheo_schema_version SET version = version + 1`); err != nil {
			t.Fatal(err)
		}
		err := migrate.SQLite(ctx, db)
		if !errors.Is(err, rheo.ErrFailed) || !strings.Contains(err.Error(), "newer than this build") {
			t.Fatalf("err = %v, want failed: … newer than this build …", err)
		}
	})
}

// migrateSchemaFiles counts the PostgreSQL schema migrations, which the
// SQLite migrations match version for version.
func migrateSchemaFiles(t *testing.T) int32 {
	t.Helper()
	pg, err := fs.Glob(rheosql.Schema, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	lite, err := fs.Glob(rheosql.SQLite, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(pg) != len(lite) {
		t.Fatalf("%d PostgreSQL migrations but %d SQLite ones", len(pg), len(lite))
	}
	for i := range pg {
		if strings.SplitN(pg[i], "_", 2)[0] != strings.SplitN(lite[i], "_", 2)[0] {
			t.Fatalf("migration versions differ: %s and %s", pg[i], lite[i])
		}
	}
	return int32(len(pg))
}

func migrateWantCurrent(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	applied, latest, err := migrate.PostgresStatus(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if applied != latest || latest != migrateSchemaFiles(t) {
		t.Fatalf("status = %d of %d, want %d of %d", applied, latest, migrateSchemaFiles(t), migrateSchemaFiles(t))
	}
	migrateWantFunctionsCurrent(t, conn, true)
}

func migrateWantFunctionsCurrent(t *testing.T, conn *pgx.Conn, want bool) {
	t.Helper()
	current, err := migrate.PostgresFunctionsCurrent(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if current != want {
		t.Fatalf("functions current = %v, want %v", current, want)
	}
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
	if err != nil {
		t.Fatalf("read install state: %v", err)
	}
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
		t.Fatalf("run install SQL: %s", testdb.DescribeError(err, script))
	}
}

func migrateOpenSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func migrateWantSQLiteCurrent(t *testing.T, db *sql.DB) {
	t.Helper()
	applied, latest, err := migrate.SQLiteStatus(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if applied != latest || latest != migrateSchemaFiles(t) {
		t.Fatalf("status = %d of %d, want %d of %d", applied, latest, migrateSchemaFiles(t), migrateSchemaFiles(t))
	}
}

// migrateSQLiteSchema returns the definitions of everything in db.
func migrateSQLiteSchema(t *testing.T, db *sql.DB) string {
	t.Helper()
	var schema string
	err := db.QueryRow(`
SELECT group_concat(type || ' ' || name || ': ' || coalesce(sql, ''), char(10))
FROM (SELECT type, name, sql FROM sqlite_master ORDER BY type, name)`).Scan(&schema)
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(context.Background())) })
	return conn
}
