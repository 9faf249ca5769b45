BEGIN;
SELECT plan(47);

-- Runs statement as role and returns the first column of its first row
-- as text. SET LOCAL ROLE is undone when the statement fails, with the
-- subtransaction throws_ok runs it in.
CREATE FUNCTION pg_temp.as_role(role text, statement text) RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
    v_result text;
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', role);
    EXECUTE statement INTO v_result;
    RESET ROLE;
    RETURN v_result;
END
$fn$;

-- Which of the four roles reference §9 says may call each public function.
CREATE TEMP TABLE api (signature text, least_role text);
INSERT INTO api VALUES
    ('rheo.read(text, bigint, int, int)', 'rheo_reader'),
    ('rheo.query(text, jsonb, int, text, boolean)', 'rheo_reader'),
    ('rheo.query_page(text, jsonb, int, text, boolean)', 'rheo_reader'),
    ('rheo.lag(text, text, int[])', 'rheo_reader'),
    ('rheo.list_streams()', 'rheo_reader'),
    ('rheo.list_groups(text)', 'rheo_reader'),
    ('rheo.dead_letters(text, text, int, text)', 'rheo_reader'),
    ('rheo.group_info(text, text, timestamptz)', 'rheo_reader'),
    ('rheo.append(text, jsonb, text, int, text, jsonb, timestamptz, timestamptz)', 'rheo_producer'),
    ('rheo.append_batch(text, jsonb, text[], text[], int, jsonb, timestamptz)', 'rheo_producer'),
    ('rheo.fetch(text, text, int, text, int, int[], timestamptz)', 'rheo_consumer'),
    ('rheo.renew(uuid, int, timestamptz)', 'rheo_consumer'),
    ('rheo.ack(uuid, timestamptz)', 'rheo_consumer'),
    ('rheo.ack_batch(uuid[], timestamptz)', 'rheo_consumer'),
    ('rheo.retry(uuid, text, int, timestamptz)', 'rheo_consumer'),
    ('rheo.reject(uuid, text, timestamptz)', 'rheo_consumer'),
    ('rheo.create_stream(text, int, timestamptz)', 'rheo_admin'),
    ('rheo.create_group(text, text, int, bigint, timestamptz, int[], timestamptz, text)', 'rheo_admin'),
    ('rheo.replay(text, text, bigint, text[], timestamptz, int[], timestamptz)', 'rheo_admin'),
    ('rheo.reset_group(text, text, boolean, bigint, timestamptz, int[], timestamptz)', 'rheo_admin'),
    ('rheo.stream_info(text)', 'rheo_reader'),
    ('rheo.leases(text, text, int)', 'rheo_reader'),
    ('rheo.drop_group(text, text, boolean)', 'rheo_admin'),
    ('rheo.drop_stream(text, boolean)', 'rheo_admin'),
    ('rheo.set_retention(text, interval)', 'rheo_admin'),
    ('rheo.set_ordering(text, text, text)', 'rheo_admin'),
    ('rheo.prune(text, int, boolean, timestamptz)', 'rheo_admin');
-- Which roles hold each role's privileges.
CREATE TEMP TABLE holds (role text, least_role text);
INSERT INTO holds VALUES
    ('rheo_reader', 'rheo_reader'), ('rheo_producer', 'rheo_reader'), ('rheo_consumer', 'rheo_reader'),
    ('rheo_admin', 'rheo_reader'), ('rheo_producer', 'rheo_producer'), ('rheo_admin', 'rheo_producer'),
    ('rheo_consumer', 'rheo_consumer'), ('rheo_admin', 'rheo_consumer'), ('rheo_admin', 'rheo_admin');

-- Ownership and the shape of every function.
SELECT is((SELECT count(*) FROM pg_roles r WHERE r.rolname = 'rheo_owner' AND NOT r.rolsuper AND NOT r.rolcanlogin),
    1::bigint, 'rheo_owner exists, is no superuser and cannot log in');
SELECT is((SELECT count(*) FROM pg_roles r
            WHERE r.rolname IN ('rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin') AND NOT r.rolcanlogin),
    4::bigint, 'the four roles exist and cannot log in');
SELECT is(ARRAY(SELECT m.member::regrole::text FROM pg_auth_members m
                 WHERE m.roleid = 'rheo_owner'::regrole),
    '{}'::text[], 'no role is a member of rheo_owner');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p
                 WHERE p.pronamespace = 'rheo'::regnamespace AND p.proowner <> 'rheo_owner'::regrole),
    '{}'::text[], 'rheo_owner owns every function');
