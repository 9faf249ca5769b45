package migrate

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo"
)

// Rheo's roles under their default names (reference §9). OwnerRole owns
// the schema, its tables and its functions, which are SECURITY DEFINER
// and so run with its privileges; it cannot log in and is granted to no
// application. Hosts grant one of the other four to their login roles
// (GRANT rheo_consumer TO app). ProducerRole and ConsumerRole include
// ReaderRole; AdminRole includes both. An install with a role prefix
// (Options.RolePrefix) has roles of its own, named by RoleNamesFor.
const (
	OwnerRole    = "rheo_owner"
	ReaderRole   = "rheo_reader"
	ProducerRole = "rheo_producer"
	ConsumerRole = "rheo_consumer"
	AdminRole    = "rheo_admin"
)

// Roles lists Rheo's roles under their default names, the owner first.
var Roles = []string{OwnerRole, ReaderRole, ProducerRole, ConsumerRole, AdminRole}

// RoleNames are the names of Rheo's roles in one install: the default
// names (OwnerRole, …) with the install's role prefix before each.
type RoleNames struct {
	Owner, Reader, Producer, Consumer, Admin string
}

// All lists the names, the owner first, in the order of Roles.
func (n RoleNames) All() []string {
	return []string{n.Owner, n.Reader, n.Producer, n.Consumer, n.Admin}
}

// prefix is the role prefix of the names.
func (n RoleNames) prefix() string { return strings.TrimSuffix(n.Owner, OwnerRole) }

// MaxRolePrefix is the longest role prefix, in bytes: with it the
// longest role name, <prefix>rheo_producer, still fits PostgreSQL's
// 63-byte identifiers.
const MaxRolePrefix = 40

// validPrefix is the form of a role prefix: a name that needs no quoting.
var validPrefix = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// RoleNamesFor returns the names of Rheo's roles in an install with the
// role prefix prefix (Options.RolePrefix): prefix + OwnerRole, and so on;
// "" gives the default names. A prefix is lower-case letters, digits and
// underscores, begins with a letter and is at most MaxRolePrefix bytes
// long; any other is an error that wraps rheo.ErrInvalidArgument.
func RoleNamesFor(prefix string) (RoleNames, error) {
	if prefix != "" && (len(prefix) > MaxRolePrefix || !validPrefix.MatchString(prefix)) {
		return RoleNames{}, rheo.Errorf(rheo.ErrInvalidArgument,
			"role prefix %q: want lower-case letters, digits and underscores, beginning with a letter, at most %d bytes (such as acme_)",
			prefix, MaxRolePrefix)
	}
	return RoleNames{
		Owner:    prefix + OwnerRole,
		Reader:   prefix + ReaderRole,
		Producer: prefix + ProducerRole,
		Consumer: prefix + ConsumerRole,
		Admin:    prefix + AdminRole,
	}, nil
}

// The SQL of the installer reads the run's role prefix from the setting
// rheo.role_prefix, which every transaction of a run sets first
// (setPrefixSQL) and the install script sets at its start, and builds
// the roles' names from it with format('%I'). The prefix an install was
// made with is kept in rheo.role_prefix (createPrefixTableSQL); the
// functions' grants (rheo._access) read it there, never the setting.
const (
	setPrefixSQL = `SELECT set_config('rheo.role_prefix', $1, true)`
	// runPrefix is the run's prefix, in SQL.
	runPrefix = `coalesce(current_setting('rheo.role_prefix', true), '')`
)

// setPrefixLiteral is setPrefixSQL with prefix, which RoleNamesFor has
// accepted (so it needs no quoting beyond the quotes), as a literal: for
// the messages of several statements, which take no parameters, and the
// install script. local false sets it for the session, as the script
// does, so that a script run without a transaction of its own still
// installs the roles it names.
func setPrefixLiteral(prefix string, local bool) string {
	return fmt.Sprintf("SELECT set_config('rheo.role_prefix', '%s', %t)", strings.ReplaceAll(prefix, "'", "''"), local)
}

// rheoNamespace is the oid of schema rheo, in SQL, without the USAGE
// privilege that 'rheo'::regnamespace and to_regclass need.
const rheoNamespace = `(SELECT n.oid FROM pg_namespace n WHERE n.nspname = 'rheo')`

