BEGIN;
SELECT plan(73);

-- The signature reference §5.1 pins.
SELECT has_function('rheo', 'fetch', ARRAY['text', 'text', 'integer', 'text', 'integer', 'integer[]', 'timestamp with time zone']::name[], 'rheo.fetch has the reference''s argument types');
SELECT function_returns('rheo', 'fetch', ARRAY['text', 'text', 'integer', 'text', 'integer', 'integer[]', 'timestamp with time zone']::name[], 'setof rheo.lease', 'rheo.fetch returns setof rheo.lease');

-- Stream s: one partition, six events. Group g allows three attempts.
SELECT rheo.create_stream('s', clock => '2030-01-01Z');
SELECT rheo.append('s', jsonb_build_object('type', 'tick', 'n', n), key => 'k', metadata => '{"producer": "test"}',
                   clock => '2030-01-01Z')
  FROM generate_series(1, 6) n;
SELECT rheo.create_group('s', 'g', max_attempts => 3);
SELECT rheo.create_group('s', 'g2');

-- A first fetch: the lease columns.
CREATE TEMP TABLE f1 AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 2, consumer_id => 'c1', lease_ms => 1000,
                             clock => '2030-01-01 00:00:00Z');
SELECT results_eq(
    $$SELECT stream, group_name, consumer_id, "partition", sequence, attempt, leased_at, expires_at FROM f1$$,
    $$VALUES ('s'::text, 'g'::text, 'c1'::text, 0, 1::bigint, 1, '2030-01-01 00:00:00Z'::timestamptz, '2030-01-01 00:00:01Z'::timestamptz),
             ('s', 'g', 'c1', 0, 2, 1, '2030-01-01 00:00:00Z', '2030-01-01 00:00:01Z')$$,
    'fetch leases the first events in sequence order at attempt 1 until clock + lease_ms');
SELECT results_eq(
    $$SELECT event_id, "partition", sequence, key, type, payload, metadata, ts FROM f1$$,
    $$SELECT id, "partition", sequence, key, type, payload, metadata, ts FROM rheo.events
       WHERE stream = 's' AND sequence <= 2 ORDER BY sequence$$,
    'a lease carries its event');
SELECT ok((SELECT count(DISTINCT lease_id) = 2 AND bool_and(lease_id IS NOT NULL) FROM f1),
    'one fresh lease_id per event');
SELECT ok((SELECT bool_and(receipt = lease_id::text) FROM f1),
    'receipt is lease_id as text');

CREATE TEMP TABLE f2 AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 2, consumer_id => 'c2', lease_ms => 1000,
                             clock => '2030-01-01 00:00:00Z');
SELECT results_eq($$SELECT sequence, consumer_id FROM f2$$, $$VALUES (3::bigint, 'c2'::text), (4, 'c2')$$,
    'a second fetch does not hand out leased events again');
SELECT is((SELECT count(*) FROM f2 WHERE lease_id IN (SELECT lease_id FROM f1)), 0::bigint,
    'lease ids are never reused');

CREATE TEMP TABLE f3 AS
    SELECT * FROM rheo.fetch('s', 'g', lease_ms => 1000, clock => '2030-01-01 00:00:00.5Z');
SELECT results_eq($$SELECT sequence, expires_at FROM f3$$,
    $$VALUES (5::bigint, '2030-01-01 00:00:01.5Z'::timestamptz), (6, '2030-01-01 00:00:01.5Z')$$,
    'the default max_count takes what is left');
SELECT ok((SELECT bool_and(consumer_id IS NOT NULL AND consumer_id <> '') FROM f3),
    'consumer_id defaults to a generated id');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'g', clock => '2030-01-01 00:00:00.999Z')$$,
    'nothing is claimable while every lease is held');

-- Expiry: claimable again at expires_at, lowest sequence first, attempt + 1.
CREATE TEMP TABLE f4 AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 1, consumer_id => 'c3', lease_ms => 1000,
                             clock => '2030-01-01 00:00:01Z');
