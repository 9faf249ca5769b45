BEGIN;
SELECT plan(38);

-- The signature reference §6.1 pins.
SELECT has_function('rheo', 'replay', ARRAY['text', 'text', 'bigint', 'text[]', 'timestamp with time zone', 'integer[]', 'timestamp with time zone']::name[], 'rheo.replay has the reference''s argument types');
SELECT function_returns('rheo', 'replay', ARRAY['text', 'text', 'bigint', 'text[]', 'timestamp with time zone', 'integer[]', 'timestamp with time zone']::name[], 'bigint', 'rheo.replay returns bigint');

SELECT rheo.create_stream('s');
SELECT rheo.append('s', jsonb_build_object('n', n), clock => '2030-01-01Z') FROM generate_series(1, 8) n;
SELECT rheo.create_group('s', 'g', max_attempts => 3);

-- Group g: 1 and 2 acked, 3 dead-lettered, 4 waiting for a retry, 5 to 8
-- leased again at attempt 2; 9 and 10 appended but not offered yet.
CREATE TEMP TABLE l AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 8, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');
SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM l WHERE sequence <= 2), clock => '2030-01-01 00:00:00Z');
SELECT rheo.reject((SELECT lease_id FROM l WHERE sequence = 3), clock => '2030-01-01 00:00:00Z');
SELECT rheo.retry((SELECT lease_id FROM l WHERE sequence = 4), delay_ms => 600000, clock => '2030-01-01 00:00:00Z');
CREATE TEMP TABLE l2 AS
    SELECT * FROM rheo.fetch('s', 'g', lease_ms => 60000, clock => '2030-01-01 00:00:01Z');
SELECT results_eq($$SELECT sequence, attempt FROM l2$$, $$VALUES (5::bigint, 2), (6, 2), (7, 2), (8, 2)$$,
    'setup: 5 to 8 are leased at attempt 2');
SELECT rheo.append('s', jsonb_build_object('n', n), clock => '2030-01-01Z') FROM generate_series(9, 10) n;

-- from_sequence.
SELECT is(rheo.replay('s', 'g', from_sequence => 2, clock => '2030-01-01 00:00:02Z'), 6::bigint,
    'replay from_sequence counts the offered events after it: dead-lettered, pending and leased');
SELECT results_eq($$SELECT frontier, high_watermark FROM rheo.lag('s', 'g')$$, $$VALUES (2::bigint, 10::bigint)$$,
    'the frontier moves back to from_sequence');
SELECT is_empty($$SELECT * FROM rheo.dead_letters('s', 'g')$$,
    'the replayed dead letters are cleared');
SELECT throws_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM l2 WHERE sequence = 5), '2030-01-01 00:00:02Z'),
    'RH004', 'stale_lease', 'a lease in flight during the replay is stale: ack');
SELECT throws_ok(format('SELECT rheo.renew(%L, clock => %L)', (SELECT lease_id FROM l2 WHERE sequence = 6), '2030-01-01 00:00:02Z'),
    'RH004', 'stale_lease', 'a lease in flight during the replay is stale: renew');
SELECT throws_ok(format('SELECT rheo.retry(%L, clock => %L)', (SELECT lease_id FROM l2 WHERE sequence = 7), '2030-01-01 00:00:02Z'),
    'RH004', 'stale_lease', 'a lease in flight during the replay is stale: retry');
SELECT throws_ok(format('SELECT rheo.reject(%L, clock => %L)', (SELECT lease_id FROM l2 WHERE sequence = 8), '2030-01-01 00:00:02Z'),
    'RH004', 'stale_lease', 'a lease in flight during the replay is stale: reject');
CREATE TEMP TABLE r1 AS SELECT * FROM rheo.fetch('s', 'g', max_count => 100, clock => '2030-01-01 00:00:02Z');
SELECT results_eq($$SELECT sequence, attempt FROM r1$$,
    $$SELECT s::bigint, 1 FROM generate_series(3, 10) s$$,
    'everything after from_sequence is claimable at once, attempts counted from 1 again');