// createPrefixTableSQL records the run's role prefix in a new install,
// in rheo.role_prefix, which it makes when missing and gives to the
// owner role when the schema belongs to it already (an install of a
// release before role prefixes). It runs after ownerAccessSQL, which
// refused a run whose prefix is not the install's.
const createPrefixTableSQL = `DO $rheo_role_prefix$
DECLARE
    v_owner text := ` + runPrefix + ` || 'rheo_owner';
BEGIN
    IF to_regclass('rheo.role_prefix') IS NULL THEN
        CREATE TABLE rheo.role_prefix (
            id     boolean PRIMARY KEY DEFAULT true CHECK (id),
            prefix text    NOT NULL
        );
        INSERT INTO rheo.role_prefix (prefix) VALUES (` + runPrefix + `);
        IF (SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'rheo') = v_owner
           AND pg_has_role(current_user, v_owner, 'MEMBER') THEN
            EXECUTE format('ALTER TABLE rheo.role_prefix OWNER TO %I', v_owner);
        END IF;
    END IF;
END
$rheo_role_prefix$`

// createRolesSQL creates the run's roles that are missing and the
// memberships between them, when the current role may create roles (a
// superuser, or CREATEROLE); otherwise it changes nothing. Roles are
// server-wide, so installs into several databases of one server with the
// same prefix share them and may run at the same time: a role or
// membership another install created in the meantime is taken as it is.
const createRolesSQL = `DO $rheo_roles$
DECLARE
    v_prefix text := ` + runPrefix + `;
    v_role   text;
    v_member record;
BEGIN
    IF NOT (SELECT r.rolsuper OR r.rolcreaterole FROM pg_roles r WHERE r.rolname = current_user) THEN
        RETURN;
    END IF;
    FOREACH v_role IN ARRAY ARRAY['rheo_owner', 'rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin'] LOOP
        v_role := v_prefix || v_role;
        IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- created by a concurrent install
            END;
        END IF;
    END LOOP;
    FOR v_member IN
        SELECT v_prefix || m.role AS role, v_prefix || m.member AS member
          FROM (VALUES ('rheo_reader', 'rheo_producer'), ('rheo_reader', 'rheo_consumer'),
                       ('rheo_producer', 'rheo_admin'), ('rheo_consumer', 'rheo_admin')) AS m(role, member)
         WHERE NOT pg_has_role(v_prefix || m.member, v_prefix || m.role, 'MEMBER')
    LOOP
        BEGIN
            EXECUTE format('GRANT %I TO %I', v_member.role, v_member.member);
        EXCEPTION WHEN unique_violation THEN
            NULL;  -- granted by a concurrent install
        END;
    END LOOP;
    -- On a Citus cluster the owner role logs in: a call running as it
    -- opens the connections between the nodes under its name. It has no
    -- password; the cluster lets it in between its nodes as it lets the
    -- application's roles (docs/citus.md).
    v_role := v_prefix || 'rheo_owner';
    IF ` + citusSQL + ` AND NOT (SELECT r.rolcanlogin FROM pg_roles r WHERE r.rolname = v_role) THEN
        EXECUTE format('ALTER ROLE %I LOGIN', v_role);
    END IF;
END
$rheo_roles$`