SELECT results_eq($$SELECT sequence, attempt, consumer_id FROM f4$$, $$VALUES (1::bigint, 2, 'c3'::text)$$,
    'an expired lease is claimable at expires_at; re-leasing counts the attempt');
SELECT isnt((SELECT lease_id FROM f4), (SELECT lease_id FROM f1 WHERE sequence = 1),
    'a re-lease has a new lease_id');
SELECT throws_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM f1 WHERE sequence = 1), '2030-01-01 00:00:01Z'),
    'RH004', 'stale_lease', 'the lease that was re-leased to someone else is stale');
SELECT lives_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM f1 WHERE sequence = 2), '2030-01-01 00:00:01Z'),
    'an expired lease no one claimed yet can still be acked');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('s', 'g', lease_ms => 1000, clock => '2030-01-01 00:00:01Z')$$,
    $$VALUES (3::bigint, 2), (4, 2)$$,
    'the acked event is not offered again; leases not yet expired are not claimable');
SELECT rheo.append('s', '{"n": 7}', key => 'k', clock => '2030-01-01Z');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('s', 'g', max_count => 1, lease_ms => 1000, clock => '2030-01-01 00:00:01.5Z')$$,
    $$VALUES (5::bigint, 2)$$,
    'an expired lease comes before a new event of the same partition');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('s', 'g', lease_ms => 1000, clock => '2030-01-01 00:00:01.5Z')$$,
    $$VALUES (6::bigint, 2), (7, 1)$$,
    'events appended after earlier fetches are offered');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('s', 'g2', clock => '2030-01-01Z')$$,
    $$SELECT sequence, 1 FROM rheo.events WHERE stream = 's' ORDER BY sequence$$,
    'another group sees every event independently, at attempt 1');

-- Attempt limit reached by expiry: dead-lettered, reason lease_expired,
-- at the clock of the fetch that found it.
SELECT rheo.create_stream('x');
SELECT rheo.append('x', jsonb_build_object('n', n), clock => '2030-01-01Z') FROM generate_series(1, 2) n;
SELECT rheo.create_group('x', 'g', max_attempts => 2);
SELECT rheo.create_group('x', 'once', max_attempts => 1);
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('x', 'g', max_count => 1, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    $$VALUES (1::bigint, 1)$$, 'x: attempt 1');
CREATE TEMP TABLE last_try AS
    SELECT * FROM rheo.fetch('x', 'g', max_count => 1, lease_ms => 1000, clock => '2030-01-01 00:00:01Z');
SELECT results_eq($$SELECT sequence, attempt FROM last_try$$, $$VALUES (1::bigint, 2)$$,
    'x: attempt 2 after expiry');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('x', 'g', lease_ms => 1000, clock => '2030-01-01 00:00:05Z')$$,
    $$VALUES (2::bigint, 1)$$,
    'an expired lease at max_attempts is not leased again');
SELECT results_eq(
    $$SELECT sequence, attempt, reason, dead_lettered_at FROM rheo.dead_letters('x', 'g')$$,
    $$VALUES (1::bigint, 2, 'lease_expired'::text, '2030-01-01 00:00:05Z'::timestamptz)$$,
    'it is dead-lettered with reason lease_expired at the fetch''s clock');
SELECT throws_ok(format('SELECT rheo.ack(%L)', (SELECT lease_id FROM last_try)),
    'RH004', 'stale_lease', 'the lease dead-lettered on expiry is stale');
SELECT results_eq($$SELECT frontier FROM rheo.lag('x', 'g')$$, $$VALUES (1::bigint)$$,
    'the dead letter is terminal: the frontier passes it');
