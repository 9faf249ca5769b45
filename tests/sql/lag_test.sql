BEGIN;
SELECT plan(23);

-- The signature reference §6.3 pins.
SELECT has_function('rheo', 'lag', ARRAY['text', 'text', 'integer[]']::name[], 'rheo.lag has the reference''s argument types');
SELECT function_returns('rheo', 'lag', ARRAY['text', 'text', 'integer[]']::name[], 'setof record', 'rheo.lag returns setof record');

SELECT rheo.create_stream('s', 2);
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => 0, clock => '2030-01-01Z') FROM generate_series(1, 5) n;
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => 1, clock => '2030-01-01Z') FROM generate_series(6, 8) n;
SELECT rheo.create_group('s', 'g');
SELECT rheo.create_group('s', 'other');

SELECT results_eq($$SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('s', 'g')$$,
    $$VALUES (0, 0::bigint, 5::bigint, 5::bigint), (1, 0::bigint, 3::bigint, 3::bigint)$$,
    'a new group lags by every event, one row per partition in partition order');

CREATE TEMP TABLE l AS SELECT * FROM rheo.fetch('s', 'g', max_count => 3, partitions => '{0}', lease_ms => 60000, clock => '2030-01-01Z');
SELECT results_eq($$SELECT frontier, lag FROM rheo.lag('s', 'g', partitions => '{0}')$$, $$VALUES (0::bigint, 5::bigint)$$,
    'leased events are not progress');
SELECT rheo.ack((SELECT lease_id FROM l WHERE sequence = 1), clock => '2030-01-01Z');
SELECT rheo.ack((SELECT lease_id FROM l WHERE sequence = 3), clock => '2030-01-01Z');
SELECT results_eq($$SELECT frontier, lag FROM rheo.lag('s', 'g', partitions => '{0}')$$, $$VALUES (1::bigint, 4::bigint)$$,
    'ack 1 and 3 with 2 in flight: frontier 1');
SELECT rheo.ack((SELECT lease_id FROM l WHERE sequence = 2), clock => '2030-01-01Z');
SELECT results_eq($$SELECT frontier, lag FROM rheo.lag('s', 'g', partitions => '{0}')$$, $$VALUES (3::bigint, 2::bigint)$$,
    'ack 2: frontier 3');

CREATE TEMP TABLE m AS SELECT * FROM rheo.fetch('s', 'g', max_count => 2, partitions => '{0}', lease_ms => 60000, clock => '2030-01-01Z');
SELECT rheo.retry((SELECT lease_id FROM m WHERE sequence = 4), delay_ms => 1000, clock => '2030-01-01Z');
SELECT rheo.reject((SELECT lease_id FROM m WHERE sequence = 5), clock => '2030-01-01Z');
SELECT results_eq($$SELECT frontier, lag FROM rheo.lag('s', 'g', partitions => '{0}')$$, $$VALUES (3::bigint, 2::bigint)$$,
    'a retry waiting below a dead letter holds the frontier');
SELECT rheo.ack((SELECT lease_id FROM rheo.fetch('s', 'g', max_count => 1, partitions => '{0}', clock => '2030-01-01 00:00:01Z')),
                clock => '2030-01-01 00:00:01Z');
SELECT results_eq($$SELECT frontier, high_watermark, lag FROM rheo.lag('s', 'g', partitions => '{0}')$$,
    $$VALUES (5::bigint, 5::bigint, 0::bigint)$$,
    'the retried event acked: the frontier passes the dead letter to the high watermark');

SELECT results_eq($$SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('s', 'g')$$,
    $$VALUES (0, 5::bigint, 5::bigint, 0::bigint), (1, 0::bigint, 3::bigint, 3::bigint)$$,
    'partitions not consumed keep their lag');
SELECT results_eq($$SELECT "partition", lag FROM rheo.lag('s', 'g', partitions => '{1}')$$, $$VALUES (1, 3::bigint)$$,
    'partitions selects rows');
SELECT results_eq($$SELECT "partition" FROM rheo.lag('s', 'g', partitions => '{1,0}')$$, $$VALUES (0), (1)$$,
    'rows come in partition order whatever the order asked');
SELECT is_empty($$SELECT * FROM rheo.lag('s', 'g', partitions => '{}')$$, 'an empty partitions list returns no rows');
SELECT results_eq($$SELECT "partition" FROM rheo.lag('s', 'g', partitions => '{1,1}')$$, $$VALUES (1)$$,
    'a partition listed twice gives one row');
SELECT results_eq($$SELECT "partition", frontier, lag FROM rheo.lag('s', 'other')$$,
    $$VALUES (0, 0::bigint, 5::bigint), (1, 0::bigint, 3::bigint)$$,
    'groups do not affect each other');

SELECT rheo.append('s', '{}', "partition" => 1, clock => '2030-01-01Z');
SELECT results_eq($$SELECT high_watermark, lag FROM rheo.lag('s', 'g', partitions => '{1}')$$, $$VALUES (4::bigint, 4::bigint)$$,
    'an append raises the high watermark and the lag');

SELECT rheo.create_stream('empty', 3);
SELECT rheo.create_group('empty', 'g');
SELECT results_eq($$SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('empty', 'g')$$,
    $$VALUES (0, 0::bigint, 0::bigint, 0::bigint), (1, 0::bigint, 0::bigint, 0::bigint), (2, 0::bigint, 0::bigint, 0::bigint)$$,
    'an empty stream: zero everywhere');
SELECT rheo.create_group('s', 'ahead', start_after => 10);
SELECT results_eq($$SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('s', 'ahead')$$,
    $$VALUES (0, 10::bigint, 5::bigint, 0::bigint), (1, 10::bigint, 4::bigint, 0::bigint)$$,
    'a frontier past the high watermark has lag 0, never negative');

SELECT throws_ok($$SELECT * FROM rheo.lag('missing', 'g')$$, 'RH001', 'stream_not_found', 'lag of a missing stream');
SELECT throws_ok($$SELECT * FROM rheo.lag('missing', 'missing', partitions => '{9}')$$,
    'RH001', 'stream_not_found', 'the stream is checked first');
SELECT throws_ok($$SELECT * FROM rheo.lag('s', 'missing', partitions => '{9}')$$,
    'RH002', 'group_not_found', 'the group is checked before the partitions');
SELECT throws_ok($$SELECT * FROM rheo.lag('s', 'g', partitions => '{2}')$$, 'RH007', 'invalid_partition', 'a partition past the last one');

SELECT results_eq($$SELECT "partition", high_watermark FROM rheo.lag(stream => 's', group_name => 'g', partitions => '{1}')$$,
    $$VALUES (1, 4::bigint)$$, 'lag called with every argument by name');

-- The frontier is written out in lag (Citus routes one statement); the
-- helper that computed it is gone, upgrades included.
SELECT hasnt_function('rheo', '_frontier', ARRAY['integer', 'integer', 'bigint']::name[],
    'no rheo._frontier helper is left');

SELECT * FROM finish();
ROLLBACK;