// citusRolesSQL makes the run's roles that exist on a Citus coordinator,
// and the memberships among them, on every worker where they are
// missing. The objects and grants Citus copies to the workers name them,
// and Citus makes a role on the workers only when it is created in a
// database with the citus extension: not one made before (in another
// database of the server, or before citus was created). It runs first,
// before its transaction creates or alters anything Citus propagates:
// the workers are asked over connections of their own, which would wait
// for such changes until the transaction ends. The application's login
// roles are the operator's to make there (docs/citus.md). Without citus,
// or for a role that may not create roles, it does nothing.
const citusRolesSQL = `DO $rheo_citus_roles$
DECLARE
    v_prefix  text := ` + runPrefix + `;
    v_command text;
    v_failed  text;
BEGIN
    IF NOT ` + citusSQL + ` OR NOT (SELECT r.rolsuper OR r.rolcreaterole FROM pg_roles r WHERE r.rolname = current_user) THEN
        RETURN;
    END IF;
    -- The roles first, then the memberships among them.
    FOR v_command IN
        SELECT c.command FROM (
            SELECT 1, format('DO $r$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = %L) THEN CREATE ROLE %I %s; END IF; END$r$',
                             r.rolname, r.rolname, CASE WHEN r.rolcanlogin THEN 'LOGIN' ELSE 'NOLOGIN' END)
              FROM pg_roles r
             WHERE r.rolname IN (SELECT v_prefix || x FROM unnest(ARRAY['rheo_owner', 'rheo_reader', 'rheo_producer',
                                                                         'rheo_consumer', 'rheo_admin']) x)
            UNION ALL
            SELECT 2, format('DO $r$BEGIN IF NOT pg_has_role(%L, %L, ''MEMBER'') THEN GRANT %I TO %I; END IF; END$r$',
                             m.rolname, r.rolname, r.rolname, m.rolname)
              FROM pg_auth_members a
              JOIN pg_roles r ON r.oid = a.roleid
              JOIN pg_roles m ON m.oid = a.member
             WHERE (r.rolname, m.rolname) IN (SELECT v_prefix || x.role, v_prefix || x.member
                                                FROM (VALUES ('rheo_reader', 'rheo_producer'), ('rheo_reader', 'rheo_consumer'),
                                                             ('rheo_producer', 'rheo_admin'), ('rheo_consumer', 'rheo_admin'))
                                                     AS x(role, member))
        ) AS c(step, command)
        ORDER BY c.step
    LOOP
        SELECT string_agg(format('%s:%s: %s', w.nodename, w.nodeport, w.result), '; ') INTO v_failed
          FROM run_command_on_workers('SET citus.enable_ddl_propagation = off; ' || v_command) w
         WHERE NOT w.success;
        IF v_failed IS NOT NULL THEN
            RAISE EXCEPTION 'rheo: could not make Rheo''s roles on every Citus worker: %', v_failed;
        END IF;
    END LOOP;
END
$rheo_citus_roles$`

// citusSQL is true in a database with the citus extension: Rheo there
// is installed distributed (docs/citus.md).
const citusSQL = `EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus')`

// handOverSQL gives the schema rheo and everything in it to the run's
// owner role, when that role exists and the current role may act as it
// (a superuser, or a member); otherwise it changes nothing. Indexes, row
// types and identity sequences follow their tables.
const handOverSQL = `DO $rheo_hand_over$
DECLARE
    v_name   text := ` + runPrefix + ` || 'rheo_owner';
    v_owner  oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = v_name);
    v_object record;
BEGIN
    IF v_owner IS NULL OR NOT pg_has_role(current_user, v_owner, 'MEMBER') THEN
        RETURN;
    END IF;
    IF (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'rheo') <> v_owner THEN
        EXECUTE format('ALTER SCHEMA rheo OWNER TO %I', v_name);
    END IF;
    FOR v_object IN
        SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                              WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'c' THEN 'TYPE' ELSE 'TABLE' END AS kind,
               c.oid::regclass::text AS name
          FROM pg_class c
         WHERE c.relnamespace = 'rheo'::regnamespace AND c.relowner <> v_owner
           AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S', 'c')
           AND NOT (c.relkind = 'S'
                    AND EXISTS (SELECT FROM pg_depend d
                                 WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
        UNION ALL
        SELECT 'TYPE', t.oid::regtype::text
          FROM pg_type t
         WHERE t.typnamespace = 'rheo'::regnamespace AND t.typowner <> v_owner AND t.typtype IN ('d', 'e', 'r', 'm')
        UNION ALL
        SELECT 'ROUTINE', p.oid::regprocedure::text
          FROM pg_proc p
         WHERE p.pronamespace = 'rheo'::regnamespace AND p.proowner <> v_owner
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO %I', v_object.kind, v_object.name, v_name);
    END LOOP;
END
$rheo_hand_over$`

