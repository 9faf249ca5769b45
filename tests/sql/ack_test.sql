BEGIN;
SELECT plan(20);

-- The signature reference §5.3 pins.
SELECT has_function('rheo', 'ack', ARRAY['uuid', 'timestamp with time zone']::name[], 'rheo.ack has the reference''s argument types');
SELECT function_returns('rheo', 'ack', ARRAY['uuid', 'timestamp with time zone']::name[], 'void', 'rheo.ack returns void');

SELECT rheo.create_stream('s');
SELECT rheo.append('s', jsonb_build_object('n', n), clock => '2030-01-01Z') FROM generate_series(1, 5) n;
SELECT rheo.create_group('s', 'g', max_attempts => 2);
CREATE TEMP TABLE l AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 5, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');

-- Holes: the frontier stops below the lowest event still in flight.
SELECT lives_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM l WHERE sequence = 3), '2030-01-01Z'),
    'ack a held lease');
SELECT results_eq($$SELECT frontier, high_watermark, lag FROM rheo.lag('s', 'g')$$, $$VALUES (0::bigint, 5::bigint, 5::bigint)$$,
    'ack of 3 with 1 and 2 in flight leaves the frontier at 0');
SELECT rheo.ack((SELECT lease_id FROM l WHERE sequence = 1), clock => '2030-01-01Z');
SELECT results_eq($$SELECT frontier, lag FROM rheo.lag('s', 'g')$$, $$VALUES (1::bigint, 4::bigint)$$,
    'ack of 1: frontier 1, the hole at 2 blocks it');
SELECT rheo.ack((SELECT lease_id FROM l WHERE sequence = 2), clock => '2030-01-01Z');
SELECT results_eq($$SELECT frontier, lag FROM rheo.lag('s', 'g')$$, $$VALUES (3::bigint, 2::bigint)$$,
    'ack of 2 fills the hole: frontier 3');

-- Fencing.
SELECT throws_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM l WHERE sequence = 3), '2030-01-01Z'),
    'RH004', 'stale_lease', 'a second ack of the same lease');
SELECT throws_ok($$SELECT rheo.ack(gen_random_uuid())$$,
    'RH004', 'stale_lease', 'a lease id that was never issued');
SELECT throws_ok($$SELECT rheo.ack(NULL)$$,
    'RH011', 'invalid_argument', 'a NULL lease_id');
CREATE TEMP TABLE relet AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 1, lease_ms => 1000, clock => '2030-01-01 00:00:01Z');
SELECT results_eq($$SELECT sequence, attempt FROM relet$$, $$VALUES (4::bigint, 2)$$,
    'the expired lease of 4 is re-leased');
SELECT throws_ok(format('SELECT rheo.ack(%L)', (SELECT lease_id FROM l WHERE sequence = 4)),
    'RH004', 'stale_lease', 'the lease re-leased to someone else is stale');
SELECT lives_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM l WHERE sequence = 5), '2030-01-01 00:00:09Z'),
    'an expired lease that no one re-claimed can still be acked');

-- Settle is transactional: an ack rolled back leaves the lease held.
SAVEPOINT before_ack;
SELECT rheo.ack((SELECT lease_id FROM relet), clock => '2030-01-01 00:00:01Z');
ROLLBACK TO SAVEPOINT before_ack;
SELECT results_eq($$SELECT frontier FROM rheo.lag('s', 'g')$$, $$VALUES (3::bigint)$$,
    'after the rollback the event is not acked');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'g', clock => '2030-01-01 00:00:01.5Z')$$,
    'after the rollback the lease is still held: nothing to claim');
SELECT lives_ok(format('SELECT rheo.ack(%L, clock => %L)', (SELECT lease_id FROM relet), '2030-01-01 00:00:01.5Z'),
    'after the rollback the same lease can be acked');
SELECT results_eq($$SELECT frontier, lag FROM rheo.lag('s', 'g')$$, $$VALUES (5::bigint, 0::bigint)$$,
    'everything acked: frontier at the high watermark');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'g', clock => '2030-01-02Z')$$,
    'acked events are never offered again');

-- Other settles end a lease too.
SELECT rheo.append('s', jsonb_build_object('n', n), clock => '2030-01-01Z') FROM generate_series(6, 7) n;
CREATE TEMP TABLE m AS SELECT * FROM rheo.fetch('s', 'g', clock => '2030-01-01Z');
SELECT rheo.reject((SELECT lease_id FROM m WHERE sequence = 6));
SELECT rheo.retry((SELECT lease_id FROM m WHERE sequence = 7), delay_ms => 60000, clock => '2030-01-01Z');
SELECT throws_ok(format('SELECT rheo.ack(%L)', (SELECT lease_id FROM m WHERE sequence = 6)),
    'RH004', 'stale_lease', 'ack after reject');
SELECT throws_ok(format('SELECT rheo.ack(%L)', (SELECT lease_id FROM m WHERE sequence = 7)),
    'RH004', 'stale_lease', 'ack after retry');

SELECT rheo.append('s', '{"n": 8}', clock => '2030-01-01Z');
SELECT lives_ok(format('SELECT rheo.ack(lease_id => %L, clock => %L)',
                       (SELECT lease_id FROM rheo.fetch('s', 'g', clock => '2030-01-01Z') WHERE sequence = 8), '2030-01-01Z'),
    'ack called with every argument by name');

SELECT * FROM finish();
ROLLBACK;