SELECT is(ARRAY(SELECT c.oid::regclass::text FROM pg_class c
                 WHERE c.relnamespace = 'rheo'::regnamespace AND c.relowner <> 'rheo_owner'::regrole),
    '{}'::text[], 'rheo_owner owns every table, index, view, sequence and type');
SELECT is((SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'rheo'),
    'rheo_owner', 'rheo_owner owns the schema');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p
                 WHERE p.pronamespace = 'rheo'::regnamespace AND p.proname !~ '^_' AND NOT p.prosecdef
                 ORDER BY 1),
    '{}'::text[], 'every public function is SECURITY DEFINER');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p
                 WHERE p.pronamespace = 'rheo'::regnamespace AND p.proname ~ '^_' AND p.prosecdef
                 ORDER BY 1),
    '{}'::text[], 'every helper is SECURITY INVOKER');
-- The inlinable helpers (sql/functions/_route.sql) have no SET option,
-- which would stop the planner inlining them: they take the search_path
-- of the pinned function they are inlined into.
CREATE TEMP TABLE inlined(signature) AS VALUES
    ('rheo._route(text,integer)'), ('rheo._event_key(text,jsonb)'),
    ('rheo._has_work(integer,integer,bigint,bigint,timestamp with time zone,boolean,timestamp with time zone)'),
    ('rheo._due_count(integer,integer,timestamp with time zone,integer,bigint,boolean)'),
    ('rheo._fresh(bigint,bigint,integer)'),
    ('rheo._due(integer,integer,timestamp with time zone,integer,integer,integer,boolean,boolean)'),
    ('rheo._turn(integer,integer)'), ('rheo._distributed()'), ('rheo._lease_hash(uuid)'), ('rheo._lease_id(text,text,integer,bigint)'),
    ('rheo._plan(integer[],bigint[],integer[],integer[],integer)'),
    ('rheo._event(text,integer,bigint)');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p
                 WHERE p.pronamespace = 'rheo'::regnamespace
                   AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)
                   AND p.oid NOT IN (SELECT i.signature::regprocedure FROM inlined i)
                 ORDER BY 1),
    '{}'::text[], 'every function but the inlinable helpers pins search_path to pg_catalog, pg_temp');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p
                 WHERE p.oid IN (SELECT i.signature::regprocedure FROM inlined i)
                   AND NOT (p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'sql') AND p.provolatile IN ('i', 's') AND NOT p.prosecdef
                            AND p.proconfig IS NULL AND p.proname ~ '^_')
                 ORDER BY 1),
    '{}'::text[], 'the inlinable helpers are LANGUAGE sql, IMMUTABLE or STABLE, SECURITY INVOKER, without SET options');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p
                 WHERE p.pronamespace = 'rheo'::regnamespace
                   AND (p.proacl IS NULL
                        OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0))
                 ORDER BY 1),
    '{}'::text[], 'PUBLIC may execute no function');
SELECT is(ARRAY(SELECT c.oid::regclass::text FROM pg_class c
                 WHERE c.relnamespace = 'rheo'::regnamespace
                   AND EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = 0)
                 ORDER BY 1),
    '{}'::text[], 'PUBLIC holds nothing on any table, view or sequence');
SELECT ok(NOT has_schema_privilege('public', 'rheo', 'USAGE'), 'PUBLIC may not use the schema');

-- Who may call what: exactly the reference's grants, for every function and role.
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p
                 WHERE p.pronamespace = 'rheo'::regnamespace AND p.proname !~ '^_'
                   AND p.oid NOT IN (SELECT a.signature::regprocedure FROM api a)
                 ORDER BY 1),
    '{}'::text[], 'the matrix below lists every public function');
SELECT results_eq(
    $$SELECT r.role, a.signature, has_function_privilege(r.role, a.signature, 'EXECUTE')
        FROM api a CROSS JOIN (VALUES ('rheo_reader'), ('rheo_producer'), ('rheo_consumer'), ('rheo_admin')) AS r(role)
       ORDER BY 1, 2$$,
    $$SELECT r.role, a.signature,
             EXISTS (SELECT FROM holds h WHERE h.role = r.role AND h.least_role = a.least_role)
        FROM api a CROSS JOIN (VALUES ('rheo_reader'), ('rheo_producer'), ('rheo_consumer'), ('rheo_admin')) AS r(role)
       ORDER BY 1, 2$$,
    'each role may execute exactly its functions and those of the roles it includes');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p
                 CROSS JOIN (VALUES ('rheo_reader'), ('rheo_producer'), ('rheo_consumer'), ('rheo_admin')) AS r(role)
                 WHERE p.pronamespace = 'rheo'::regnamespace AND p.proname ~ '^_'
                   AND has_function_privilege(r.role, p.oid, 'EXECUTE')
                 ORDER BY 1),
    '{}'::text[], 'no role may execute a helper');
