BEGIN;
SELECT plan(31);

-- The signature reference §6.2 pins.
SELECT has_function('rheo', 'reset_group', ARRAY['text', 'text', 'boolean', 'bigint', 'timestamp with time zone', 'integer[]', 'timestamp with time zone']::name[], 'rheo.reset_group has the reference''s argument types');
SELECT function_returns('rheo', 'reset_group', ARRAY['text', 'text', 'boolean', 'bigint', 'timestamp with time zone', 'integer[]', 'timestamp with time zone']::name[], 'void', 'rheo.reset_group returns void');

SELECT rheo.create_stream('s', 2);
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => 0, ts => t, clock => '2030-01-01Z')
  FROM (VALUES (1, '2030-01-01 01:00:00Z'::timestamptz), (2, '2030-01-01 02:00:00Z'),
               (3, '2030-01-01 03:00:00Z'), (4, '2030-01-01 04:00:00Z')) v(n, t);
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => 1, ts => t, clock => '2030-01-01Z')
  FROM (VALUES (5, '2030-01-01 01:00:00Z'::timestamptz), (6, '2030-01-01 02:00:00Z'),
               (7, '2030-01-01 03:00:00Z')) v(n, t);
SELECT rheo.create_group('s', 'g', max_attempts => 2);

-- Partition 0: 1 acked, 2 dead-lettered, 3 waiting for a retry, 4 leased.
-- Partition 1: 1 acked, 2 dead-lettered, 3 leased.
CREATE TEMP TABLE l AS SELECT * FROM rheo.fetch('s', 'g', max_count => 10, lease_ms => 60000, clock => '2030-01-01Z');
SELECT rheo.ack((SELECT lease_id FROM l WHERE "partition" = 0 AND sequence = 1), clock => '2030-01-01Z');
SELECT rheo.reject((SELECT lease_id FROM l WHERE "partition" = 0 AND sequence = 2), clock => '2030-01-01Z');
SELECT rheo.retry((SELECT lease_id FROM l WHERE "partition" = 0 AND sequence = 3), delay_ms => 600000, clock => '2030-01-01Z');
SELECT rheo.ack((SELECT lease_id FROM l WHERE "partition" = 1 AND sequence = 1), clock => '2030-01-01Z');
SELECT rheo.reject((SELECT lease_id FROM l WHERE "partition" = 1 AND sequence = 2), clock => '2030-01-01Z');

-- confirm is checked before anything else.
SELECT throws_ok($$SELECT rheo.reset_group('s', 'g')$$,
    'RH008', 'confirm_required', 'reset_group without confirm');
SELECT throws_ok($$SELECT rheo.reset_group('s', 'g', confirm => false)$$,
    'RH008', 'confirm_required', 'reset_group with confirm => false');
SELECT throws_ok($$SELECT rheo.reset_group('missing', 'g')$$,
    'RH008', 'confirm_required', 'confirm is checked before the stream');
SELECT throws_ok($$SELECT rheo.reset_group('s', 'missing')$$,
    'RH008', 'confirm_required', 'confirm is checked before the group');
SELECT throws_ok($$SELECT rheo.reset_group('s', 'g', start_after => 1, start_at => '2030-01-01Z', partitions => '{9}')$$,
    'RH008', 'confirm_required', 'confirm is checked before the arguments');
SELECT throws_ok($$SELECT rheo.reset_group('missing', 'g', confirm => true)$$,
    'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT rheo.reset_group('missing', 'missing', confirm => true, start_after => -1)$$,
    'RH001', 'stream_not_found', 'the stream is checked before the group and the arguments');
SELECT throws_ok($$SELECT rheo.reset_group('s', 'missing', confirm => true, start_after => -1)$$,
    'RH002', 'group_not_found', 'the group is checked before the arguments');
SELECT throws_ok($$SELECT rheo.reset_group('s', 'g', confirm => true, start_after => 1, start_at => '2030-01-01Z')$$,
    'RH011', 'invalid_argument', 'start_after and start_at together');
SELECT throws_ok($$SELECT rheo.reset_group('s', 'g', confirm => true, start_after => -1)$$,
    'RH011', 'invalid_argument', 'a negative start_after');
SELECT throws_ok($$SELECT rheo.reset_group('s', 'g', confirm => true, partitions => '{2}')$$,
    'RH007', 'invalid_partition', 'a partition past the last one');
SELECT results_eq($$SELECT "partition", sequence FROM rheo.dead_letters('s', 'g')$$,
    $$VALUES (0, 2::bigint), (1, 2::bigint)$$,
    'failed resets changed nothing');

