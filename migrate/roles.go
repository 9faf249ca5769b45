package migrate

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Rheo's roles (reference §9). OwnerRole owns the schema, its tables and its
// functions, which are SECURITY DEFINER and so run with its privileges;
// it cannot log in and is granted to no application. Hosts grant one of
// the other four to their login roles (GRANT rheo_consumer TO app).
// ProducerRole and ConsumerRole include ReaderRole; AdminRole includes
// both.
const (
	OwnerRole    = "rheo_owner"
	ReaderRole   = "rheo_reader"
	ProducerRole = "rheo_producer"
	ConsumerRole = "rheo_consumer"
	AdminRole    = "rheo_admin"
)

// Roles lists Rheo's roles, the owner first.
var Roles = []string{OwnerRole, ReaderRole, ProducerRole, ConsumerRole, AdminRole}

// createRolesSQL creates the roles that are missing and the memberships
// between them, when the current role may create roles (a superuser, or
// CREATEROLE); otherwise it changes nothing. Roles are server-wide, so
// installs into several databases of one server share them and may run
// at the same time: a role or membership another install created in the
// meantime is taken as it is.
const createRolesSQL = `DO $rheo_roles$
DECLARE
    v_role   text;
    v_member record;
BEGIN
    IF NOT (SELECT r.rolsuper OR r.rolcreaterole FROM pg_roles r WHERE r.rolname = current_user) THEN
        RETURN;
    END IF;
    FOREACH v_role IN ARRAY ARRAY['rheo_owner', 'rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- created by a concurrent install
            END;
        END IF;
    END LOOP;
    FOR v_member IN
        SELECT m.role, m.member
          FROM (VALUES ('rheo_reader', 'rheo_producer'), ('rheo_reader', 'rheo_consumer'),
                       ('rheo_producer', 'rheo_admin'), ('rheo_consumer', 'rheo_admin')) AS m(role, member)
         WHERE NOT pg_has_role(m.member, m.role, 'MEMBER')
    LOOP
        BEGIN
            EXECUTE format('GRANT %I TO %I', v_member.role, v_member.member);
        EXCEPTION WHEN unique_violation THEN
            NULL;  -- granted by a concurrent install
        END;
    END LOOP;
END
$rheo_roles$`

// handOverSQL gives the schema rheo and everything in it to rheo_owner,
// when that role exists and the current role may act as it (a superuser,
// or a member); otherwise it changes nothing. Indexes, row types and
// identity sequences follow their tables.
const handOverSQL = `DO $rheo_hand_over$
DECLARE
    v_owner  oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = 'rheo_owner');
    v_object record;
BEGIN
    IF v_owner IS NULL OR NOT pg_has_role(current_user, v_owner, 'MEMBER') THEN
        RETURN;
    END IF;
    IF (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'rheo') <> v_owner THEN
        ALTER SCHEMA rheo OWNER TO rheo_owner;
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
        EXECUTE format('ALTER %s %s OWNER TO rheo_owner', v_object.kind, v_object.name);
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

// ownerAccessSQL makes the current role able to act as rheo_owner for
// the length of a run, or refuses the run when that would go wrong:
//
//   - rheo_owner unfit to own definer functions (a superuser, or a role
//     that can log in) is an error;
//   - a superuser, or a member of rheo_owner, can act as it already;
//   - a role with CREATEROLE grants itself membership, which
//     ownerReleaseSQL revokes at the end of the run's transaction, so
//     that no login role stays a member of rheo_owner (and a run that
//     fails rolls the grant back with everything else);
//   - any other role installs Rheo as its own, which is said in a NOTICE,
//     unless Rheo in the database belongs to rheo_owner already: then it
//     could change nothing, which is an error.
const ownerAccessSQL = `DO $rheo_owner_access$
DECLARE
    v_me    record;
    v_owner record;