// handOverRelationsSQL is handOverSQL without the routines: the part
// that locks tables, which the switch runs under its locks.
var handOverRelationsSQL = strings.Replace(handOverSQL, `
        UNION ALL
        SELECT 'ROUTINE', p.oid::regprocedure::text
          FROM pg_proc p
         WHERE p.pronamespace = 'rheo'::regnamespace AND p.proowner <> v_owner`, "", 1)

// ownerAccessSQL refuses a run whose role prefix is not the one the
// install was made with (see installedPrefixSQL's cases), then makes the
// current role able to act as the run's owner role for the length of a
// run, or refuses the run when that would go wrong:
//
//   - an owner role unfit to own definer functions (a superuser, or a
//     role that can log in) is an error;
//   - a superuser, or a member of the owner role, can act as it already;
//   - a role with CREATEROLE grants itself membership, which
//     ownerReleaseSQL revokes at the end of the run's transaction, so
//     that no login role stays a member of the owner role (and a run
//     that fails rolls the grant back with everything else);
//   - any other role installs Rheo as its own, which is said in a NOTICE,
//     unless Rheo in the database belongs to the owner role already: then
//     it could change nothing, which is an error.
const ownerAccessSQL = `DO $rheo_owner_access$
DECLARE
    v_prefix    text := ` + runPrefix + `;
    v_name      text := v_prefix || 'rheo_owner';
    v_installed text;
    v_me        record;
    v_owner     record;
BEGIN
` + installedPrefixSQL + `
    IF v_installed IS DISTINCT FROM v_prefix AND v_installed IS NOT NULL THEN
        RAISE EXCEPTION 'Rheo in this database was installed with %, not %, and an install keeps its role names: run rheo-migrate with %',
            CASE v_installed WHEN '' THEN 'the default role names' ELSE format('role prefix %s', v_installed) END,
            CASE v_prefix WHEN '' THEN 'the default ones' ELSE format('role prefix %s', v_prefix) END,
            CASE v_installed WHEN '' THEN 'no --role-prefix' ELSE format('--role-prefix %s', v_installed) END;
    END IF;
    SELECT r.oid, r.rolname, r.rolsuper, r.rolcreaterole INTO v_me FROM pg_roles r WHERE r.rolname = current_user;
    SELECT o.oid, o.rolsuper, o.rolcanlogin INTO v_owner FROM pg_roles o WHERE o.rolname = v_name;
    IF v_owner.oid IS NULL THEN
        RAISE NOTICE 'rheo: role % does not exist and % may not create roles, so Rheo''s functions run as %; run rheo-migrate roles as a superuser or a role with CREATEROLE to create the roles and hand Rheo over to %',
            v_name, v_me.rolname, v_me.rolname, v_name;
        RETURN;
    END IF;
    IF v_owner.rolsuper OR (v_owner.rolcanlogin AND NOT ` + citusSQL + `) THEN
        RAISE EXCEPTION 'role % must not own Rheo''s functions, which run with its privileges, while it %: ALTER ROLE % NOSUPERUSER NOLOGIN',
            v_name, CASE WHEN v_owner.rolsuper THEN 'is a superuser' ELSE 'can log in' END, v_name;
    END IF;
    IF pg_has_role(v_me.oid, v_owner.oid, 'MEMBER') THEN
        RETURN;
    END IF;
    IF v_me.rolcreaterole THEN
        EXECUTE format('GRANT %I TO CURRENT_USER', v_name);
    ELSIF (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'rheo') = v_owner.oid THEN
        RAISE EXCEPTION 'Rheo in this database belongs to % and % may not act as it: run rheo-migrate as a superuser or a role with CREATEROLE, or GRANT % TO % for the run',
            v_name, v_me.rolname, v_name, v_me.rolname;
    ELSE
        RAISE NOTICE 'rheo: % may not act as %, so Rheo''s functions run as %; run rheo-migrate roles as a superuser or a role with CREATEROLE to hand Rheo over to %',
            v_me.rolname, v_name, v_me.rolname, v_name;
    END IF;
END
$rheo_owner_access$`