SELECT results_eq(
    $$SELECT sequence FROM rheo.fetch('x', 'once', max_count => 1, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    $$VALUES (1::bigint)$$, 'max_attempts 1: the first lease');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('x', 'once', lease_ms => 1000, clock => '2030-01-01 00:00:01Z')$$,
    $$VALUES (2::bigint, 1)$$,
    'max_attempts 1: an expired first lease is never retried');
SELECT results_eq(
    $$SELECT sequence, attempt, reason FROM rheo.dead_letters('x', 'once')$$,
    $$VALUES (1::bigint, 1, 'lease_expired'::text)$$,
    'max_attempts 1: dead-lettered at attempt 1');

-- Several partitions: round-robin, results ordered by (partition, sequence).
SELECT rheo.create_stream('m', 3);
SELECT rheo.append('m', jsonb_build_object('n', n), "partition" => p, clock => '2030-01-01Z')
  FROM generate_series(0, 2) p CROSS JOIN generate_series(1, 4) n ORDER BY p, n;
SELECT rheo.create_group('m', 'g');
SELECT results_eq(
    $$SELECT "partition", sequence FROM rheo.fetch('m', 'g', max_count => 3, clock => '2030-01-01Z')$$,
    $$VALUES (0, 1::bigint), (1, 1::bigint), (2, 1::bigint)$$,
    'with three partitions and max_count 3, each partition gets one lease, in partition order');
CREATE TEMP TABLE rr AS SELECT * FROM rheo.fetch('m', 'g', max_count => 7, clock => '2030-01-01Z') WITH ORDINALITY;
SELECT is((SELECT count(*) FROM rr), 7::bigint, 'max_count 7 takes 7');
SELECT ok(NOT EXISTS (SELECT 1 FROM (SELECT ordinality, row_number() OVER (ORDER BY "partition", sequence) AS rn FROM rr) x
                       WHERE x.ordinality <> x.rn),
    'leases come ordered by (partition, sequence)');
SELECT ok((SELECT bool_and(n >= 2 AND lo = 2 AND hi = 1 + n) AND max(n) - min(n) <= 1
             FROM (SELECT "partition", count(*) AS n, min(sequence) AS lo, max(sequence) AS hi FROM rr GROUP BY 1) c)
          AND (SELECT count(DISTINCT "partition") FROM rr) = 3,
    'round-robin: every partition gets its share, taken in sequence order');
SELECT is((SELECT count(*) FROM rheo.fetch('m', 'g', max_count => 10, clock => '2030-01-01Z')), 2::bigint,
    'the rest of the work');
SELECT is_empty($$SELECT * FROM rheo.fetch('m', 'g', clock => '2030-01-01Z')$$,
    'no rows when nothing is claimable');

SELECT rheo.create_group('m', 'rot');
CREATE TEMP TABLE rotation (p int);
INSERT INTO rotation SELECT "partition" FROM rheo.fetch('m', 'rot', max_count => 1, clock => '2030-01-01Z');
INSERT INTO rotation SELECT "partition" FROM rheo.fetch('m', 'rot', max_count => 1, clock => '2030-01-01Z');
INSERT INTO rotation SELECT "partition" FROM rheo.fetch('m', 'rot', max_count => 1, clock => '2030-01-01Z');
SELECT cmp_ok((SELECT count(DISTINCT p) FROM rotation), '>=', 2::bigint,
    'single-lease fetches start from a rotating partition');

SELECT rheo.create_group('m', 'scoped');
SELECT is_empty($$SELECT * FROM rheo.fetch('m', 'scoped', partitions => '{}', clock => '2030-01-01Z')$$,
    'an empty partitions list claims nothing');
SELECT results_eq(
    $$SELECT "partition", sequence FROM rheo.fetch('m', 'scoped', partitions => '{1}', clock => '2030-01-01Z')$$,
    $$VALUES (1, 1::bigint), (1, 2::bigint), (1, 3::bigint), (1, 4::bigint)$$,
    'partitions limits the claim to the listed partitions');