BEGIN
    SELECT r.oid, r.rolname, r.rolsuper, r.rolcreaterole INTO v_me FROM pg_roles r WHERE r.rolname = current_user;
    SELECT o.oid, o.rolsuper, o.rolcanlogin INTO v_owner FROM pg_roles o WHERE o.rolname = 'rheo_owner';
    IF v_owner.oid IS NULL THEN
        RAISE NOTICE 'rheo: role rheo_owner does not exist and % may not create roles, so Rheo''s functions run as %; run rheo-migrate roles as a superuser or a role with CREATEROLE to create the roles and hand Rheo over to rheo_owner',
            v_me.rolname, v_me.rolname;
        RETURN;
    END IF;
    IF v_owner.rolsuper OR v_owner.rolcanlogin THEN
        RAISE EXCEPTION 'role rheo_owner must not own Rheo''s functions, which run with its privileges, while it %: ALTER ROLE rheo_owner NOSUPERUSER NOLOGIN',
            CASE WHEN v_owner.rolsuper THEN 'is a superuser' ELSE 'can log in' END;
    END IF;
    IF pg_has_role(v_me.oid, v_owner.oid, 'MEMBER') THEN
        RETURN;
    END IF;
    IF v_me.rolcreaterole THEN
        GRANT rheo_owner TO CURRENT_USER;
    ELSIF (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'rheo') = v_owner.oid THEN
        RAISE EXCEPTION 'Rheo in this database belongs to rheo_owner and % may not act as it: run rheo-migrate as a superuser or a role with CREATEROLE, or GRANT rheo_owner TO % for the run',
            v_me.rolname, v_me.rolname;
    ELSE
        RAISE NOTICE 'rheo: % may not act as rheo_owner, so Rheo''s functions run as %; run rheo-migrate roles as a superuser or a role with CREATEROLE to hand Rheo over to rheo_owner',
            v_me.rolname, v_me.rolname;
    END IF;
END
$rheo_owner_access$`

// ownerReleaseSQL ends a run's membership in rheo_owner: a membership the
// current role granted itself is revoked.
const ownerReleaseSQL = `DO $rheo_owner_release$
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members m
                JOIN pg_roles o ON o.oid = m.roleid AND o.rolname = 'rheo_owner'
                JOIN pg_roles r ON r.oid = m.member AND r.rolname = current_user
               WHERE m.grantor = r.oid AND NOT r.rolsuper) THEN
        REVOKE rheo_owner FROM CURRENT_USER;
    END IF;
END
$rheo_owner_release$`

// installer is what the role running a migration may do about Rheo's
// roles, once ownerAccessSQL has run.
type installer struct {
	name       string
	createRole bool     // a superuser, or CREATEROLE
	missing    []string // Rheo roles that do not exist
	asOwner    bool     // may act as rheo_owner: a superuser or a member
}

// readInstaller reads what the current role may do.
func readInstaller(ctx context.Context, tx pgx.Tx) (installer, error) {
	var in installer
	err := tx.QueryRow(ctx, `
SELECT r.rolname, r.rolsuper OR r.rolcreaterole,
       ARRAY(SELECT n FROM unnest($1::text[]) AS n WHERE NOT EXISTS (SELECT FROM pg_roles x WHERE x.rolname = n)),
       coalesce((SELECT pg_has_role(r.oid, o.oid, 'MEMBER') FROM pg_roles o WHERE o.rolname = $2), false)
  FROM pg_roles r
 WHERE r.rolname = current_user`, Roles, OwnerRole).Scan(&in.name, &in.createRole, &in.missing, &in.asOwner)
	return in, err
}

// notice says what an install by this role leaves undone, as a Warn
// record (the install script says it in a NOTICE), or "" when nothing is.
func (in installer) notice() string {
	switch {
	case len(in.missing) > 0:
		return fmt.Sprintf("roles %s do not exist and %s may not create roles, so Rheo's functions run as %s; "+
			"run rheo-migrate roles as a superuser or a role with CREATEROLE to create them and hand Rheo over to %s",
			strings.Join(in.missing, ", "), in.name, in.name, OwnerRole)
	case !in.asOwner:
		return fmt.Sprintf("%s may not act as %s, so Rheo's functions run as %s; "+
			"run rheo-migrate roles as a superuser or a role with CREATEROLE to hand Rheo over to %s",
			in.name, OwnerRole, in.name, OwnerRole)
	}
	return ""
}

// grantsMissingSQL is true when Rheo's roles exist but were not given
// their privileges, as after an install that found no roles: the
// functions must then be installed again.
const grantsMissingSQL = `SELECT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = 'rheo_reader')
       AND NOT has_schema_privilege('rheo_reader', 'rheo', 'USAGE')`

// RoleState is how Rheo's roles stand in a database.
type RoleState struct {
	// Missing lists the roles of Roles that do not exist on the server.
	Missing []string
	// SchemaOwner is the owner of schema rheo, or "" when it does not
	// exist. Once the roles exist it should be OwnerRole.
	SchemaOwner string
}

// Settled reports whether every role exists and rheo_owner owns Rheo.
func (s RoleState) Settled() bool { return len(s.Missing) == 0 && s.SchemaOwner == OwnerRole }

// PostgresRoleState reads how Rheo's roles stand in the database behind
// conn. It reads the catalogs only, which every role may.
func PostgresRoleState(ctx context.Context, conn *pgx.Conn) (RoleState, error) {
	var s RoleState
	var owner *string
	err := conn.QueryRow(ctx, `