// installedPrefixSQL, a part of a PL/pgSQL block, sets v_installed to the
// role prefix Rheo in the database was installed with, as far as the
// current role can tell, or leaves it NULL when Rheo is not installed:
// the prefix recorded in rheo.role_prefix when the role may read it; the
// empty prefix when Rheo was installed by a release before role prefixes (a version
// table and no rheo.role_prefix); otherwise the prefix of the schema's
// owner when that is an owner role of another prefix (<prefix>rheo_owner).
// It reads the catalogs and nothing the role may not read (to_regclass
// would fail without USAGE on the schema).
const installedPrefixSQL = `    IF EXISTS (SELECT FROM pg_class c WHERE c.relnamespace = ` + rheoNamespace + ` AND c.relname = 'role_prefix') THEN
        IF has_schema_privilege(` + rheoNamespace + `, 'USAGE')
           AND has_table_privilege((SELECT c.oid FROM pg_class c WHERE c.relnamespace = ` + rheoNamespace + ` AND c.relname = 'role_prefix'), 'SELECT') THEN
            EXECUTE 'SELECT prefix FROM rheo.role_prefix' INTO v_installed;
        END IF;
    ELSIF EXISTS (SELECT FROM pg_class c WHERE c.relnamespace = ` + rheoNamespace + ` AND c.relname = 'schema_version') THEN
        v_installed := '';
    END IF;
    IF v_installed IS NULL THEN
        v_installed := (SELECT left(o.rolname, -length('rheo_owner'))
                          FROM pg_namespace n JOIN pg_roles o ON o.oid = n.nspowner
                         WHERE n.nspname = 'rheo' AND o.rolname LIKE '%rheo\_owner' AND (NOT o.rolcanlogin OR ` + citusSQL + `));
    END IF;
`

// ownerReleaseSQL ends a run's membership in the owner role: a
// membership the current role granted itself is revoked.
const ownerReleaseSQL = `DO $rheo_owner_release$
DECLARE
    v_name text := ` + runPrefix + ` || 'rheo_owner';
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members m
                JOIN pg_roles o ON o.oid = m.roleid AND o.rolname = v_name
                JOIN pg_roles r ON r.oid = m.member AND r.rolname = current_user
               WHERE m.grantor = r.oid AND NOT r.rolsuper) THEN
        EXECUTE format('REVOKE %I FROM CURRENT_USER', v_name);
    END IF;
END
$rheo_owner_release$`

// installer is what the role running a migration may do about Rheo's
// roles, once ownerAccessSQL has run.
type installer struct {
	name       string
	createRole bool     // a superuser, or CREATEROLE
	missing    []string // the run's roles that do not exist
	asOwner    bool     // may act as the owner role: a superuser or a member
	roles      RoleNames
}

// readInstaller reads what the current role may do about the roles
// names.
func readInstaller(ctx context.Context, tx pgx.Tx, names RoleNames) (installer, error) {
	in := installer{roles: names}
	err := tx.QueryRow(ctx, `
SELECT r.rolname, r.rolsuper OR r.rolcreaterole,
       ARRAY(SELECT n FROM unnest($1::text[]) AS n WHERE NOT EXISTS (SELECT FROM pg_roles x WHERE x.rolname = n)),
       coalesce((SELECT pg_has_role(r.oid, o.oid, 'MEMBER') FROM pg_roles o WHERE o.rolname = $2), false)
  FROM pg_roles r
 WHERE r.rolname = current_user`, names.All(), names.Owner).Scan(&in.name, &in.createRole, &in.missing, &in.asOwner)
	return in, err
}

// notice says what an install by this role leaves undone, as a Warn
// record (the install script says it in a NOTICE), or "" when nothing is.
func (in installer) notice() string {
	switch {
	case len(in.missing) > 0:
		return fmt.Sprintf("roles %s do not exist and %s may not create roles, so Rheo's functions run as %s; "+
			"run rheo-migrate roles as a superuser or a role with CREATEROLE to create them and hand Rheo over to %s",
			strings.Join(in.missing, ", "), in.name, in.name, in.roles.Owner)
	case !in.asOwner:
		return fmt.Sprintf("%s may not act as %s, so Rheo's functions run as %s; "+
			"run rheo-migrate roles as a superuser or a role with CREATEROLE to hand Rheo over to %s",
			in.name, in.roles.Owner, in.name, in.roles.Owner)
	}
	return ""
}

