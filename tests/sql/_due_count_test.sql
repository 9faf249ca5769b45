BEGIN;
SELECT plan(5);

-- A group with max_attempts 2 on a stream of two partitions: partition 0
-- has five events, the first three leased until 00:00:01, and the lease
-- of the third retried at once (pending, due at 00:00:00); partition 1
-- has none.
SELECT rheo.create_stream('s', 2, clock => '2030-01-01Z');
SELECT rheo.create_group('s', 'g', max_attempts => 2, clock => '2030-01-01Z');
SELECT count(*) FROM rheo.append_batch('s', '[{}, {}, {}, {}, {}]', "partition" => 0, clock => '2030-01-01Z');
CREATE TEMP TABLE leased AS
    SELECT * FROM rheo.fetch('s', 'g', 3, lease_ms => 1000, partitions => '{0}', clock => '2030-01-01Z');
SELECT rheo.retry(l.lease_id, clock => '2030-01-01Z') FROM leased l WHERE l.sequence = 3;
CREATE TEMP TABLE g AS SELECT group_id AS id FROM rheo.groups WHERE stream = 's' AND group_name = 'g';

-- The plan of a statement, as text.
CREATE FUNCTION pg_temp.plan_of(statement text) RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
    v_line text;
    v_plan text := '';
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || statement LOOP
        v_plan := v_plan || v_line || E'\n';
    END LOOP;
    RETURN v_plan;
END
$fn$;

SELECT is((SELECT n FROM g, rheo._due_count(g.id, 0, '2030-01-01Z', 2, 100) AS n), 1,
    'a retry due now is counted, leases in flight are not');
SELECT is((SELECT n FROM g, rheo._due_count(g.id, 0, '2030-01-01 00:00:01Z', 2, 100) AS n), 3,
    'expired leases below the attempt limit are counted with the retry');
SELECT is((SELECT n FROM g, rheo._due_count(g.id, 0, '2030-01-01 00:00:01Z', 1, 100) AS n), 1,
    'expired leases at the attempt limit are not: fetch dead-letters them');
SELECT is((SELECT n FROM g, rheo._due_count(g.id, 0, '2030-01-01 00:00:01Z', 2, 2) AS n), 2,
    'the count stops at cap');
SELECT ok(pg_temp.plan_of($$SELECT (SELECT n FROM rheo._due_count(c.group_id, c."partition", now(), 2, 10) AS n)
                            FROM rheo.cursors c$$) !~ 'Function Scan',
    '_due_count is inlined: the plan counts the deliveries, not a function scan');

SELECT * FROM finish();
ROLLBACK;