SELECT ARRAY(SELECT n FROM unnest($1::text[]) AS n WHERE NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = n)),
       (SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'rheo')`, Roles).Scan(&s.Missing, &owner)
	if err != nil {
		return s, wrapErr(ctx, "read the roles", err, conn.IsClosed())
	}
	if owner != nil {
		s.SchemaOwner = *owner
	}
	return s, nil
}

// keepAccessSQL, run before the hand-over, keeps the access of the roles
// that used Rheo before it belonged to rheo_owner (a release without
// Rheo's roles, where the functions ran with the caller's privileges on
// the tables): each is granted the Rheo role that gives it the same calls
// (reference §9). The owner of the tables, which could do everything, is
// granted rheo_admin; a role that may insert into rheo.streams or
// rheo.groups, rheo_admin too; one that may insert into rheo.events,
// rheo_producer; one that may write rheo.deliveries, rheo_consumer; one
// that may read rheo.events, rheo_reader. Only privileges held directly
// count (a member of such a role gets the new one through it), and
// neither superusers, PUBLIC, pg_ roles nor Rheo's own. The owners are
// kept for keepOwnerAccessSQL in a temporary table. Nothing happens
// unless the transaction set rheo.upgrading to on (Rheo was installed
// before it: upgradingSQL), Rheo does not belong to rheo_owner yet and
// the current role may act as it.
const keepAccessSQL = `DO $rheo_keep_access$
DECLARE
    v record;
BEGIN
    IF current_setting('rheo.upgrading', true) IS DISTINCT FROM 'on'
       OR NOT EXISTS (SELECT FROM pg_roles o WHERE o.rolname = 'rheo_owner')
       OR NOT pg_has_role(current_user, 'rheo_owner', 'MEMBER')
       OR (SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'rheo') = 'rheo_owner' THEN
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
        SELECT DISTINCT x.rolname AS role, m.rheo_role
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
           AND x.rolname NOT IN ('rheo_owner', 'rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin')
           AND x.rolname NOT LIKE 'pg\_%'
           AND NOT pg_has_role(x.oid, m.rheo_role, 'MEMBER')
    LOOP
        EXECUTE format('GRANT %I TO %I', v.rheo_role, v.role);
    END LOOP;
    DROP TABLE IF EXISTS pg_temp.rheo_previous_owners;
    CREATE TEMPORARY TABLE rheo_previous_owners ON COMMIT DROP AS
    SELECT DISTINCT x.rolname AS role
      FROM pg_class c JOIN pg_roles x ON x.oid = c.relowner
     WHERE c.relnamespace = 'rheo'::regnamespace AND c.relkind = 'r'
       AND NOT x.rolsuper AND x.rolname <> 'rheo_owner';
END
$rheo_keep_access$`

// keepOwnerAccessSQL, run after the hand-over, gives the previous owners
// that keepAccessSQL found their privileges on the tables back until the
// follow-ups run: the previous release's calls in flight use them, with
// the caller's privileges. The follow-ups revoke them (see
// createFollowUpsSQL).
const keepOwnerAccessSQL = `DO $rheo_keep_owner_access$
DECLARE
    v record;
BEGIN
    IF to_regclass('pg_temp.rheo_previous_owners') IS NULL THEN
        RETURN;
    END IF;
    FOR v IN SELECT o.role FROM pg_temp.rheo_previous_owners o LOOP
        EXECUTE format('GRANT USAGE ON SCHEMA rheo TO %I', v.role);
        EXECUTE format('GRANT ALL ON ALL TABLES IN SCHEMA rheo TO %I', v.role);
        EXECUTE format('GRANT ALL ON ALL SEQUENCES IN SCHEMA rheo TO %I', v.role);
        ` + createFollowUpsSQL + `;
        INSERT INTO rheo.upgrade_follow_ups (after, sql)
        VALUES (clock_timestamp(), format($f$DO $r$BEGIN
    IF EXISTS (SELECT FROM pg_roles r WHERE r.rolname = %L) THEN
        REVOKE ALL ON ALL TABLES IN SCHEMA rheo FROM %I;
        REVOKE ALL ON ALL SEQUENCES IN SCHEMA rheo FROM %I;
        REVOKE USAGE ON SCHEMA rheo FROM %I;
    END IF;
END$r$$f$, v.role, v.role, v.role, v.role));
    END LOOP;
    DROP TABLE pg_temp.rheo_previous_owners;
END
$rheo_keep_owner_access$`

// upgradingSQL sets rheo.upgrading, for the transaction, to whether Rheo
// was installed before it (a schema version above 0), which keepAccessSQL
// reads. It runs once the version table exists.
const upgradingSQL = `SELECT set_config('rheo.upgrading', CASE WHEN (SELECT version FROM rheo.schema_version) > 0 THEN 'on' ELSE 'off' END, true)`