SELECT is(rheo.replay('s', 'g', from_sequence => 20, clock => '2030-01-01 00:00:02Z'), 0::bigint,
    'from_sequence past everything offered replays nothing');
SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'g')$$, $$VALUES (2::bigint)$$,
    'a replay past the cursor does not move the frontier');
SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM r1), clock => '2030-01-01 00:00:02Z');
SELECT is(rheo.replay('s', 'g', from_sequence => 0, clock => '2030-01-01 00:00:03Z'), 10::bigint,
    'from_sequence 0 reopens every acked event');
SELECT results_eq($$SELECT frontier, lag FROM rheo.lag('s', 'g')$$, $$VALUES (0::bigint, 10::bigint)$$,
    'after a full replay the group lags by the whole partition');

SELECT rheo.create_group('s', 'fresh');
SELECT is(rheo.replay('s', 'fresh', from_sequence => 5), 0::bigint,
    'a replay on a group that was offered nothing counts nothing');
SELECT results_eq($$SELECT min(sequence), count(*) FROM rheo.fetch('s', 'fresh', max_count => 100)$$,
    $$VALUES (1::bigint, 10::bigint)$$,
    'replay never skips ahead: events up to from_sequence are still offered');

-- event_ids: only terminal events reopen.
SELECT rheo.create_group('s', 'ids');
CREATE TEMP TABLE m AS
    SELECT * FROM rheo.fetch('s', 'ids', max_count => 5, lease_ms => 60000, clock => '2030-01-01 00:00:00Z');
SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM m WHERE sequence <= 2), clock => '2030-01-01 00:00:00Z');
SELECT rheo.reject((SELECT lease_id FROM m WHERE sequence = 3), clock => '2030-01-01 00:00:00Z');
SELECT rheo.retry((SELECT lease_id FROM m WHERE sequence = 4), delay_ms => 600000, clock => '2030-01-01 00:00:00Z');
SELECT is(rheo.replay('s', 'ids',
                      event_ids => ARRAY(SELECT id FROM rheo.events WHERE stream = 's' AND sequence IN (1, 3, 4, 5, 6))
                                   || ARRAY['no-such-id'],
                      clock => '2030-01-01 00:00:01Z'),
    2::bigint,
    'event_ids reopens the acked and dead-lettered ones; pending, leased, unoffered and unknown ids are ignored');
SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'ids')$$, $$VALUES (0::bigint)$$,
    'the frontier moves back below the lowest reopened event');
SELECT is_empty($$SELECT * FROM rheo.dead_letters('s', 'ids')$$, 'the reopened dead letter is cleared');
SELECT lives_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM m WHERE sequence = 5), '2030-01-01 00:00:01Z'),
    'a lease on an event not selected by event_ids stays valid');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('s', 'ids', max_count => 3, clock => '2030-01-01 00:00:01Z')$$,
    $$VALUES (1::bigint, 1), (3, 1), (6, 1)$$,
    'the reopened events are claimable at attempt 1, before new ones; the pending retry still waits');
SELECT is(rheo.replay('s', 'ids', event_ids => '{}'), 0::bigint, 'an empty event_ids reopens nothing');
SELECT is(rheo.replay('s', 'ids', event_ids => ARRAY(SELECT id FROM rheo.events WHERE stream = 's' AND sequence IN (2, 2))
                                                  || ARRAY(SELECT id FROM rheo.events WHERE stream = 's' AND sequence = 2),
                      clock => '2030-01-01 00:00:01Z'),
    1::bigint, 'an id given twice reopens its event once');
SELECT rheo.create_stream('elsewhere');
SELECT rheo.append('elsewhere', '{}', id => 'only-elsewhere');
SELECT is(rheo.replay('s', 'ids', event_ids => '{only-elsewhere}'), 0::bigint,
    'an id of another stream is unknown here');

