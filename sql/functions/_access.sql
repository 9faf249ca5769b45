-- Sets who holds privilege on object: nobody but its owner, plus the
-- listed roles. Every function file ends with a call of it, so that a
-- function's privileges read beside its body (see docs/security.md).
--
-- roles are Rheo's roles by their default names (rheo_reader, …); an
-- install with a role prefix (reference §11) grants to its own roles,
-- the names with the prefix recorded in rheo.role_prefix before them,
-- and never to another install's.
--
-- PostgreSQL grants EXECUTE on a new function to PUBLIC, and CREATE OR
-- REPLACE keeps whatever was granted before, so the privilege is revoked
-- from PUBLIC and from every Rheo role of the install first: moving a
-- function from one role to another takes it away from the first. Roles
-- that do not exist (an install by a role that may not create roles) are
-- skipped; `rheo-migrate roles` creates them later and installs the
-- functions again.
--
-- privilege and object are constants of Rheo's own SQL files, never user
-- input; no role but the owner may call this.
CREATE OR REPLACE FUNCTION rheo._access(privilege text, object text, VARIADIC roles text[] DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_privilege ALIAS FOR $1;
    p_object    ALIAS FOR $2;
    p_roles     ALIAS FOR $3;
    v_prefix    text := (SELECT p.prefix FROM rheo.role_prefix p);
    v_role      text;
BEGIN
    IF v_prefix IS NULL THEN
        RAISE EXCEPTION 'rheo.role_prefix holds no row: install Rheo with rheo-migrate';
    END IF;
    EXECUTE format('REVOKE %s ON %s FROM PUBLIC', p_privilege, p_object);
    FOR v_role IN
        SELECT r.rolname FROM pg_roles r
         WHERE r.rolname IN (SELECT v_prefix || n FROM unnest(ARRAY['rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin']) AS n)
    LOOP
        EXECUTE format('REVOKE %s ON %s FROM %I', p_privilege, p_object, v_role);
    END LOOP;
    FOR v_role IN
        SELECT r.rolname FROM pg_roles r WHERE r.rolname IN (SELECT v_prefix || n FROM unnest(p_roles) AS n)
    LOOP
        EXECUTE format('GRANT %s ON %s TO %I', p_privilege, p_object, v_role);
    END LOOP;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._access(text, text, text[])');

-- Every Rheo role may look into the schema; what it may do there is
-- granted object by object.
SELECT rheo._access('USAGE', 'SCHEMA rheo', 'rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin');

-- Tables, views and sequences: nothing for anyone but their owner. The
-- files of rheo.events and rheo.group_status grant SELECT on them.
SELECT rheo._access('ALL', format('%s %s', CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass))
  FROM pg_class c
 WHERE c.relnamespace = 'rheo'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S');

-- What is installed, which an application checks when it connects
-- (connect.Open, migrate.PostgresStatus): version numbers, a checksum
-- and the role prefix.
SELECT rheo._access('SELECT', 'TABLE rheo.schema_version', 'rheo_reader');
SELECT rheo._access('SELECT', 'TABLE rheo.function_set', 'rheo_reader');
SELECT rheo._access('SELECT', 'TABLE rheo.role_prefix', 'rheo_reader');

-- The Go driver vacuums rheo.deliveries after every so many settles
-- (docs/design.md); from PostgreSQL 17 on that can be granted to the
-- role that settles.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 170000 THEN
        PERFORM rheo._access('MAINTAIN', 'TABLE rheo.deliveries', 'rheo_consumer');
    END IF;
END
$$;
