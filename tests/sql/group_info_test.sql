BEGIN;
SELECT plan(13);

-- The signature reference §6.4 pins.
SELECT has_function('rheo', 'group_info', ARRAY['text', 'text', 'timestamp with time zone']::name[], 'rheo.group_info has the reference''s argument types');
SELECT function_returns('rheo', 'group_info', ARRAY['text', 'text', 'timestamp with time zone']::name[], 'setof record', 'rheo.group_info returns setof record');

SELECT rheo.create_stream('s', 2);
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => p, ts => t, clock => '2030-01-01Z')
  FROM (VALUES (1, 0, '2030-01-01 05:00:00Z'::timestamptz), (2, 0, '2030-01-01 01:00:00Z'), (3, 0, '2030-01-01 03:00:00Z'),
               (4, 1, '2030-01-01 04:00:00Z'), (5, 1, '2030-01-01 02:00:00Z')) v(n, p, t)
 ORDER BY n;
SELECT rheo.create_group('s', 'g', max_attempts => 2);

SELECT results_eq(
    $$SELECT lag, inflight, pending_retry, dead_letters, oldest_unsettled_ts FROM rheo.group_info('s', 'g', clock => '2030-01-01Z')$$,
    $$VALUES (5::bigint, 0::bigint, 0::bigint, 0::bigint, '2030-01-01 01:00:00Z'::timestamptz)$$,
    'a new group: all lag, and the oldest ts among events not offered yet');

CREATE TEMP TABLE l AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 2, partitions => '{0}', lease_ms => 1000, clock => '2030-01-01 00:00:00Z');
SELECT results_eq(
    $$SELECT inflight, pending_retry FROM rheo.group_info('s', 'g', clock => '2030-01-01 00:00:00.5Z')$$,
    $$VALUES (2::bigint, 0::bigint)$$,
    'leases not expired are in flight');
SELECT results_eq(
    $$SELECT inflight, pending_retry FROM rheo.group_info('s', 'g', clock => '2030-01-01 00:00:01Z')$$,
    $$VALUES (0::bigint, 2::bigint)$$,
    'expired leases are pending, not in flight');

SELECT rheo.ack((SELECT lease_id FROM l WHERE sequence = 2), clock => '2030-01-01 00:00:00.5Z');
SELECT results_eq(
    $$SELECT lag, inflight, oldest_unsettled_ts FROM rheo.group_info('s', 'g', clock => '2030-01-01 00:00:00.5Z')$$,
    $$VALUES (5::bigint, 1::bigint, '2030-01-01 02:00:00Z'::timestamptz)$$,
    'acking the oldest event moves oldest_unsettled_ts; the hole keeps the lag');

CREATE TEMP TABLE m AS SELECT * FROM rheo.fetch('s', 'g', partitions => '{1}', lease_ms => 1000, clock => '2030-01-01 00:00:00Z');
SELECT rheo.reject((SELECT lease_id FROM m WHERE sequence = 1), clock => '2030-01-01 00:00:00Z');
SELECT rheo.retry((SELECT lease_id FROM m WHERE sequence = 2), delay_ms => 5000, clock => '2030-01-01 00:00:00Z');
SELECT results_eq(
    $$SELECT lag, inflight, pending_retry, dead_letters, oldest_unsettled_ts FROM rheo.group_info('s', 'g', clock => '2030-01-01 00:00:00.5Z')$$,
    $$VALUES (4::bigint, 1::bigint, 1::bigint, 1::bigint, '2030-01-01 02:00:00Z'::timestamptz)$$,
    'a waiting retry is pending and unsettled, a reject is a dead letter and settled');
SELECT results_eq(
    $$SELECT inflight, pending_retry FROM rheo.group_info('s', 'g', clock => '2030-01-01 00:00:02Z')$$,
    $$VALUES (0::bigint, 2::bigint)$$,
    'the expired lease and the retry are both pending');

SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM rheo.fetch('s', 'g', max_count => 10, clock => '2030-01-01 00:00:05Z')),
                      clock => '2030-01-01 00:00:05Z');
SELECT results_eq(
    $$SELECT lag, inflight, pending_retry, dead_letters, oldest_unsettled_ts FROM rheo.group_info('s', 'g', clock => '2030-01-01 00:00:05Z')$$,
    $$VALUES (0::bigint, 0::bigint, 0::bigint, 1::bigint, NULL::timestamptz)$$,
    'everything settled: no lag, nothing unsettled');
SELECT rheo.append('s', '{}', "partition" => 1, ts => '2030-02-01Z', clock => '2030-01-01Z');
SELECT results_eq(
    $$SELECT lag, oldest_unsettled_ts FROM rheo.group_info('s', 'g', clock => '2030-01-01 00:00:05Z')$$,
    $$VALUES (1::bigint, '2030-02-01Z'::timestamptz)$$,
    'a new event is unsettled before it is offered');

SELECT throws_ok($$SELECT * FROM rheo.group_info('missing', 'g')$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT * FROM rheo.group_info('s', 'missing')$$, 'RH002', 'group_not_found', 'a missing group');

SELECT results_eq($$SELECT lag FROM rheo.group_info(stream => 's', group_name => 'g', clock => '2030-01-01Z')$$,
    $$VALUES (1::bigint)$$, 'group_info called with every argument by name');

SELECT * FROM finish();
ROLLBACK;
