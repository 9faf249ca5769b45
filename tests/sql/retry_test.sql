BEGIN;
SELECT plan(26);

-- The signature reference §5.5 pins.
SELECT has_function('rheo', 'retry', ARRAY['uuid', 'text', 'integer', 'timestamp with time zone']::name[], 'rheo.retry has the reference''s argument types');
SELECT function_returns('rheo', 'retry', ARRAY['uuid', 'text', 'integer', 'timestamp with time zone']::name[], 'text', 'rheo.retry returns text');

SELECT rheo.create_stream('s');
SELECT rheo.append('s', jsonb_build_object('n', n), clock => '2030-01-01Z') FROM generate_series(1, 3) n;
SELECT rheo.create_group('s', 'g', max_attempts => 2);
CREATE TEMP TABLE l AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 3, lease_ms => 60000, clock => '2030-01-01 00:00:00Z');

-- Below the attempt limit: retrying, claimable after the delay.
SELECT is(rheo.retry((SELECT lease_id FROM l WHERE sequence = 1), 'boom', delay_ms => 5000, clock => '2030-01-01 00:00:00Z'),
    'retrying', 'retry below max_attempts returns retrying');
SELECT throws_ok(format('SELECT rheo.ack(%L)', (SELECT lease_id FROM l WHERE sequence = 1)),
    'RH004', 'stale_lease', 'the retried lease is no longer held');
SELECT throws_ok(format('SELECT rheo.retry(%L)', (SELECT lease_id FROM l WHERE sequence = 1)),
    'RH004', 'stale_lease', 'a second retry of the same lease');
SELECT rheo.ack((SELECT lease_id FROM l WHERE sequence = 2), clock => '2030-01-01Z');
SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'g')$$, $$VALUES (0::bigint)$$,
    'retry does not fill a hole: 2 acked, 1 waiting, frontier 0');
SELECT results_eq(
    $$SELECT inflight, pending_retry FROM rheo.group_info('s', 'g', clock => '2030-01-01 00:00:00.5Z')$$,
    $$VALUES (1::bigint, 1::bigint)$$,
    'the retried event waits as a pending retry');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'g', clock => '2030-01-01 00:00:04.999Z')$$,
    'not claimable before the delay has passed');
CREATE TEMP TABLE again AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 1, lease_ms => 1000, clock => '2030-01-01 00:00:05Z');
SELECT results_eq($$SELECT sequence, attempt FROM again$$, $$VALUES (1::bigint, 2)$$,
    'claimable once the delay has passed, at the next attempt');

-- At the attempt limit: dead_lettered, with the given reason.
SELECT is(rheo.retry((SELECT lease_id FROM again), 'boom again', clock => '2030-01-01 00:00:05.5Z'),
    'dead_lettered', 'retry at max_attempts returns dead_lettered');
SELECT results_eq(
    $$SELECT sequence, attempt, reason, dead_lettered_at FROM rheo.dead_letters('s', 'g')$$,
    $$VALUES (1::bigint, 2, 'boom again'::text, '2030-01-01 00:00:05.5Z'::timestamptz)$$,
    'the dead letter keeps the attempt, the reason and the clock');
SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'g')$$, $$VALUES (2::bigint)$$,
    'a dead letter is terminal: the frontier moves past 1 and 2');
SELECT throws_ok(format('SELECT rheo.ack(%L)', (SELECT lease_id FROM again)),
    'RH004', 'stale_lease', 'ack of a dead-lettered lease');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'g', clock => '2030-01-01 00:00:06Z')$$,
    'a dead letter is not offered again');

-- Defaults: no delay; a NULL reason is stored as max_attempts.
SELECT rheo.create_group('s', 'h', max_attempts => 2);
CREATE TEMP TABLE m AS SELECT * FROM rheo.fetch('s', 'h', max_count => 1, clock => '2030-01-01Z');
SELECT is(rheo.retry((SELECT lease_id FROM m), clock => '2030-01-01Z'), 'retrying', 'retry with defaults');
CREATE TEMP TABLE m2 AS SELECT * FROM rheo.fetch('s', 'h', max_count => 1, clock => '2030-01-01Z');
SELECT results_eq($$SELECT sequence, attempt FROM m2$$, $$VALUES (1::bigint, 2)$$,
    'delay_ms defaults to 0: claimable again at once, at the next attempt');
SELECT is(rheo.retry((SELECT lease_id FROM m2), clock => '2030-01-01Z'), 'dead_lettered', 'retry at the limit with defaults');
SELECT results_eq($$SELECT reason FROM rheo.dead_letters('s', 'h')$$, $$VALUES ('max_attempts'::text)$$,
    'a NULL reason is stored as max_attempts');

SELECT rheo.create_group('s', 'once', max_attempts => 1);
SELECT is(rheo.retry((SELECT lease_id FROM rheo.fetch('s', 'once', max_count => 1, clock => '2030-01-01Z')), 'no', clock => '2030-01-01Z'),
    'dead_lettered', 'with max_attempts 1 the first retry dead-letters');

-- Expired but not re-claimed: still the holder's to retry.
SELECT is(rheo.retry((SELECT lease_id FROM l WHERE sequence = 3), clock => '2030-01-01 00:01:30Z'),
    'retrying', 'an expired lease that no one re-claimed can be retried');

-- Arguments before lease state.
CREATE TEMP TABLE n AS SELECT * FROM rheo.fetch('s', 'h', max_count => 1, clock => '2030-01-01Z');
SELECT throws_ok(format('SELECT rheo.retry(%L, delay_ms => -1)', (SELECT lease_id FROM n)),
    'RH011', 'invalid_argument', 'a negative delay_ms');
SELECT throws_ok(format('SELECT rheo.retry(%L, delay_ms => NULL)', (SELECT lease_id FROM n)),
    'RH011', 'invalid_argument', 'an explicit NULL delay_ms');
SELECT throws_ok($$SELECT rheo.retry(NULL)$$,
    'RH011', 'invalid_argument', 'a NULL lease_id');
SELECT throws_ok($$SELECT rheo.retry(gen_random_uuid(), delay_ms => -1)$$,
    'RH011', 'invalid_argument', 'a bad delay_ms is reported before an unknown lease');
SELECT throws_ok($$SELECT rheo.retry(gen_random_uuid())$$,
    'RH004', 'stale_lease', 'a lease id that was never issued');

SELECT is(rheo.retry(lease_id => (SELECT lease_id FROM n), reason => 'by name', delay_ms => 0, clock => '2030-01-01Z'),
    'retrying', 'retry called with every argument by name');

SELECT * FROM finish();
ROLLBACK;