-- One partition: the other keeps its state.
SELECT lives_ok($$SELECT rheo.reset_group('s', 'g', confirm => true, partitions => '{1}', clock => '2030-01-01Z')$$,
    'reset one partition');
SELECT throws_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM l WHERE "partition" = 1 AND sequence = 3), '2030-01-01Z'),
    'RH004', 'stale_lease', 'a lease in a reset partition is stale');
SELECT lives_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM l WHERE "partition" = 0 AND sequence = 4), '2030-01-01Z'),
    'a lease in a partition not listed is still held');
SELECT results_eq($$SELECT "partition", sequence FROM rheo.dead_letters('s', 'g')$$, $$VALUES (0, 2::bigint)$$,
    'dead letters of the reset partition are cleared, the others kept');
SELECT results_eq($$SELECT "partition", frontier FROM rheo.lag('s', 'g')$$, $$VALUES (0, 2::bigint), (1, 0::bigint)$$,
    'the reset partition starts at the beginning; the other keeps its frontier');
CREATE TEMP TABLE after_one AS SELECT * FROM rheo.fetch('s', 'g', max_count => 10, clock => '2030-01-01Z');
SELECT results_eq($$SELECT "partition", sequence, attempt FROM after_one$$,
    $$VALUES (1, 1::bigint, 1), (1, 2::bigint, 1), (1, 3::bigint, 1)$$,
    'the reset partition is offered again from the beginning at attempt 1; the pending retry still waits');

-- Every partition.
SELECT lives_ok($$SELECT rheo.reset_group('s', 'g', confirm => true, clock => '2030-01-01Z')$$,
    'reset every partition');
SELECT throws_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM after_one WHERE sequence = 1), '2030-01-01Z'),
    'RH004', 'stale_lease', 'leases taken before the reset are stale');
SELECT is_empty($$SELECT * FROM rheo.dead_letters('s', 'g')$$, 'every dead letter is cleared');
SELECT results_eq(
    $$SELECT inflight, pending_retry, dead_letters, lag FROM rheo.group_info('s', 'g', clock => '2030-01-01Z')$$,
    $$VALUES (0::bigint, 0::bigint, 0::bigint, 7::bigint)$$,
    'no leases, no pending retries, no dead letters; the whole stream to do');
SELECT results_eq($$SELECT "partition", sequence, attempt FROM rheo.fetch('s', 'g', max_count => 10, clock => '2030-01-01Z')$$,
    $$VALUES (0, 1::bigint, 1), (0, 2::bigint, 1), (0, 3::bigint, 1), (0, 4::bigint, 1), (1, 1::bigint, 1), (1, 2::bigint, 1), (1, 3::bigint, 1)$$,
    'every event is offered again at attempt 1');

-- Placing the cursors like create_group.
SELECT rheo.reset_group('s', 'g', confirm => true, start_after => 2, clock => '2030-01-01Z');
SELECT results_eq($$SELECT "partition", frontier FROM rheo.lag('s', 'g')$$, $$VALUES (0, 2::bigint), (1, 2::bigint)$$,
    'start_after puts the frontier at N');
SELECT results_eq($$SELECT "partition", sequence FROM rheo.fetch('s', 'g', max_count => 10, clock => '2030-01-01Z')$$,
    $$VALUES (0, 3::bigint), (0, 4::bigint), (1, 3::bigint)$$,
    'start_after offers only what follows N');
SELECT rheo.reset_group('s', 'g', confirm => true, start_at => '2030-01-01 03:30:00Z', clock => '2030-01-01Z');
SELECT results_eq($$SELECT "partition", frontier FROM rheo.lag('s', 'g')$$, $$VALUES (0, 3::bigint), (1, 3::bigint)$$,
    'start_at: the first event with ts >= T, or past the high watermark');
SELECT rheo.reset_group('s', 'g', confirm => true, start_after => 1, partitions => '{0}', clock => '2030-01-01Z');
SELECT results_eq($$SELECT "partition", frontier FROM rheo.lag('s', 'g')$$, $$VALUES (0, 1::bigint), (1, 3::bigint)$$,
    'start_after in one partition leaves the other where it was');
SELECT results_eq($$SELECT "partition", sequence FROM rheo.fetch('s', 'g', max_count => 10, clock => '2030-01-01Z')$$,
    $$VALUES (0, 2::bigint), (0, 3::bigint), (0, 4::bigint)$$,
    'and offers what follows');

SELECT lives_ok(
    $$SELECT rheo.reset_group(stream => 's', group_name => 'g', confirm => true, start_after => NULL, start_at => NULL,
                              partitions => '{1}', clock => '2030-01-01Z')$$,
    'reset_group called with every argument by name');

SELECT * FROM finish();
ROLLBACK;
