BEGIN;
SELECT plan(5);

SELECT rheo.create_stream('s', 3, clock => '2030-01-01Z');
SELECT count(*) FROM rheo.append_batch('s', '[{}, {}]', "partition" => 1, clock => '2030-01-01Z');
SELECT rheo.append('s', '{}', "partition" => 2, clock => '2030-01-01Z');

SELECT results_eq($$SELECT * FROM rheo.stream_info('s')$$,
    $$VALUES (0, 1::bigint, 0::bigint, NULL::interval), (1, 1::bigint, 2::bigint, NULL::interval),
             (2, 1::bigint, 1::bigint, NULL::interval)$$,
    'one row per partition, in order: nothing pruned, no retention');
SELECT rheo.set_retention('s', '1 day');
SELECT is((SELECT DISTINCT max_age FROM rheo.stream_info('s')), '1 day'::interval, 'the retention is shown');
SELECT is(rheo.prune('s', clock => '2030-01-03Z'), 3::bigint, 'a prune of every event');
SELECT results_eq($$SELECT "partition", low_watermark, high_watermark FROM rheo.stream_info('s')$$,
    $$VALUES (0, 1::bigint, 0::bigint), (1, 3::bigint, 2::bigint), (2, 2::bigint, 1::bigint)$$,
    'with no event retained, the low watermark is the high watermark + 1');
SELECT throws_ok($$SELECT * FROM rheo.stream_info('missing')$$, 'RH001', 'stream_not_found', 'a missing stream');

SELECT * FROM finish();
ROLLBACK;
