package migrate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/migrate"
)

// TestRolePrefixIsolatesDatabases installs Rheo into two databases of
// one server, A with the default role names and B with a role prefix,
// and checks that neither install's roles reach the other's Rheo,
// although every login role may connect to both (PostgreSQL grants
// CONNECT to PUBLIC): a consumer of A fetches nothing of B, an admin of A
// drops none of B's streams, and the other way round.
func TestRolePrefixIsolatesDatabases(t *testing.T) {
	ctx := context.Background()
	prefix := testdb.NewRolePrefix(t)
	namesB, err := migrate.RoleNamesFor(prefix)
	if err != nil {
		t.Fatal(err)
	}
	login := map[string]string{} // role of an install -> a login role granted it
	for _, role := range []string{migrate.ConsumerRole, migrate.AdminRole, namesB.Consumer, namesB.Admin} {
		login[role] = testdb.NewRole(t, "")
	}
	urlA, urlB := testdb.NewDatabase(t), testdb.NewDatabase(t)
	adminA, adminB := migrateConnect(t, urlA), migrateConnect(t, urlB)
	if err := migrate.Postgres(ctx, adminA, nil); err != nil {
		t.Fatal(err)
	}
	if err := migrate.Postgres(ctx, adminB, &migrate.Options{RolePrefix: prefix}); err != nil {
		t.Fatal(err)
	}
	migrateWantOwnedBy(t, adminB, namesB.Owner)
	for role, app := range login {
		if _, err := adminA.Exec(ctx, "GRANT "+pgx.Identifier{role}.Sanitize()+" TO "+pgx.Identifier{app}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	for _, conn := range []*pgx.Conn{adminA, adminB} {
		if _, err := conn.Exec(ctx, `
SELECT rheo.create_stream('orders', 2);
SELECT rheo.create_group('orders', 'billing');
SELECT rheo.append('orders', '{"n": 1}'::jsonb);`); err != nil {
			t.Fatal(err)
		}
	}

	// as runs sql in database url as the login role granted role, and
	// returns its error.
	as := func(url, role, sql string) error {
		conn := migrateConnect(t, testdb.AsRole(t, url, login[role]))
		_, err := conn.Exec(ctx, sql)
		return err
	}
	const (
		fetch = `SELECT * FROM rheo.fetch('orders', 'billing', 10, 'c1', 30)`
		drop  = `SELECT rheo.drop_stream('orders', true)`
	)
	for _, c := range []struct {
		url, role, sql string
		allowed        bool
	}{
		{urlB, migrate.ConsumerRole, fetch, false},
		{urlB, migrate.AdminRole, drop, false},
		{urlA, namesB.Consumer, fetch, false},
		{urlA, namesB.Admin, drop, false},
		{urlA, migrate.ConsumerRole, fetch, true},
		{urlB, namesB.Consumer, fetch, true},
		{urlB, namesB.Admin, drop, true},
		{urlA, migrate.AdminRole, drop, true},
	} {
		db := map[string]string{urlA: "A", urlB: "B"}[c.url]
		err := as(c.url, c.role, c.sql)
		var pgErr *pgconn.PgError
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s in %s: %s: %v, want it done", c.role, db, c.sql, err)
		case !c.allowed && !(errors.As(err, &pgErr) && pgErr.Code == "42501"):
			t.Errorf("%s in %s: %s: err = %v, want permission denied (42501)", c.role, db, c.sql, err)
		}
	}

	// B grants nothing to a role that is not B's.
	var foreign []string
	if err := adminB.QueryRow(ctx, `
SELECT ARRAY(SELECT DISTINCT a.grantee::regrole::text
  FROM (SELECT n.nspacl AS acl FROM pg_namespace n WHERE n.nspname = 'rheo'
        UNION ALL SELECT c.relacl FROM pg_class c WHERE c.relnamespace = 'rheo'::regnamespace
        UNION ALL SELECT p.proacl FROM pg_proc p WHERE p.pronamespace = 'rheo'::regnamespace) AS o,
       aclexplode(o.acl) AS a
 WHERE a.grantee <> 0 AND NOT a.grantee::regrole::text = ANY ($1))`, namesB.All()).Scan(&foreign); err != nil {
		t.Fatal(err)
	}
	if len(foreign) > 0 {
		t.Errorf("B grants privileges to roles of no prefix %s: %v", prefix, foreign)
	}

	state, err := migrate.PostgresRoleState(ctx, adminB)
	if err != nil || !state.Settled() || state.Prefix != prefix || state.Names != namesB {
		t.Errorf("role state of B = %+v, %v; want settled with prefix %s", state, err, prefix)
	}
	state, err = migrate.PostgresRoleState(ctx, adminA)
	if err != nil || !state.Settled() || state.Prefix != "" || state.Names.Owner != migrate.OwnerRole {
		t.Errorf("role state of A = %+v, %v; want settled with the default names", state, err)
	}
}

// TestRolePrefixIsKept checks that an install keeps its role prefix: a
// run with another one, or none, is refused before it changes anything,
// and a run with the same one changes nothing; that the install script
// for a prefix gives what the Go install gives; and that an invalid
// prefix is refused before the database is touched.
func TestRolePrefixIsKept(t *testing.T) {
	ctx := context.Background()
	prefix, other := testdb.NewRolePrefix(t), testdb.NewRolePrefix(t)
	names, err := migrate.RoleNamesFor(prefix)
	if err != nil {
		t.Fatal(err)
	}
	conn := migrateConnect(t, testdb.NewDatabase(t))
	opts := &migrate.Options{RolePrefix: prefix}
	if err := migrate.Postgres(ctx, conn, opts); err != nil {
		t.Fatal(err)
	}
	before := migratePostgresState(t, conn)
	if err := migrate.Postgres(ctx, conn, opts); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if after := migratePostgresState(t, conn); after != before {
		t.Fatalf("second run changed the database:\nbefore %+v\nafter  %+v", before, after)
	}

	for _, c := range []struct {
		opts *migrate.Options
		want string
	}{
		{nil, "installed with role prefix " + prefix + ", not the default ones"},
		{&migrate.Options{RolePrefix: other}, "installed with role prefix " + prefix + ", not role prefix " + other},
	} {
		if err := migrate.Postgres(ctx, conn, c.opts); !errors.Is(err, rheo.ErrFailed) || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "--role-prefix "+prefix) {
			t.Errorf("up with %+v: err = %v, want failed: … %s … --role-prefix %s", c.opts, err, c.want, prefix)
		}
		if err := migrate.PostgresRoles(ctx, conn, c.opts); !errors.Is(err, rheo.ErrFailed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("roles with %+v: err = %v, want failed: … %s", c.opts, err, c.want)
		}
	}
	script, err := migrate.PostgresSQLFor(&migrate.Options{RolePrefix: other})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, script); return err })
	if err == nil || !strings.Contains(err.Error(), "installed with role prefix "+prefix) {
		t.Errorf("install SQL for prefix %s: err = %v, want … installed with role prefix %s", other, err, prefix)
	}
	var created bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE starts_with(rolname, $1))`, other).Scan(&created); err != nil || created {
		t.Errorf("refused runs left roles of prefix %s: %v, %v", other, created, err)
	}
	if after := migratePostgresState(t, conn); after != before {
		t.Fatalf("refused runs changed the database:\nbefore %+v\nafter  %+v", before, after)
	}

	// A default install is refused a prefix.
	plain := migrateConnect(t, testdb.NewDatabase(t))
	if err := migrate.Postgres(ctx, plain, nil); err != nil {
		t.Fatal(err)
	}
	if err := migrate.Postgres(ctx, plain, opts); !errors.Is(err, rheo.ErrFailed) ||
		!strings.Contains(err.Error(), "installed with the default role names, not role prefix "+prefix+", and an install keeps its role names: run rheo-migrate with no --role-prefix") {
		t.Errorf("up with a prefix on a default install: err = %v", err)
	}

	script, err = migrate.PostgresSQLFor(opts)
	if err != nil {
		t.Fatal(err)
	}
	viaSQL := migrateConnect(t, testdb.NewDatabase(t))
	migrateRunScript(t, viaSQL, script)
	migrateWantOwnedBy(t, viaSQL, names.Owner)
	if got, want := migratePostgresState(t, viaSQL), before; got.privileges != want.privileges {
		t.Errorf("install SQL privileges differ:\nSQL %s\nGo  %s", got.privileges, want.privileges)
	}
	if err := migrate.Postgres(ctx, viaSQL, opts); err != nil {
		t.Errorf("up with the prefix after the install SQL: %v", err)
	}

	for _, bad := range []string{"Acme_", "1acme_", "acme-", `a"b`, strings.Repeat("a", migrate.MaxRolePrefix+1)} {
		empty := migrateConnect(t, testdb.NewDatabase(t))
		if err := migrate.Postgres(ctx, empty, &migrate.Options{RolePrefix: bad}); !errors.Is(err, rheo.ErrInvalidArgument) {
			t.Errorf("up with prefix %q: err = %v, want invalid_argument", bad, err)
		}
		if _, err := migrate.PostgresSQLFor(&migrate.Options{RolePrefix: bad}); !errors.Is(err, rheo.ErrInvalidArgument) {
			t.Errorf("install SQL with prefix %q: err = %v, want invalid_argument", bad, err)
		}
		var schema bool
		if err := empty.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'rheo')`).Scan(&schema); err != nil || schema {
			t.Errorf("up with prefix %q created schema rheo (%v)", bad, err)
		}
	}
}

// TestRolePrefixCreateRole installs with a role prefix as a role with
// CREATEROLE (a managed server's administrator), which cannot read
// Rheo's tables until it acts as the owner role: the install belongs to
// the prefix's owner, the installer keeps no membership, and a run with
// another prefix is refused in words, not with a permission error.
func TestRolePrefixCreateRole(t *testing.T) {
	ctx := context.Background()
	role, prefix := testdb.NewRole(t, "CREATEROLE"), testdb.NewRolePrefix(t)
	names, err := migrate.RoleNamesFor(prefix)
	if err != nil {
		t.Fatal(err)
	}
	url := testdb.NewDatabase(t)
	admin := migrateConnect(t, url)
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{admin.Config().Database}.Sanitize()+
		" OWNER TO "+pgx.Identifier{role}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	conn := migrateConnect(t, testdb.AsRole(t, url, role))
	opts := &migrate.Options{RolePrefix: prefix}
	for run := range 2 {
		if err := migrate.Postgres(ctx, conn, opts); err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		migrateWantOwnedBy(t, admin, names.Owner)
		var member bool
		if err := admin.QueryRow(ctx, `SELECT pg_has_role($1, $2, 'MEMBER')`, role, names.Owner).Scan(&member); err != nil || member {
			t.Fatalf("run %d: %s is a member of %s: %v, %v", run+1, role, names.Owner, member, err)
		}
	}
	migrateWantCurrent(t, conn)
	err = migrate.Postgres(ctx, conn, nil)
	if want := "installed with role prefix " + prefix + ", not the default ones"; !errors.Is(err, rheo.ErrFailed) || !strings.Contains(err.Error(), want) {
		t.Errorf("up without the prefix as %s: err = %v, want failed: … %s", role, err, want)
	}
}