// grantsMissingSQL is true when the run's roles exist but were not given
// their privileges, as after an install that found no roles: the
// functions must then be installed again.
const grantsMissingSQL = `SELECT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = ` + runPrefix + ` || 'rheo_reader')
       AND NOT has_schema_privilege(` + runPrefix + ` || 'rheo_reader', 'rheo', 'USAGE')`

// RoleState is how Rheo's roles stand in a database.
type RoleState struct {
	// Prefix is the role prefix Rheo in the database was installed with
	// (Options.RolePrefix): "" for the default names, and when Rheo is
	// not installed.
	Prefix string
	// Names are the install's roles, named with Prefix.
	Names RoleNames
	// Missing lists the roles of Names that do not exist on the server.
	Missing []string
	// SchemaOwner is the owner of schema rheo, or "" when it does not
	// exist. Once the roles exist it should be Names.Owner.
	SchemaOwner string
}

// Settled reports whether every role exists and the install's owner
// role owns Rheo.
func (s RoleState) Settled() bool { return len(s.Missing) == 0 && s.SchemaOwner == s.Names.Owner }

// PostgresRoleState reads how Rheo's roles stand in the database behind
// conn: the role prefix it was installed with, as the current role can
// tell it (see installedPrefix), and the catalogs, which every role may
// read.
func PostgresRoleState(ctx context.Context, conn *pgx.Conn) (RoleState, error) {
	var s RoleState
	prefix, err := installedPrefix(ctx, conn)
	if err != nil {
		return s, wrapErr(ctx, "read the role prefix", err, conn.IsClosed())
	}
	if prefix != nil {
		s.Prefix = *prefix
	}
	if s.Names, err = RoleNamesFor(s.Prefix); err != nil {
		return s, wrapErr(ctx, "read the role prefix", err, false)
	}
	var owner *string
	err = conn.QueryRow(ctx, `
SELECT ARRAY(SELECT n FROM unnest($1::text[]) AS n WHERE NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = n)),
       (SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'rheo')`, s.Names.All()).Scan(&s.Missing, &owner)
	if err != nil {
		return s, wrapErr(ctx, "read the roles", err, conn.IsClosed())
	}
	if owner != nil {
		s.SchemaOwner = *owner
	}
	return s, nil
}