SELECT is_empty($$SELECT * FROM rheo.fetch('m', 'scoped', max_count => 0, clock => '2030-01-01Z')$$,
    'max_count 0 claims nothing');

-- The call as reference §5.1 writes it.
SELECT rheo.create_group('m', 'named');
SELECT results_eq(
    $$SELECT count(*), min(leased_at), max(expires_at) FROM rheo.fetch('m', 'named', max_count => 5, clock => '2030-01-01Z')$$,
    $$VALUES (5::bigint, '2030-01-01Z'::timestamptz, '2030-01-01 00:00:30Z'::timestamptz)$$,
    'fetch with named max_count and clock; lease_ms defaults to 30 seconds');

SELECT results_eq(
    $$SELECT consumer_id, "partition", expires_at
        FROM rheo.fetch(stream => 'm', group_name => 'named', max_count => 1, consumer_id => 'by-name', lease_ms => 1000,
                        partitions => '{2}', clock => '2030-01-01Z')$$,
    $$VALUES ('by-name'::text, 2, '2030-01-01 00:00:01Z'::timestamptz)$$,
    'fetch called with every argument by name');

-- What a fetch locks (docs/design.md, "Claiming"): the cursors of at most
-- max_count partitions with work, consecutive in rotation order, so that
-- competing fetches claim side by side (tests/go overlap_test.go).
CREATE EXTENSION IF NOT EXISTS pgrowlocks;
CREATE FUNCTION pg_temp.locked(p_stream text, p_group text) RETURNS int[] LANGUAGE sql AS $fn$
    SELECT array_agg(c."partition" ORDER BY c."partition")
      FROM pgrowlocks('rheo.cursors') r
      JOIN rheo.cursors c ON c.ctid = r.locked_row
      JOIN rheo.groups g ON g.group_id = c.group_id
     WHERE g.stream = p_stream AND g.group_name = p_group
$fn$;
SELECT rheo.create_stream('ov', 8);
SELECT count(rheo.append('ov', jsonb_build_object('n', n), "partition" => p, clock => '2030-01-01Z'))
  FROM generate_series(0, 7) p CROSS JOIN generate_series(1, 4) n;
SELECT rheo.create_group('ov', 'two');
CREATE TEMP TABLE ov2 AS SELECT * FROM rheo.fetch('ov', 'two', max_count => 2, clock => '2030-01-01Z');
SELECT is((SELECT count(DISTINCT "partition") FROM ov2), 2::bigint,
    'eight partitions with work, max_count 2: one lease from each of two');
SELECT is(pg_temp.locked('ov', 'two'), (SELECT array_agg("partition" ORDER BY "partition") FROM ov2),
    'the fetch locks the cursors of those two partitions only');
SELECT ok((SELECT (max("partition") - min("partition")) IN (1, 7) FROM ov2),
    'the two are consecutive in rotation order');
SELECT rheo.create_group('ov', 'all');
SELECT results_eq($$SELECT "partition", sequence FROM rheo.fetch('ov', 'all', max_count => 8, clock => '2030-01-01Z')$$,
    $$SELECT p, 1::bigint FROM generate_series(0, 7) p$$,
    'max_count 8: one lease from each of the eight');

-- The rotation goes over the partitions with work, not over the partition
-- numbers: one lease a fetch from work in partitions 0, 5 and 6 of eight
-- gives each a third.
SELECT rheo.create_stream('gap', 8);
SELECT count(rheo.append('gap', jsonb_build_object('n', n), "partition" => p, clock => '2030-01-01Z'))
  FROM unnest(ARRAY[0, 5, 6]) p CROSS JOIN generate_series(1, 20) n;
SELECT rheo.create_group('gap', 'g');
CREATE TEMP TABLE gap1 (p int);
DO $$ BEGIN
    FOR i IN 1 .. 30 LOOP
        INSERT INTO gap1 SELECT "partition" FROM rheo.fetch('gap', 'g', max_count => 1, clock => '2030-01-01Z');
    END LOOP;
