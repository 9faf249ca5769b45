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

-- The sequences of the deliveries _due returns.
CREATE FUNCTION pg_temp.due(now timestamptz, max_attempts int, n int, due_known boolean) RETURNS bigint[]
LANGUAGE sql AS $fn$
    SELECT array_agg(d.sequence ORDER BY d.sequence) FROM rheo.deliveries d
     WHERE d.ctid IN (SELECT t FROM g, rheo._due(g.id, 0, $1, $2, 10, $3, $4) AS t)
$fn$;

SELECT is(pg_temp.due('2030-01-01Z', 2, 10, true), '{3}'::bigint[], 'a retry due now, not the leases in flight');
SELECT is(pg_temp.due('2030-01-01 00:00:01Z', 2, 2, true), '{1,2}'::bigint[],
    'the n lowest sequences due, read by due time');
SELECT is(pg_temp.due('2030-01-01 00:00:01Z', 2, 2, false), '{1,2}'::bigint[],
    'the same read by the primary key');
SELECT is(pg_temp.due('2030-01-01 00:00:01Z', 1, 10, true), '{3}'::bigint[],
    'leases expired at the attempt limit are not due again');
SELECT ok(pg_temp.plan_of($$SELECT d FROM rheo.cursors c
                            CROSS JOIN LATERAL rheo._due(c.group_id, c."partition", now(), 2, 10, 5, true) AS d$$)
          !~ 'Function Scan',
    '_due is inlined: the plan reads the deliveries, not a function scan');

SELECT * FROM finish();
ROLLBACK;
