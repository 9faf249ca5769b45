BEGIN;
SELECT plan(49);

-- The helpers the planner inlines (sql/functions/_route.sql): each one's
-- rule on cases of its own, and a check that a plan holds its body, not
-- a call or a function scan, which is what writing them as inlinable SQL
-- is for.

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

-- rheo._route and rheo._event_key, append's routing rule and effective key.
SELECT results_eq(
    $$SELECT v.key, v.n, rheo._route(v.key, v.n)
        FROM (VALUES ('user-1', 4), ('user-1', 7), ('order-42', 3), ('order-42', 16),
                     ('ünïcode', 8), ('emoji-🎉', 16), ('The quick brown fox', 8)) v(key, n)$$,
    $$VALUES ('user-1', 4, 3), ('user-1', 7, 6), ('order-42', 3, 2), ('order-42', 16, 12),
             ('ünïcode', 8, 5), ('emoji-🎉', 16, 11), ('The quick brown fox', 8, 7)$$,
    '_route puts known keys where Go''s PartitionForKey puts them');
SELECT is(
    (SELECT count(*) FROM generate_series(1, 500) i
      WHERE rheo._route('key-' || i, 7)
            <> (('x' || substr(md5('key-' || i), 1, 8))::bit(32)::bigint % 7)::int),
    0::bigint, '_route is the md5 rule of reference §4.1 for 500 keys');
SELECT ok(
    (SELECT bool_and(rheo._route('key-' || i, 16) BETWEEN 0 AND 15) FROM generate_series(1, 500) i),
    '_route reads the md5 prefix unsigned: never a negative partition');
SELECT is(rheo._route(NULL, 16), 0, '_route of no key is partition 0');
SELECT is(rheo._route('any', 1), 0, '_route of a one-partition stream is partition 0');
SELECT ok(pg_temp.plan_of($$SELECT rheo._route(v.k, 4) FROM (VALUES ('a'), ('b')) v(k)$$) !~ '_route',
    '_route is inlined: the plan holds its expression, not a call');

SELECT is(rheo._event_key('given', '{"key": "payload"}'), 'given', '_event_key: the key given wins over payload.key');
SELECT is(rheo._event_key(NULL, '{"key": "payload"}'), 'payload', '_event_key: without a key given, payload.key');
SELECT is(rheo._event_key('', '{"key": "payload"}'), 'payload', '_event_key: an empty key given counts as none');
SELECT is(rheo._event_key(NULL, '{"key": ""}'), NULL, '_event_key: an empty payload.key counts as none');
SELECT is(rheo._event_key(NULL, '{"type": "t"}'), NULL, '_event_key: no key anywhere: none');
SELECT ok(pg_temp.plan_of($$SELECT rheo._event_key(v.k, v.p) FROM (VALUES ('a', '{}'::jsonb), ('b', '{}')) v(k, p)$$) !~ '_event_key',
    '_event_key is inlined: the plan holds its expression, not a call');

-- fetch's helpers.
SELECT results_eq(
    $$SELECT rheo._fresh(v.next, v.high, v.max_count)
        FROM (VALUES (1::bigint, 10::bigint, 5), (8, 10, 5), (11, 10, 5), (40, 10, 5), (1, 0, 5),
                     (1, 9223372036854775806, 2147483647), (3, 3, 0)) AS v(next, high, max_count)$$,
    $$VALUES (5), (3), (0), (0), (0), (2147483647), (0)$$,
    '_fresh counts the events past the cursor up to the high watermark, capped at max_count, never below 0');

SELECT ok(pg_temp.plan_of($$SELECT rheo._fresh(v.n, v.h, 5) FROM (VALUES (1::bigint, 2::bigint), (3, 4)) v(n, h)$$) !~ '_fresh',
    '_fresh is inlined: the plan holds its expression, not a call');

-- The lease ids of a Citus fetch: the stream's mark, then an md5 of the
-- nonce and the position, with the version digit 8.
SELECT is(rheo._lease_id('0000abcd', 'nonce', 3, 42),
          overlay(('0000abcd' || substr(md5('nonce3/42'), 9)) PLACING '8' FROM 13)::uuid,
          '_lease_id: the mark, then the md5 of nonce, partition, ''/'' and sequence, version 8');
SELECT ok(pg_temp.plan_of($$SELECT rheo._lease_id('0000abcd', 'n', v.p, v.s) FROM (VALUES (1, 2::bigint), (3, 4)) v(p, s)$$)
          !~ '_lease_id',
    '_lease_id is inlined: the plan holds its expression, not a call');