END $$;
SELECT results_eq($$SELECT p, count(*) BETWEEN 8 AND 12 FROM gap1 GROUP BY p ORDER BY p$$,
    $$VALUES (0, true), (5, true), (6, true)$$,
    'single-lease fetches share out evenly over the partitions with work, wherever they lie');

-- A lease expired at the attempt limit is dead-lettered by a fetch that
-- covers its partition even when the fetch needs other partitions to
-- fill max_count.
SELECT rheo.create_stream('spent', 4);
SELECT rheo.create_group('spent', g, max_attempts => 1) FROM unnest(ARRAY['s1', 's2', 's3', 's4']) g;
SELECT rheo.append('spent', '{}', "partition" => 3, clock => '2030-01-01Z');
SELECT count(*) FROM unnest(ARRAY['s1', 's2', 's3', 's4']) g,
                     rheo.fetch('spent', g, lease_ms => 1000, clock => '2030-01-01Z');
SELECT count(rheo.append('spent', jsonb_build_object('n', n), "partition" => p, clock => '2030-01-01Z'))
  FROM generate_series(0, 2) p CROSS JOIN generate_series(1, 2) n;
SELECT results_eq(
    $$SELECT g, count(f.*) FROM unnest(ARRAY['s1', 's2', 's3', 's4']) g
        LEFT JOIN LATERAL rheo.fetch('spent', g, max_count => 1, clock => '2030-01-01 00:00:05Z') f ON true
       GROUP BY g ORDER BY g$$,
    $$VALUES ('s1', 1::bigint), ('s2', 1), ('s3', 1), ('s4', 1)$$,
    'spent: a fetch of one leases an event, wherever the rotation starts');
SELECT results_eq($$SELECT g, "partition", sequence, reason, dead_lettered_at
                      FROM unnest(ARRAY['s1', 's2', 's3', 's4']) g, rheo.dead_letters('spent', g) ORDER BY g$$,
    $$SELECT g, 3, 1::bigint, 'lease_expired'::text, '2030-01-01 00:00:05Z'::timestamptz
        FROM unnest(ARRAY['s1', 's2', 's3', 's4']) g$$,
    'the same fetch dead-letters the lease expired in partition 3');

-- 'partition' ordering: a partition whose delivery in progress is not due
-- has nothing to give, and takes no place among the max_count partitions.
SELECT rheo.create_stream('busy', 4);
SELECT count(rheo.append('busy', jsonb_build_object('n', n), "partition" => p, clock => '2030-01-01Z'))
  FROM generate_series(0, 3) p CROSS JOIN generate_series(1, 2) n;
SELECT rheo.create_group('busy', g, ordering => 'partition') FROM unnest(ARRAY['b1', 'b2', 'b3']) g;
SELECT count(*) FROM unnest(ARRAY['b1', 'b2', 'b3']) g, rheo.fetch('busy', g, max_count => 3, clock => '2030-01-01Z');
SELECT is((SELECT count(*) FROM unnest(ARRAY['b1', 'b2', 'b3']) g,
                 rheo.fetch('busy', g, max_count => 1, clock => '2030-01-01Z') f
            WHERE f.sequence = 1),
    3::bigint, 'partition: a fetch of one, three partitions busy, leases the free one''s first event');

-- A fetch with max_count 0 claims nothing but still dead-letters the
-- leases that expired at the attempt limit in its scope.
SELECT rheo.create_stream('zero');
SELECT rheo.create_group('zero', 'g', max_attempts => 1);
SELECT rheo.append('zero', '{"n": 1}');
SELECT lease_id FROM rheo.fetch('zero', 'g', clock => '2030-01-01Z');
SELECT is((SELECT count(*) FROM rheo.fetch('zero', 'g', max_count => 0, clock => '2030-01-02Z')),
    0::bigint, 'max_count 0 claims nothing');