SELECT results_eq(
    $$SELECT c.relname::text, r.role, p.privilege,
             has_table_privilege(r.role, c.oid, p.privilege)
        FROM pg_class c
       CROSS JOIN (VALUES ('rheo_reader'), ('rheo_producer'), ('rheo_consumer'), ('rheo_admin')) AS r(role)
       CROSS JOIN (VALUES ('SELECT'), ('INSERT'), ('UPDATE'), ('DELETE'), ('TRUNCATE')) AS p(privilege)
       WHERE c.relnamespace = 'rheo'::regnamespace AND c.relkind IN ('r', 'v')
       ORDER BY 1, 2, 3$$,
    $$SELECT c.relname::text, r.role, p.privilege,
             p.privilege = 'SELECT' AND c.relname IN ('events', 'group_status', 'schema_version', 'function_set', 'role_prefix')
        FROM pg_class c
       CROSS JOIN (VALUES ('rheo_reader'), ('rheo_producer'), ('rheo_consumer'), ('rheo_admin')) AS r(role)
       CROSS JOIN (VALUES ('SELECT'), ('INSERT'), ('UPDATE'), ('DELETE'), ('TRUNCATE')) AS p(privilege)
       WHERE c.relnamespace = 'rheo'::regnamespace AND c.relkind IN ('r', 'v')
       ORDER BY 1, 2, 3$$,
    'every role may read rheo.events, rheo.group_status and what is installed, and nothing else');

-- What each role does with them.
SELECT rheo.create_stream('s', clock => '2030-01-01Z');
SELECT rheo.create_group('s', 'g', max_attempts => 2, clock => '2030-01-01Z');
SELECT rheo.append('s', '{"n": 1}', id => 'e1', clock => '2030-01-01Z');

SELECT is(pg_temp.as_role('rheo_reader', $$SELECT count(*) FROM rheo.read('s')$$), '1',
    'rheo_reader reads the log');
SELECT is(pg_temp.as_role('rheo_reader', $$SELECT lag FROM rheo.group_status WHERE stream = 's'$$), '1',
    'rheo_reader reads rheo.group_status');
SELECT is(pg_temp.as_role('rheo_reader', $$SELECT count(*) FROM rheo.events WHERE stream = 's'$$), '1',
    'rheo_reader reads rheo.events');
SELECT is(pg_temp.as_role('rheo_reader', $$SELECT lag FROM rheo.group_info('s', 'g')$$), '1',
    'rheo_reader reads group_info');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_reader', 'SELECT rheo.append(''s'', ''{}'')')$$,
    '42501', NULL, 'rheo_reader may not append');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_reader', 'SELECT count(*) FROM rheo.fetch(''s'', ''g'')')$$,
    '42501', NULL, 'rheo_reader may not fetch');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_reader', 'SELECT count(*) FROM rheo.deliveries')$$,
    '42501', NULL, 'rheo_reader may not read the bookkeeping');

SELECT is(pg_temp.as_role('rheo_producer', $$SELECT sequence FROM rheo.append('s', '{"n": 2}', id => 'e2', clock => '2030-01-01Z')$$),
    '2', 'rheo_producer appends');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_producer', 'SELECT count(*) FROM rheo.fetch(''s'', ''g'')')$$,
    '42501', NULL, 'rheo_producer may not fetch');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_producer', 'SELECT rheo.create_stream(''t'')')$$,
    '42501', NULL, 'rheo_producer may not create streams');

CREATE TEMP TABLE leases AS
SELECT pg_temp.as_role('rheo_consumer', $$SELECT lease_id FROM rheo.fetch('s', 'g', max_count => 1, clock => '2030-01-01Z')$$)::uuid
       AS lease_id;
SELECT isnt((SELECT lease_id FROM leases), NULL, 'rheo_consumer fetches');
SELECT lives_ok(format($$SELECT pg_temp.as_role('rheo_consumer', 'SELECT rheo.ack(''%s'', clock => ''2030-01-01Z'')')$$,
                       (SELECT lease_id FROM leases)),
    'rheo_consumer acks');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_consumer', 'SELECT rheo.append(''s'', ''{}'')')$$,
    '42501', NULL, 'rheo_consumer may not append');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_consumer', 'SELECT rheo.replay(''s'', ''g'', from_sequence => 0)')$$,
    '42501', NULL, 'rheo_consumer may not replay');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_consumer', 'SELECT rheo.set_ordering(''s'', ''g'', ''key'')')$$,
    '42501', NULL, 'rheo_consumer may not set the ordering');