SELECT is(rheo._lease_hash('0000abcd-0000-8000-0000-000000000000'), x'0000abcd'::int,
          '_lease_hash: the first four bytes of the lease id');
SELECT ok(pg_temp.plan_of($$SELECT rheo._lease_hash(v.l) FROM (VALUES (gen_random_uuid()), (gen_random_uuid())) v(l)$$)
          !~ '_lease_hash',
    '_lease_hash is inlined: the plan holds its expression, not a call');

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

-- rheo._due_count
SELECT is((SELECT n FROM g, rheo._due_count(g.id, 0, '2030-01-01Z', 2, 100, true) AS n), 1,
    '_due_count: a retry due now is counted, leases in flight are not');
SELECT is((SELECT n FROM g, rheo._due_count(g.id, 0, '2030-01-01 00:00:01Z', 2, 100, true) AS n), 3,
    '_due_count: expired leases below the attempt limit are counted with the retry');
SELECT is((SELECT n FROM g, rheo._due_count(g.id, 0, '2030-01-01 00:00:01Z', 2, 100, false) AS n), 1,
    '_due_count: without expired (the expiry mark not passed), only the pending deliveries are looked for');
SELECT is((SELECT n FROM g, rheo._due_count(g.id, 0, '2030-01-01 00:00:01Z', 1, 100, true) AS n), 1,
    '_due_count: expired leases at the attempt limit are not: fetch dead-letters them');
SELECT is((SELECT n FROM g, rheo._due_count(g.id, 0, '2030-01-01 00:00:01Z', 2, 2, true) AS n), 2,
    '_due_count: the count stops at cap');
SELECT ok(pg_temp.plan_of($$SELECT (SELECT n FROM rheo._due_count(c.group_id, c."partition", now(), 2, 10,
                                                                  c.expiry_mark <= now()) AS n)
                            FROM rheo.cursors c$$) !~ 'Function Scan',
    '_due_count is inlined: the plan counts the deliveries, not a function scan');

-- rheo._due
-- The sequences of the deliveries _due returns.
CREATE FUNCTION pg_temp.due(now timestamptz, max_attempts int, n int, due_known boolean,
                             expired boolean DEFAULT true) RETURNS bigint[]
LANGUAGE sql AS $fn$
    SELECT array_agg(d.sequence ORDER BY d.sequence) FROM rheo.deliveries d
     WHERE d.ctid IN (SELECT t FROM g, rheo._due(g.id, 0, $1, $2, 10, $3, $4, $5) AS t)
$fn$;

SELECT is(pg_temp.due('2030-01-01Z', 2, 10, true), '{3}'::bigint[], '_due: a retry due now, not the leases in flight');
SELECT is(pg_temp.due('2030-01-01 00:00:01Z', 2, 2, true), '{1,2}'::bigint[],
    '_due: the n lowest sequences due, read by due time');
SELECT is(pg_temp.due('2030-01-01 00:00:01Z', 2, 2, false), '{1,2}'::bigint[],
    '_due: the same read by the primary key');
SELECT is(pg_temp.due('2030-01-01 00:00:01Z', 2, 10, true, false), '{3}'::bigint[],
    '_due: without expired, the pending deliveries only, read by due time');
SELECT is(pg_temp.due('2030-01-01 00:00:01Z', 2, 10, false, false), '{3}'::bigint[],
    '_due: the same read by the primary key');
SELECT is(pg_temp.due('2030-01-01 00:00:01Z', 1, 10, true), '{3}'::bigint[],
    '_due: leases expired at the attempt limit are not due again');
SELECT ok(pg_temp.plan_of($$SELECT d FROM rheo.cursors c
                            CROSS JOIN LATERAL rheo._due(c.group_id, c."partition", now(), 2, 10, 5, true,
                                                         c.expiry_mark <= now()) AS d$$)
          !~ 'Function Scan',
    '_due is inlined: the plan reads the deliveries, not a function scan');

-- rheo._turn
SELECT results_eq(
    $$SELECT t.sequence, t.state, t.attempt FROM g, rheo._turn(g.id, 0) AS t$$,
    $$VALUES (1::bigint, 'leased'::text, 1)$$,
    '_turn: the earliest delivery in progress, whatever its state');
SELECT is((SELECT d.sequence FROM rheo.deliveries d, g, rheo._turn(g.id, 0) AS t WHERE d.ctid = t.tid), 1::bigint,
    '_turn: found by its physical address');