SELECT results_eq(
    $$SELECT reason, attempt FROM rheo.dead_letters('zero', 'g')$$,
    $$VALUES ('lease_expired'::text, 1)$$,
    'max_count 0 still dead-letters a lease that expired at the attempt limit');

-- Errors in the order of checks: stream, group, arguments.
SELECT throws_ok($$SELECT * FROM rheo.fetch('missing', 'g')$$,
    'RH001', 'stream_not_found', 'fetch from a missing stream');
SELECT throws_ok($$SELECT * FROM rheo.fetch('missing', 'missing', max_count => -1)$$,
    'RH001', 'stream_not_found', 'the stream is checked before the group and the arguments');
SELECT throws_ok($$SELECT * FROM rheo.fetch('s', 'missing')$$,
    'RH002', 'group_not_found', 'fetch for a missing group');
SELECT throws_ok($$SELECT * FROM rheo.fetch('s', 'missing', max_count => -1, lease_ms => 0, partitions => '{5}')$$,
    'RH002', 'group_not_found', 'the group is checked before the arguments');
SELECT throws_ok($$SELECT * FROM rheo.fetch('s', 'g', max_count => -1)$$,
    'RH011', 'invalid_argument', 'a negative max_count');
SELECT throws_ok($$SELECT * FROM rheo.fetch('s', 'g', lease_ms => 0)$$,
    'RH011', 'invalid_argument', 'lease_ms 0');
