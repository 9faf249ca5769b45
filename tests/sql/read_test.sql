BEGIN;
SELECT plan(20);

-- The signature reference §4.3 pins.
SELECT has_function('rheo', 'read', ARRAY['text', 'bigint', 'integer', 'integer']::name[], 'rheo.read has the reference''s argument types');
SELECT function_returns('rheo', 'read', ARRAY['text', 'bigint', 'integer', 'integer']::name[], 'setof rheo.events', 'rheo.read returns setof rheo.events');

SELECT rheo.create_stream('s', 2);
SELECT rheo.create_stream('other');
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => 0, clock => '2030-01-01Z') FROM generate_series(1, 5) n;
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => 1, clock => '2030-01-01Z') FROM generate_series(6, 7) n;
SELECT rheo.append('other', '{"n": 0}');

SELECT results_eq(
    $$SELECT * FROM rheo.read('s')$$,
    $$SELECT * FROM rheo.events WHERE stream = 's' AND "partition" = 0 ORDER BY sequence$$,
    'by default read returns partition 0 from the beginning, every column, in sequence order');
SELECT results_eq(
    $$SELECT sequence, (payload->>'n')::int FROM rheo.read('s', after => 2)$$,
    $$VALUES (3::bigint, 3), (4, 4), (5, 5)$$,
    'after: only sequences greater than it');
SELECT results_eq(
    $$SELECT sequence FROM rheo.read('s', after => 2, max_count => 2)$$,
    $$VALUES (3::bigint), (4)$$,
    'max_count limits the rows');
SELECT results_eq(
    $$SELECT "partition", sequence, (payload->>'n')::int FROM rheo.read('s', "partition" => 1)$$,
    $$VALUES (1, 1::bigint, 6), (1, 2::bigint, 7)$$,
    'partition selects the partition');
SELECT results_eq(
    $$SELECT sequence FROM rheo.read('s', 3, 1, 0)$$,
    $$VALUES (4::bigint)$$,
    'positional arguments: after, max_count, partition');
SELECT is_empty($$SELECT * FROM rheo.read('s', after => 5)$$,
    'nothing after the last sequence');
SELECT is_empty($$SELECT * FROM rheo.read('s', max_count => 0)$$,
    'max_count 0 returns nothing');
SELECT results_eq(
    $$SELECT count(*) FROM rheo.read('s', after => -10)$$,
    $$VALUES (5::bigint)$$,
    'a negative after reads from the beginning');
SELECT is((SELECT count(*) FROM rheo.read('s', max_count => 1000)), 5::bigint,
    'a read returns only its own stream''s events');

SELECT throws_ok($$SELECT * FROM rheo.read('missing')$$,
    'RH001', 'stream_not_found', 'read of a missing stream');
SELECT throws_ok($$SELECT * FROM rheo.read('missing', max_count => -1, "partition" => 9)$$,
    'RH001', 'stream_not_found', 'the stream is checked before the arguments');
SELECT throws_ok($$SELECT * FROM rheo.read('s', max_count => -1)$$,
    'RH011', 'invalid_argument', 'a negative max_count');
SELECT throws_ok($$SELECT * FROM rheo.read('s', "partition" => 2)$$,
    'RH007', 'invalid_partition', 'a partition past the last one');
SELECT throws_ok($$SELECT * FROM rheo.read('s', "partition" => -1)$$,
    'RH007', 'invalid_partition', 'a negative partition');
SELECT throws_ok($$SELECT * FROM rheo.read('s', after => NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL after');
SELECT throws_ok($$SELECT * FROM rheo.read('s', max_count => NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL max_count');
SELECT throws_ok($$SELECT * FROM rheo.read('s', "partition" => NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL partition');

SELECT results_eq(
    $$SELECT "partition", sequence FROM rheo.read(stream => 's', after => 1, max_count => 1, "partition" => 1)$$,
    $$VALUES (1, 2::bigint)$$,
    'read called with every argument by name');

SELECT * FROM finish();
ROLLBACK;