SELECT ok(NOT EXISTS (SELECT FROM g, rheo._turn(g.id, 1)), '_turn: none in a partition with no delivery in progress');
SELECT ok(pg_temp.plan_of($$SELECT t.sequence FROM rheo.cursors c
                            CROSS JOIN LATERAL rheo._turn(c.group_id, c."partition") AS t$$) !~ 'Function Scan',
    '_turn is inlined: the plan reads the deliveries, not a function scan');

-- rheo._plan
SELECT results_eq(
    $$SELECT * FROM rheo._plan('{0,1,2,3}', '{10,20,30,40}', '{5,5,0,3}', '{2,9,1,3}', 5)$$,
    $$VALUES (0, 10::bigint, 2, 3, true), (1, 20::bigint, 5, 0, false), (3, 40::bigint, 3, 0, true)$$,
    '_plan: the due deliveries first, up to the quota, then events; a partition without quota is left out');
SELECT ok(pg_temp.plan_of($$SELECT * FROM rheo._plan('{0}', '{1}', '{1}', '{0}', 1)$$) !~ '_plan',
    '_plan is inlined: the plan unnests the arrays, not a call');

-- rheo._event
SELECT results_eq(
    $$SELECT e."partition", e.sequence FROM rheo._event('s', 0, 4) AS e$$,
    $$VALUES (0, 4::bigint)$$,
    '_event: the event at a position');
SELECT ok(NOT EXISTS (SELECT FROM rheo._event('s', 1, 1)), '_event: none where no event is');
SELECT ok(pg_temp.plan_of($$SELECT e.id FROM rheo.cursors c
                            CROSS JOIN LATERAL rheo._event('s', c."partition", c.next_sequence) AS e$$)
          !~ 'Function Scan',
    '_event is inlined: the plan reads the events, not a function scan');
SELECT ok(pg_temp.plan_of($$SELECT e.id FROM rheo.cursors c
                            CROSS JOIN LATERAL rheo._event('s', c."partition", c.next_sequence) AS e$$)
          ~ 'Limit',
    '_event keeps its LIMIT when inlined: one probe of the events a row, not a join the planner may hash');

-- rheo._has_work (last: it changes the deliveries)
SELECT ok(EXISTS (SELECT FROM g, rheo._has_work(g.id, 0, 4, 5, '2030-01-01Z', false, 'infinity')),
    '_has_work: events past the cursor are work');
SELECT ok(NOT EXISTS (SELECT FROM g, rheo._has_work(g.id, 1, 1, 0, '2030-01-01Z', false, 'infinity')),
    '_has_work: a partition with no event past the cursor and no delivery has none');
SELECT ok(EXISTS (SELECT FROM g, rheo._has_work(g.id, 0, 6, 5, '2030-01-01Z', false, '2030-01-01 00:00:01Z')),
    '_has_work: a delivery due again (a retry) is work');
DELETE FROM rheo.deliveries WHERE sequence = 3;
SELECT ok(NOT EXISTS (SELECT FROM g, rheo._has_work(g.id, 0, 6, 5, '2030-01-01Z', false, '2030-01-01 00:00:01Z')),
    '_has_work: leases in flight are not work');
SELECT ok(EXISTS (SELECT FROM g, rheo._has_work(g.id, 0, 6, 5, '2030-01-01 00:00:01Z', false, '2030-01-01 00:00:01Z')),
    '_has_work: the expiry mark reached is work (a lease may have expired)');
SELECT ok(NOT EXISTS (SELECT FROM g, rheo._has_work(g.id, 0, 6, 5, '2030-01-01 00:00:01Z', false, 'infinity')),
    '_has_work: below the mark the leases in flight are not read');
INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key) SELECT 's', g.id, 1, 'k' FROM g;
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM g, rheo._has_work(g.id, 1, 1, 0, '2030-01-01Z', o.key_ordering, 'infinity'))
          FROM (VALUES (true), (false)) AS o(key_ordering)$$,
    $$VALUES (1::bigint), (0::bigint)$$,
    '_has_work: a key wakeup is work under key ordering only');
SELECT ok(pg_temp.plan_of($$SELECT c."partition" FROM rheo.cursors c
                            CROSS JOIN LATERAL rheo._has_work(c.group_id, c."partition", c.next_sequence, 0,
                                                              now(), false, c.expiry_mark) AS h$$) !~ 'Function Scan',
    '_has_work is inlined: the plan holds its condition, not a function scan');

SELECT * FROM finish();
ROLLBACK;
