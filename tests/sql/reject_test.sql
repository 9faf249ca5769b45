BEGIN;
SELECT plan(18);

-- The signature reference §5.6 pins.
SELECT has_function('rheo', 'reject', ARRAY['uuid', 'text', 'timestamp with time zone']::name[], 'rheo.reject has the reference''s argument types');
SELECT function_returns('rheo', 'reject', ARRAY['uuid', 'text', 'timestamp with time zone']::name[], 'void', 'rheo.reject returns void');

SELECT rheo.create_stream('s');
SELECT rheo.append('s', jsonb_build_object('n', n), clock => '2030-01-01Z') FROM generate_series(1, 4) n;
SELECT rheo.create_group('s', 'g');
CREATE TEMP TABLE l AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 4, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');

-- Reject fills a hole, like ack.
SELECT rheo.ack((SELECT lease_id FROM l WHERE sequence = 2), clock => '2030-01-01Z');
SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'g')$$, $$VALUES (0::bigint)$$,
    '1 in flight holds the frontier at 0');
SELECT lives_ok(format('SELECT rheo.reject(%L, clock => %L)', (SELECT lease_id FROM l WHERE sequence = 1), '2030-01-01 00:00:00.5Z'),
    'reject a held lease');
SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'g')$$, $$VALUES (2::bigint)$$,
    'reject of 1 fills the hole: frontier 2');
SELECT results_eq(
    $$SELECT sequence, attempt, reason, dead_lettered_at FROM rheo.dead_letters('s', 'g')$$,
    $$VALUES (1::bigint, 1, 'rejected'::text, '2030-01-01 00:00:00.5Z'::timestamptz)$$,
    'a rejected event is a dead letter; a NULL reason is stored as rejected');
SELECT results_eq(
    $$SELECT dead_letters, inflight FROM rheo.group_info('s', 'g', clock => '2030-01-01 00:00:00.5Z')$$,
    $$VALUES (1::bigint, 2::bigint)$$,
    'group_info counts the dead letter');

SELECT rheo.reject((SELECT lease_id FROM l WHERE sequence = 3), 'unparseable', clock => '2030-01-01 00:00:00.5Z');
SELECT results_eq(
    $$SELECT sequence, reason FROM rheo.dead_letters('s', 'g')$$,
    $$VALUES (1::bigint, 'rejected'::text), (3, 'unparseable')$$,
    'reject stores the given reason');

-- Fencing.
SELECT throws_ok(format('SELECT rheo.reject(%L)', (SELECT lease_id FROM l WHERE sequence = 1)),
    'RH004', 'stale_lease', 'a second reject of the same lease');
SELECT throws_ok(format('SELECT rheo.ack(%L)', (SELECT lease_id FROM l WHERE sequence = 1)),
    'RH004', 'stale_lease', 'ack after reject');
SELECT throws_ok(format('SELECT rheo.reject(%L)', (SELECT lease_id FROM l WHERE sequence = 2)),
    'RH004', 'stale_lease', 'reject after ack');
SELECT throws_ok($$SELECT rheo.reject(gen_random_uuid())$$,
    'RH004', 'stale_lease', 'a lease id that was never issued');
SELECT throws_ok($$SELECT rheo.reject(NULL)$$,
    'RH011', 'invalid_argument', 'a NULL lease_id');
SELECT lives_ok(format('SELECT rheo.reject(%L, clock => %L)', (SELECT lease_id FROM l WHERE sequence = 4), '2030-01-01 00:00:10Z'),
    'an expired lease that no one re-claimed can be rejected');

SELECT results_eq($$SELECT frontier, lag FROM rheo.lag('s', 'g')$$, $$VALUES (4::bigint, 0::bigint)$$,
    'every event is terminal');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'g', clock => '2030-01-02Z')$$,
    'rejected events are not offered again');

SELECT rheo.append('s', '{"n": 5}', clock => '2030-01-01Z');
SELECT lives_ok(format('SELECT rheo.reject(lease_id => %L, reason => %L, clock => %L)',
                       (SELECT lease_id FROM rheo.fetch('s', 'g', clock => '2030-01-02Z')), 'by name', '2030-01-02Z'),
    'reject called with every argument by name');
SELECT results_eq($$SELECT sequence, reason FROM rheo.dead_letters('s', 'g') WHERE sequence = 5$$,
    $$VALUES (5::bigint, 'by name'::text)$$, 'the reason given by name is stored');

SELECT * FROM finish();
ROLLBACK;
