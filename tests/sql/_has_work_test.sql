BEGIN;
SELECT plan(7);

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

SELECT ok(EXISTS (SELECT FROM g, rheo._has_work(g.id, 0, 4, 5, '2030-01-01Z', false)),
    'events past the cursor are work');
SELECT ok(NOT EXISTS (SELECT FROM g, rheo._has_work(g.id, 1, 1, 0, '2030-01-01Z', false)),
    'a partition with no event past the cursor and no delivery has none');
SELECT ok(EXISTS (SELECT FROM g, rheo._has_work(g.id, 0, 6, 5, '2030-01-01Z', false)),
    'a delivery due again (a retry) is work');
DELETE FROM rheo.deliveries WHERE sequence = 3;
SELECT ok(NOT EXISTS (SELECT FROM g, rheo._has_work(g.id, 0, 6, 5, '2030-01-01Z', false)),
    'leases in flight are not work');
SELECT ok(EXISTS (SELECT FROM g, rheo._has_work(g.id, 0, 6, 5, '2030-01-01 00:00:01Z', false)),
    'an expired lease is work');
INSERT INTO rheo.key_wakeups (group_id, "partition", key) SELECT g.id, 1, 'k' FROM g;
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM g, rheo._has_work(g.id, 1, 1, 0, '2030-01-01Z', o.key_ordering))
          FROM (VALUES (true), (false)) AS o(key_ordering)$$,
    $$VALUES (1::bigint), (0::bigint)$$,
    'a key wakeup is work under key ordering only');
SELECT ok(pg_temp.plan_of($$SELECT c."partition" FROM rheo.cursors c
                            CROSS JOIN LATERAL rheo._has_work(c.group_id, c."partition", c.next_sequence, 0,
                                                              now(), false) AS h$$) !~ 'Function Scan',
    '_has_work is inlined: the plan holds its condition, not a function scan');

SELECT * FROM finish();
ROLLBACK;
