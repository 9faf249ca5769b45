package migrate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, err)
	login := map[string]string{} // role of an install -> a login role granted it
	for _, role := range []string{migrate.ConsumerRole, migrate.AdminRole, namesB.Consumer, namesB.Admin} {
		login[role] = testdb.NewRole(t, "")
	}
	urlA, urlB := testdb.NewDatabase(t), testdb.NewDatabase(t)
	adminA, adminB := migrateConnect(t, urlA), migrateConnect(t, urlB)
	require.NoError(t, migrate.Postgres(ctx, adminA, nil))
	require.NoError(t, migrate.Postgres(ctx, adminB, &migrate.Options{RolePrefix: prefix}))
	migrateWantOwnedBy(t, adminB, namesB.Owner)
	for role, app := range login {
		_, err := adminA.Exec(ctx, "GRANT "+pgx.Identifier{role}.Sanitize()+" TO "+pgx.Identifier{app}.Sanitize())
		require.NoError(t, err)
	}
	for _, conn := range []*pgx.Conn{adminA, adminB} {
		_, err := conn.Exec(ctx, `
SELECT rheo.create_stream('orders', 2);
SELECT rheo.create_group('orders', 'billing');
SELECT rheo.append('orders', '{"n": 1}'::jsonb);`)
		require.NoError(t, err)
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
		if c.allowed {
			assert.NoError(t, err, "%s in %s: %s: want it done", c.role, db, c.sql)
		} else if assert.ErrorAs(t, err, &pgErr, "%s in %s: %s: want permission denied (42501)", c.role, db, c.sql) {
			assert.Equal(t, "42501", pgErr.Code, "%s in %s: %s: err = %v, want permission denied (42501)", c.role, db, c.sql, err)
		}
	}

	// B grants nothing to a role that is not B's.
	var foreign []string
	require.NoError(t, adminB.QueryRow(ctx, `
SELECT ARRAY(SELECT DISTINCT a.grantee::regrole::text
  FROM (SELECT n.nspacl AS acl FROM pg_namespace n WHERE n.nspname = 'rheo'
        UNION ALL SELECT c.relacl FROM pg_class c WHERE c.relnamespace = 'rheo'::regnamespace
        UNION ALL SELECT p.proacl FROM pg_proc p WHERE p.pronamespace = 'rheo'::regnamespace) AS o,
       aclexplode(o.acl) AS a
 WHERE a.grantee <> 0 AND NOT a.grantee::regrole::text = ANY ($1))`, namesB.All()).Scan(&foreign))
	assert.Empty(t, foreign, "B grants privileges to roles of no prefix %s", prefix)

	state, err := migrate.PostgresRoleState(ctx, adminB)
	assert.NoError(t, err, "role state of B = %+v, %v; want settled with prefix %s", state, err, prefix)
	assert.True(t, state.Settled(), "role state of B = %+v, %v; want settled with prefix %s", state, err, prefix)
	assert.Equal(t, prefix, state.Prefix, "role state of B = %+v, %v; want settled with prefix %s", state, err, prefix)
	assert.Equal(t, namesB, state.Names, "role state of B = %+v, %v; want settled with prefix %s", state, err, prefix)
	state, err = migrate.PostgresRoleState(ctx, adminA)
	assert.NoError(t, err, "role state of A = %+v, %v; want settled with the default names", state, err)
	assert.True(t, state.Settled(), "role state of A = %+v, %v; want settled with the default names", state, err)
	assert.Equal(t, "", state.Prefix, "role state of A = %+v, %v; want settled with the default names", state, err)
	assert.Equal(t, migrate.OwnerRole, state.Names.Owner, "role state of A = %+v, %v; want settled with the default names", state, err)
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
	require.NoError(t, err)
	conn := migrateConnect(t, testdb.NewDatabase(t))
	opts := &migrate.Options{RolePrefix: prefix}
	require.NoError(t, migrate.Postgres(ctx, conn, opts))
	before := migratePostgresState(t, conn)
	require.NoError(t, migrate.Postgres(ctx, conn, opts), "second run")
	after := migratePostgresState(t, conn)
	require.Equal(t, before, after, "second run changed the database:\nbefore %+v\nafter  %+v", before, after)

	for _, c := range []struct {
		opts *migrate.Options
		want string
	}{
		{nil, "installed with role prefix " + prefix + ", not the default ones"},
		{&migrate.Options{RolePrefix: other}, "installed with role prefix " + prefix + ", not role prefix " + other},
	} {
		err := migrate.Postgres(ctx, conn, c.opts)
		assert.ErrorIs(t, err, rheo.ErrFailed, "up with %+v", c.opts)
		assert.ErrorContains(t, err, c.want, "up with %+v", c.opts)
		assert.ErrorContains(t, err, "--role-prefix "+prefix, "up with %+v", c.opts)
		err = migrate.PostgresRoles(ctx, conn, c.opts)
		assert.ErrorIs(t, err, rheo.ErrFailed, "roles with %+v", c.opts)
		assert.ErrorContains(t, err, c.want, "roles with %+v", c.opts)
	}
	script, err := migrate.PostgresSQLFor(&migrate.Options{RolePrefix: other})
	require.NoError(t, err)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, script); return err })
	assert.ErrorContains(t, err, "installed with role prefix "+prefix, "install SQL for prefix %s", other)
	var created bool
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE starts_with(rolname, $1))`, other).Scan(&created)
	assert.NoError(t, err, "refused runs left roles of prefix %s: %v, %v", other, created, err)
	assert.False(t, created, "refused runs left roles of prefix %s: %v, %v", other, created, err)
	after = migratePostgresState(t, conn)
	require.Equal(t, before, after, "refused runs changed the database:\nbefore %+v\nafter  %+v", before, after)

	// A default install is refused a prefix.
	plain := migrateConnect(t, testdb.NewDatabase(t))
	require.NoError(t, migrate.Postgres(ctx, plain, nil))
	err = migrate.Postgres(ctx, plain, opts)
	assert.ErrorIs(t, err, rheo.ErrFailed, "up with a prefix on a default install")
	assert.ErrorContains(t, err, "installed with the default role names, not role prefix "+prefix+", and an install keeps its role names: run rheo-migrate with no --role-prefix",
		"up with a prefix on a default install")

	script, err = migrate.PostgresSQLFor(opts)
	require.NoError(t, err)
	viaSQL := migrateConnect(t, testdb.NewDatabase(t))
	migrateRunScript(t, viaSQL, script)
	migrateWantOwnedBy(t, viaSQL, names.Owner)
	got, want := migratePostgresState(t, viaSQL), before
	assert.Equal(t, want.privileges, got.privileges, "install SQL privileges differ:\nSQL %s\nGo  %s", got.privileges, want.privileges)
	assert.NoError(t, migrate.Postgres(ctx, viaSQL, opts), "up with the prefix after the install SQL")

	for _, bad := range []string{"Acme_", "1acme_", "acme-", `a"b`, strings.Repeat("a", migrate.MaxRolePrefix+1)} {
		empty := migrateConnect(t, testdb.NewDatabase(t))
		err := migrate.Postgres(ctx, empty, &migrate.Options{RolePrefix: bad})
		assert.ErrorIs(t, err, rheo.ErrInvalidArgument, "up with prefix %q: err = %v, want invalid_argument", bad, err)
		_, err = migrate.PostgresSQLFor(&migrate.Options{RolePrefix: bad})
		assert.ErrorIs(t, err, rheo.ErrInvalidArgument, "install SQL with prefix %q: err = %v, want invalid_argument", bad, err)
		var schema bool
		err = empty.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'rheo')`).Scan(&schema)
		assert.NoError(t, err, "up with prefix %q created schema rheo (%v)", bad, err)
		assert.False(t, schema, "up with prefix %q created schema rheo (%v)", bad, err)
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
	require.NoError(t, err)
	url := testdb.NewDatabase(t)
	admin := migrateConnect(t, url)
	_, err = admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{admin.Config().Database}.Sanitize()+
		" OWNER TO "+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	conn := migrateConnect(t, testdb.AsRole(t, url, role))
	opts := &migrate.Options{RolePrefix: prefix}
	for run := range 2 {
		require.NoError(t, migrate.Postgres(ctx, conn, opts), "run %d", run+1)
		migrateWantOwnedBy(t, admin, names.Owner)
		var member bool
		err := admin.QueryRow(ctx, `SELECT pg_has_role($1, $2, 'MEMBER')`, role, names.Owner).Scan(&member)
		require.NoError(t, err, "run %d: %s is a member of %s: %v, %v", run+1, role, names.Owner, member, err)
		require.False(t, member, "run %d: %s is a member of %s: %v, %v", run+1, role, names.Owner, member, err)
	}
	migrateWantCurrent(t, conn)
	err = migrate.Postgres(ctx, conn, nil)
	assert.ErrorIs(t, err, rheo.ErrFailed, "up without the prefix as %s", role)
	assert.ErrorContains(t, err, "installed with role prefix "+prefix+", not the default ones", "up without the prefix as %s", role)
}