SELECT throws_ok($$SELECT * FROM rheo.fetch('s', 'g', max_count => NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL max_count');
SELECT throws_ok($$SELECT * FROM rheo.fetch('s', 'g', lease_ms => NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL lease_ms');
SELECT throws_ok($$SELECT * FROM rheo.fetch('m', 'g', partitions => '{3}')$$,
    'RH007', 'invalid_partition', 'a partition past the last one');
SELECT throws_ok($$SELECT * FROM rheo.fetch('m', 'g', partitions => '{0,-1}')$$,
    'RH007', 'invalid_partition', 'a negative partition');

-- Ordering 'key' (reference §3.3): an event reopened by replay(event_ids) is
-- claimable while a later event of its key is leased; a retry of that
-- later one is then blocked again behind it, keeping its attempt, and
-- comes back once it is acked.
SELECT rheo.create_stream('r', clock => '2030-01-01Z');
SELECT rheo.append('r', jsonb_build_object('n', n), key => 'k', id => 'r' || n, clock => '2030-01-01Z')
  FROM generate_series(1, 3) n;
SELECT rheo.create_group('r', 'k', ordering => 'key');
SELECT rheo.ack(lease_id, clock => '2030-01-01Z') FROM rheo.fetch('r', 'k', clock => '2030-01-01Z');
CREATE TEMP TABLE r2 AS SELECT * FROM rheo.fetch('r', 'k', clock => '2030-01-01Z');
SELECT results_eq($$SELECT sequence FROM r2$$, $$VALUES (2::bigint)$$, 'key: 2 once 1 is acked');
SELECT is(rheo.replay('r', 'k', event_ids => '{r1}', clock => '2030-01-01Z'), 1::bigint, 'key: replay of 1');
CREATE TEMP TABLE r1 AS SELECT * FROM rheo.fetch('r', 'k', clock => '2030-01-01Z');
SELECT results_eq($$SELECT sequence, attempt FROM r1$$, $$VALUES (1::bigint, 1)$$,
    'key: a reopened event is claimable while a later one of its key is leased');
SELECT is(rheo.retry((SELECT lease_id FROM r2), clock => '2030-01-01Z'), 'retrying', 'key: retry of 2');
SELECT is_empty($$SELECT * FROM rheo.fetch('r', 'k', clock => '2030-01-01Z')$$,
    'key: the retry of 2 waits behind the reopened 1');
SELECT results_eq(
    $$SELECT d.sequence, d.state, d.attempt FROM rheo.deliveries d JOIN rheo.groups g USING (group_id)
       WHERE g.stream = 'r' ORDER BY d.sequence$$,
    $$VALUES (1::bigint, 'leased'::text, 1), (2, 'blocked', 1), (3, 'blocked', 0)$$,
    'key: blocked again with its attempt kept, behind 1');
SELECT rheo.ack((SELECT lease_id FROM r1), clock => '2030-01-01Z');
CREATE TEMP TABLE r3 AS SELECT * FROM rheo.fetch('r', 'k', clock => '2030-01-01Z');
SELECT results_eq($$SELECT sequence, attempt FROM r3$$, $$VALUES (2::bigint, 2)$$,
    'key: once 1 is acked, the retry of 2 comes back at its next attempt');
SELECT rheo.ack((SELECT lease_id FROM r3), clock => '2030-01-01Z');
SELECT results_eq($$SELECT sequence FROM rheo.fetch('r', 'k', clock => '2030-01-01Z')$$, $$VALUES (3::bigint)$$,
    'key: then 3');

-- Ordering 'key' over two partitions: a key blocked in one partition
-- takes no share of max_count, and each partition with claimable work
-- gets a lease.
SELECT rheo.create_stream('rr', 2, clock => '2030-01-01Z');
SELECT rheo.append_batch('rr', (SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 50) n),
                         keys => array_fill('hot'::text, ARRAY[50]), "partition" => 0, clock => '2030-01-01Z');
SELECT rheo.append_batch('rr', '[{"n": 51}, {"n": 52}]', keys => '{a,b}', "partition" => 0, clock => '2030-01-01Z');
SELECT rheo.append_batch('rr', '[{"n": 53}, {"n": 54}]', keys => '{c,d}', "partition" => 1, clock => '2030-01-01Z');
SELECT rheo.create_group('rr', 'k', ordering => 'key');
SELECT results_eq($$SELECT "partition", sequence FROM rheo.fetch('rr', 'k', max_count => 1, partitions => '{0}', clock => '2030-01-01Z')$$,
    $$VALUES (0, 1::bigint)$$, 'key: the hot key''s first event');
SELECT results_eq($$SELECT "partition", sequence FROM rheo.fetch('rr', 'k', max_count => 2, clock => '2030-01-01Z')$$,
    $$VALUES (0, 51::bigint), (1, 1)$$,
    'key: past the 49 blocked events, one lease per partition with claimable work');

-- A key's backlog longer than any window: the fetch reads on to the first
-- event it may lease, so it returns nothing only when nothing is claimable.
SELECT rheo.append_batch('rr', (SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 3000) n),
                         keys => array_fill('hot'::text, ARRAY[3000]), "partition" => 1, clock => '2030-01-01Z');
SELECT rheo.append('rr', '{"n": 0}', key => 'e', "partition" => 1, clock => '2030-01-01Z');
SELECT results_eq($$SELECT "partition", sequence FROM rheo.fetch('rr', 'k', max_count => 2, partitions => '{1}', clock => '2030-01-01Z')$$,
    $$VALUES (1, 2::bigint), (1, 3)$$, 'key: d, then the first hot event of partition 1');
SELECT results_eq($$SELECT "partition", sequence, key FROM rheo.fetch('rr', 'k', max_count => 1, partitions => '{1}', clock => '2030-01-01Z')$$,
    $$VALUES (1, 3003::bigint, 'e'::text)$$, 'key: one fetch passes the 2,999 blocked events to the next claimable one');
SELECT is((SELECT count(*) FROM rheo.deliveries d JOIN rheo.groups g USING (group_id)
            WHERE g.stream = 'rr' AND d."partition" = 1 AND d.state = 'blocked'),
    2999::bigint, 'key: each stored once, blocked');

SELECT * FROM finish();
ROLLBACK;