-- from_ts per partition; partitions restrict every selector.
SELECT rheo.create_stream('m', 2);
SELECT rheo.append('m', jsonb_build_object('n', n), "partition" => 0, ts => t, clock => '2030-01-01Z')
  FROM (VALUES (1, '2030-01-01 01:00:00Z'::timestamptz), (2, '2030-01-01 03:00:00Z'), (3, '2030-01-01 02:00:00Z')) v(n, t);
SELECT rheo.append('m', jsonb_build_object('n', n), "partition" => 1, ts => t, clock => '2030-01-01Z')
  FROM (VALUES (4, '2030-01-01 01:00:00Z'::timestamptz), (5, '2030-01-01 01:30:00Z')) v(n, t);
SELECT rheo.create_group('m', 'g');
SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM rheo.fetch('m', 'g', max_count => 10, clock => '2030-01-01Z')), clock => '2030-01-01Z');
SELECT is(rheo.replay('m', 'g', from_ts => '2030-01-01 02:30:00Z', clock => '2030-01-01Z'), 2::bigint,
    'from_ts reopens from the first event with ts >= T, later ones with earlier ts included');
SELECT results_eq($$SELECT "partition", frontier FROM rheo.lag('m', 'g')$$, $$VALUES (0, 1::bigint), (1, 2::bigint)$$,
    'a partition with no event that recent is untouched');
SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM rheo.fetch('m', 'g', max_count => 10, clock => '2030-01-01Z')), clock => '2030-01-01Z');
SELECT is(rheo.replay('m', 'g', event_ids => ARRAY(SELECT id FROM rheo.events WHERE stream = 'm' AND sequence = 1), partitions => '{1}',
                      clock => '2030-01-01Z'),
    1::bigint, 'partitions restricts event_ids');
SELECT results_eq($$SELECT "partition", sequence FROM rheo.fetch('m', 'g', max_count => 10, clock => '2030-01-01Z')$$,
    $$VALUES (1, 1::bigint)$$, 'only the event of the listed partition was reopened');
SELECT is(rheo.replay('m', 'g', from_sequence => 0, partitions => '{0}', clock => '2030-01-01Z'), 3::bigint,
    'partitions restricts from_sequence');
SELECT results_eq($$SELECT "partition", frontier FROM rheo.lag('m', 'g')$$, $$VALUES (0, 0::bigint), (1, 0::bigint)$$,
    'partition 0 was rewound; partition 1 is held back by its own lease');

SELECT is(rheo.replay(stream => 'm', group_name => 'g', from_sequence => NULL, event_ids => NULL, from_ts => '2031-01-01Z',
                      partitions => NULL, clock => '2030-01-01Z'),
    0::bigint, 'replay called with every argument by name; NULL selectors count as not given');

-- Errors in the order of checks.
SELECT throws_ok($$SELECT rheo.replay('missing', 'g')$$,
    'RH001', 'stream_not_found', 'replay on a missing stream, even without a selector');
SELECT throws_ok($$SELECT rheo.replay('s', 'missing')$$,
    'RH002', 'group_not_found', 'replay for a missing group, even without a selector');
SELECT throws_ok($$SELECT rheo.replay('s', 'g')$$,
    'RH009', 'invalid_replay_opts', 'no selector');
SELECT throws_ok($$SELECT rheo.replay('s', 'g', from_sequence => 1, from_ts => '2030-01-01Z')$$,
    'RH009', 'invalid_replay_opts', 'two selectors');
SELECT throws_ok($$SELECT rheo.replay('s', 'g', from_sequence => 1, event_ids => '{a}', from_ts => '2030-01-01Z')$$,
    'RH009', 'invalid_replay_opts', 'three selectors');
SELECT throws_ok($$SELECT rheo.replay('m', 'g', from_sequence => 0, partitions => '{2}')$$,
    'RH007', 'invalid_partition', 'a partition past the last one');

SELECT * FROM finish();
ROLLBACK;