SELECT lives_ok($$SELECT pg_temp.as_role('rheo_admin', 'SELECT rheo.create_stream(''t'', clock => ''2030-01-01Z'')')$$,
    'rheo_admin creates streams');
SELECT lives_ok($$SELECT pg_temp.as_role('rheo_admin', 'SELECT rheo.set_ordering(''s'', ''g'', ''none'')')$$,
    'rheo_admin sets the ordering');
SELECT is(pg_temp.as_role('rheo_admin', $$SELECT rheo.replay('s', 'g', from_sequence => 0, clock => '2030-01-01Z')$$), '1',
    'rheo_admin replays');
SELECT is(pg_temp.as_role('rheo_admin', $$SELECT count(*) FROM rheo.fetch('s', 'g', clock => '2030-01-01Z')$$), '2',
    'rheo_admin fetches, as it includes rheo_consumer');

-- A role holding EXECUTE on every function of the schema and SELECT on
-- rheo.events, INSERT too, still changes nothing but through the API.
CREATE ROLE rheo_test_everything NOLOGIN;
GRANT USAGE ON SCHEMA rheo TO rheo_test_everything;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA rheo TO rheo_test_everything;
GRANT SELECT, INSERT ON rheo.events TO rheo_test_everything;
CREATE TEMP TABLE before AS
SELECT (SELECT count(*) FROM rheo.events) AS events,
       (SELECT array_agg(c.next_sequence ORDER BY c.group_id, c."partition") FROM rheo.cursors c) AS cursors,
       (SELECT array_agg(pt.high_watermark ORDER BY pt.stream, pt."partition") FROM rheo.partitions pt) AS watermarks,
       (SELECT count(*) FROM rheo.deliveries) AS deliveries;

SELECT throws_ok($$SELECT pg_temp.as_role('rheo_test_everything',
    'INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
     VALUES (''s'', 0, 3, ''forged'', NULL, ''{}'', ''{}'', now())')$$,
    'RH012', 'immutable_event', 'an INSERT into rheo.events is refused even with the INSERT privilege');
SET LOCAL rheo.appending = 'on';
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_test_everything',
    'INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
     VALUES (''s'', 0, 3, ''forged'', NULL, ''{}'', ''{}'', now())')$$,
    'RH012', 'immutable_event', 'no session setting opens rheo.events to an INSERT');
RESET rheo.appending;
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_test_everything',
    'SELECT rheo._place_cursors(g.group_id, ''s'', ''{0}'', 100, NULL) FROM rheo.groups g')$$,
    '42501', NULL, 'a helper cannot move a cursor');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_test_everything',
    'SELECT rheo._place_cursors(1, ''s'', ''{0}'', 100, NULL)')$$,
    '42501', NULL, 'a helper cannot move a cursor even with its group id guessed');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_test_everything',
    'SELECT rheo._rewind(1, ''s'', 0, 0)')$$,
    '42501', NULL, 'a helper cannot rewind a group');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_test_everything',
    'SELECT count(*) FROM rheo._append(''s'', ''[{}]'', NULL, NULL, NULL, ''{}'', NULL, NULL)')$$,
    '42501', NULL, 'a helper cannot append');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_test_everything',
    'UPDATE rheo.partitions SET high_watermark = high_watermark + 1')$$,
    '42501', NULL, 'no direct write to the sequence allocators');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_test_everything',
    'UPDATE rheo.deliveries SET consumer_id = ''thief''')$$,
    '42501', NULL, 'no direct write to the deliveries');
SELECT throws_ok($$SELECT pg_temp.as_role('rheo_test_everything',
    'UPDATE rheo.cursors SET next_sequence = 1')$$,
    '42501', NULL, 'no direct write to the cursors');
SELECT is(pg_temp.as_role('rheo_test_everything', $$SELECT sequence FROM rheo.append('s', '{"n": 3}', id => 'e3', clock => '2030-01-01Z')$$),
    '3', 'the API itself works for it');
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM rheo.events) - 1,
             (SELECT array_agg(c.next_sequence ORDER BY c.group_id, c."partition") FROM rheo.cursors c),
             (SELECT array_agg(pt.high_watermark - CASE WHEN pt.stream = 's' THEN 1 ELSE 0 END
                               ORDER BY pt.stream, pt."partition") FROM rheo.partitions pt),
             (SELECT count(*) FROM rheo.deliveries)$$,
    $$SELECT events, cursors, watermarks, deliveries FROM before$$,
    'the refused attempts changed nothing');

SELECT * FROM finish();
ROLLBACK;