// installedPrefix reads the role prefix Rheo in the database behind q
// was installed with, as far as the current role can tell, by the rules
// of installedPrefixSQL; nil when it cannot tell, as when Rheo is not
// installed.
func installedPrefix(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (*string, error) {
	var table, readable, version bool
	var ownerPrefix *string
	if err := q.QueryRow(ctx, `
SELECT p.oid IS NOT NULL,
       coalesce(has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(p.oid, 'SELECT'), false),
       EXISTS (SELECT FROM pg_class c WHERE c.relnamespace = n.oid AND c.relname = 'schema_version'),
       (SELECT left(o.rolname, -length('rheo_owner')) FROM pg_roles o
         WHERE o.oid = n.nspowner AND o.rolname LIKE '%rheo\_owner' AND (NOT o.rolcanlogin OR `+citusSQL+`))
  FROM (SELECT) AS one
  LEFT JOIN pg_namespace n ON n.nspname = 'rheo'
  LEFT JOIN pg_class p ON p.relnamespace = n.oid AND p.relname = 'role_prefix'`).Scan(&table, &readable, &version, &ownerPrefix); err != nil {
		return nil, err
	}
	switch {
	case table && readable:
		var prefix string
		err := q.QueryRow(ctx, `SELECT prefix FROM rheo.role_prefix`).Scan(&prefix)
		return &prefix, err
	case !table && version:
		return new(""), nil
	}
	return ownerPrefix, nil
}

// keepAccessSQL, run before the hand-over, keeps the access of the roles
// that used Rheo before it belonged to the owner role (a release without
// Rheo's roles, where the functions ran with the caller's privileges on
// the tables): each is granted the run's Rheo role that gives it the same calls
// (reference §9). The owner of the tables, which could do everything, is
// granted rheo_admin; a role that may insert into rheo.streams or
// rheo.groups, rheo_admin too; one that may insert into rheo.events,
// rheo_producer; one that may write rheo.deliveries, rheo_consumer; one
// that may read rheo.events, rheo_reader. Only privileges held directly
// count (a member of such a role gets the new one through it), and
// neither superusers, PUBLIC, pg_ roles nor Rheo's own. The owners are
// kept for keepOwnerAccessSQL in a temporary table. Nothing happens
// unless the transaction set rheo.upgrading to on (Rheo was installed
// before it: upgradingSQL), Rheo does not belong to the owner role yet
// and the current role may act as it. The role names below are the
// default ones, with the run's prefix put before them.
const keepAccessSQL = `DO $rheo_keep_access$
DECLARE
    v_prefix text := ` + runPrefix + `;
    v_name   text := v_prefix || 'rheo_owner';
    v        record;
BEGIN
    IF current_setting('rheo.upgrading', true) IS DISTINCT FROM 'on'
       OR NOT EXISTS (SELECT FROM pg_roles o WHERE o.rolname = v_name)
       OR NOT pg_has_role(current_user, v_name, 'MEMBER')
       OR (SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'rheo') = v_name THEN
        RETURN;
    END IF;
    FOR v IN
        WITH rel AS (
            SELECT c.relname, c.relowner, c.relacl
              FROM pg_class c
             WHERE c.relnamespace = 'rheo'::regnamespace AND c.relkind = 'r'
        ), held AS (
            SELECT r.relowner AS role, r.relname, 'OWNER' AS privilege FROM rel r
            UNION ALL
            SELECT a.grantee, r.relname, a.privilege_type FROM rel r, aclexplode(r.relacl) AS a
        )
        SELECT DISTINCT x.rolname AS role, v_prefix || m.rheo_role AS rheo_role
          FROM held h
          CROSS JOIN LATERAL (SELECT CASE
                   WHEN h.privilege = 'OWNER' THEN 'rheo_admin'
                   WHEN h.relname IN ('streams', 'groups') AND h.privilege = 'INSERT' THEN 'rheo_admin'
                   WHEN h.relname = 'events' AND h.privilege = 'INSERT' THEN 'rheo_producer'
                   WHEN h.relname = 'deliveries' AND h.privilege IN ('INSERT', 'UPDATE', 'DELETE') THEN 'rheo_consumer'
                   WHEN h.relname = 'events' AND h.privilege = 'SELECT' THEN 'rheo_reader'
                 END AS rheo_role) AS m
          JOIN pg_roles x ON x.oid = h.role
         WHERE m.rheo_role IS NOT NULL AND NOT x.rolsuper
           AND x.rolname NOT IN (SELECT v_prefix || r
                                   FROM unnest(ARRAY['rheo_owner', 'rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin']) AS r)
           AND x.rolname NOT LIKE 'pg\_%'
           AND NOT pg_has_role(x.oid, v_prefix || m.rheo_role, 'MEMBER')
    LOOP
        EXECUTE format('GRANT %I TO %I', v.rheo_role, v.role);
    END LOOP;
    DROP TABLE IF EXISTS pg_temp.rheo_previous_owners;
    CREATE TEMPORARY TABLE rheo_previous_owners ON COMMIT DROP AS
    SELECT DISTINCT x.rolname AS role
      FROM pg_class c JOIN pg_roles x ON x.oid = c.relowner
     WHERE c.relnamespace = 'rheo'::regnamespace AND c.relkind = 'r'
       AND NOT x.rolsuper AND x.rolname <> v_name;
END
$rheo_keep_access$`

// keepOwnerAccessSQL, run after the hand-over, gives the previous owners
// that keepAccessSQL found their privileges on the tables back until the
// follow-ups run: the previous release's calls in flight use them, with
// the caller's privileges. The follow-ups revoke them (see
// createFollowUpsSQL).
var keepOwnerAccessSQL = keepUntilFollowUpsSQL("rheo_previous_owners",
	[]string{
		"GRANT USAGE ON SCHEMA rheo TO %I",
		"GRANT ALL ON ALL TABLES IN SCHEMA rheo TO %I",
		"GRANT ALL ON ALL SEQUENCES IN SCHEMA rheo TO %I",
	},
	[]string{
		"REVOKE ALL ON ALL TABLES IN SCHEMA rheo FROM %I",
		"REVOKE ALL ON ALL SEQUENCES IN SCHEMA rheo FROM %I",
		"REVOKE USAGE ON SCHEMA rheo FROM %I",
	})

// noteRoutineOwnersSQL, run in the functions' install before the
// hand-over of the routines, keeps in a temporary table the roles that
// owned routines of schema rheo before they belonged to the owner role
// (a release without Rheo's roles, whose functions ran with the caller's
// privileges): neither superusers, pg_ roles nor Rheo's own.
const noteRoutineOwnersSQL = `DO $rheo_note_routines$
DECLARE
    v_prefix text := ` + runPrefix + `;
BEGIN
    DROP TABLE IF EXISTS pg_temp.rheo_previous_routine_owners;
    CREATE TEMPORARY TABLE rheo_previous_routine_owners ON COMMIT DROP AS
    SELECT DISTINCT x.rolname AS role
      FROM pg_proc p JOIN pg_roles x ON x.oid = p.proowner
     WHERE p.pronamespace = 'rheo'::regnamespace AND NOT x.rolsuper AND x.rolname NOT LIKE 'pg\_%'
       AND x.rolname NOT IN (SELECT v_prefix || r
                               FROM unnest(ARRAY['rheo_owner', 'rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin']) AS r);
END
$rheo_note_routines$`

// keepRoutineAccessSQL, run after the functions' install, gives the
// previous owners that noteRoutineOwnersSQL found EXECUTE on every
// routine of schema rheo until the follow-ups revoke it: the previous
// release's calls in flight run with the caller's privileges and call
// helpers that now belong to the owner role, which grants EXECUTE on
// them to nobody else, and whose new bodies may call helpers the
// previous release did not have. It is no more than those owners could
// do before the upgrade.
var keepRoutineAccessSQL = keepUntilFollowUpsSQL("rheo_previous_routine_owners",
	[]string{"GRANT EXECUTE ON ALL ROUTINES IN SCHEMA rheo TO %I"},
	[]string{"REVOKE EXECUTE ON ALL ROUTINES IN SCHEMA rheo FROM %I"})

// keepUntilFollowUpsSQL is a DO block that runs grants (statements of
// Rheo's own, %I standing for the role) for each role of the temporary
// table owners (its column role) and records a follow-up that runs
// revokes (likewise) for that role, if it still exists; then it drops
// the table. Without the table it does nothing.
func keepUntilFollowUpsSQL(owners string, grants, revokes []string) string {
	var b strings.Builder
	b.WriteString(`DO $rheo_keep$
DECLARE
    v record;
BEGIN
    IF to_regclass('pg_temp.` + owners + `') IS NULL THEN
        RETURN;
    END IF;
    FOR v IN SELECT o.role FROM pg_temp.` + owners + ` o LOOP
`)
	for _, g := range grants {
		b.WriteString("        EXECUTE format('" + g + "', v.role);\n")
	}
	b.WriteString(`        ` + createFollowUpsSQL + `;
        INSERT INTO rheo.upgrade_follow_ups (after, sql)
        VALUES (clock_timestamp(), format($f$DO $r$BEGIN
    IF EXISTS (SELECT FROM pg_roles r WHERE r.rolname = %L) THEN
`)
	for _, r := range revokes {
		b.WriteString("        " + r + ";\n")
	}
	b.WriteString(`    END IF;
END$r$$f$, v.role` + strings.Repeat(", v.role", len(revokes)) + `));
    END LOOP;
    DROP TABLE pg_temp.` + owners + `;
END
$rheo_keep$`)
	return b.String()
}

// upgradingSQL sets rheo.upgrading, for the transaction, to whether Rheo
// was installed before it (a schema version above 0), which keepAccessSQL
// reads. It runs once the version table exists.
const upgradingSQL = `SELECT set_config('rheo.upgrading', CASE WHEN (SELECT version FROM rheo.schema_version) > 0 THEN 'on' ELSE 'off' END, true)`
