BEGIN;
SELECT plan(4);

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

SELECT results_eq(
    $$SELECT t.sequence, t.state, t.attempt FROM g, rheo._turn(g.id, 0) AS t$$,
    $$VALUES (1::bigint, 'leased'::text, 1)$$,
    'the earliest delivery in progress, whatever its state');
SELECT is((SELECT d.sequence FROM rheo.deliveries d, g, rheo._turn(g.id, 0) AS t WHERE d.ctid = t.tid), 1::bigint,
    'found by its physical address');
SELECT ok(NOT EXISTS (SELECT FROM g, rheo._turn(g.id, 1)), 'none in a partition with no delivery in progress');
SELECT ok(pg_temp.plan_of($$SELECT t.sequence FROM rheo.cursors c
                            CROSS JOIN LATERAL rheo._turn(c.group_id, c."partition") AS t$$) !~ 'Function Scan',
    '_turn is inlined: the plan reads the deliveries, not a function scan');

SELECT * FROM finish();
ROLLBACK;
