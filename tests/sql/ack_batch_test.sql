BEGIN;
SELECT plan(15);

-- The signature reference §5.4 pins.
SELECT has_function('rheo', 'ack_batch', ARRAY['uuid[]', 'timestamp with time zone']::name[], 'rheo.ack_batch has the reference''s argument types');
SELECT function_returns('rheo', 'ack_batch', ARRAY['uuid[]', 'timestamp with time zone']::name[], 'setof record', 'rheo.ack_batch returns setof record');

SELECT rheo.create_stream('s');
SELECT rheo.append('s', jsonb_build_object('n', n), clock => '2030-01-01Z') FROM generate_series(1, 8) n;
SELECT rheo.create_group('s', 'g');
CREATE TEMP TABLE l AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 8, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');

SELECT set_eq(
    format('SELECT lease_id, ok FROM rheo.ack_batch(%L, clock => %L)',
           (SELECT array_agg(lease_id ORDER BY sequence) FROM l WHERE sequence <= 3), '2030-01-01Z'),
    $$SELECT lease_id, true FROM l WHERE sequence <= 3$$,
    'ack_batch settles every held lease: one row per id, ok = true');
SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'g')$$, $$VALUES (3::bigint)$$,
    'the acked events are terminal');

SELECT set_eq(
    format('SELECT lease_id, ok FROM rheo.ack_batch(%L, clock => %L)',
           ARRAY[(SELECT lease_id FROM l WHERE sequence = 1), (SELECT lease_id FROM l WHERE sequence = 4)], '2030-01-01Z'),
    format('VALUES (%L::uuid, false), (%L::uuid, true)',
           (SELECT lease_id FROM l WHERE sequence = 1), (SELECT lease_id FROM l WHERE sequence = 4)),
    'a stale lease reports ok = false without failing the others');

CREATE TEMP TABLE u AS SELECT gen_random_uuid() AS lease_id;
SELECT results_eq(
    format('SELECT lease_id, ok FROM rheo.ack_batch(ARRAY[%L::uuid])', (SELECT lease_id FROM u)),
    $$SELECT lease_id, false FROM u$$,
    'a lease id that was never issued reports ok = false');

SELECT bag_eq(
    format('SELECT lease_id, ok FROM rheo.ack_batch(%L, clock => %L)',
           ARRAY[(SELECT lease_id FROM l WHERE sequence = 5), (SELECT lease_id FROM l WHERE sequence = 5)], '2030-01-01Z'),
    format('VALUES (%L::uuid, true), (%L::uuid, false)',
           (SELECT lease_id FROM l WHERE sequence = 5), (SELECT lease_id FROM l WHERE sequence = 5)),
    'a duplicate in the array: the first settles, the rest report ok = false');
SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'g')$$, $$VALUES (5::bigint)$$,
    'the valid leases of the mixed batches were acked');

SELECT is_empty($$SELECT * FROM rheo.ack_batch('{}')$$, 'an empty array returns no rows');
SELECT throws_ok($$SELECT * FROM rheo.ack_batch(NULL)$$,
    'RH011', 'invalid_argument', 'a NULL array');

-- Expired but not re-claimed leases can still be settled; re-leased ones cannot.
SELECT rheo.fetch('s', 'g', max_count => 1, clock => '2030-01-01 00:00:01Z');
SELECT set_eq(
    format('SELECT l.sequence, b.ok FROM rheo.ack_batch(%L, clock => %L) b JOIN l USING (lease_id)',
           (SELECT array_agg(lease_id) FROM l WHERE sequence > 5), '2030-01-01 00:00:02Z'),
    $$VALUES (6::bigint, false), (7, true), (8, true)$$,
    'an expired lease that no one re-claimed is acked; one re-leased is stale');

-- Transactional: rolled back with the caller's savepoint.
SELECT rheo.append('s', '{"n": 9}', clock => '2030-01-01Z');
CREATE TEMP TABLE m AS SELECT * FROM rheo.fetch('s', 'g', clock => '2030-01-01 00:00:05Z') WHERE sequence = 9;
SAVEPOINT before_ack;
SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM m), clock => '2030-01-01 00:00:05Z');
ROLLBACK TO SAVEPOINT before_ack;
SELECT results_eq(
    format('SELECT lease_id, ok FROM rheo.ack_batch(%L, clock => %L)', ARRAY(SELECT lease_id FROM m), '2030-01-01 00:00:05Z'),
    $$SELECT lease_id, true FROM m$$,
    'an ack_batch rolled back leaves its leases held');

SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'g')$$, $$VALUES (5::bigint)$$,
    '6 is leased again, so the frontier stays at 5');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), 9::bigint,
    'acks delete no event');

SELECT rheo.append('s', '{"n": 10}', clock => '2030-01-01Z');
SELECT results_eq(
    format('SELECT ok FROM rheo.ack_batch(lease_ids => %L, clock => %L)',
           ARRAY(SELECT lease_id FROM rheo.fetch('s', 'g', clock => '2030-01-01 00:00:05Z') WHERE sequence = 10), '2030-01-01 00:00:05Z'),
    $$VALUES (true)$$,
    'ack_batch called with every argument by name');

SELECT * FROM finish();
ROLLBACK;
