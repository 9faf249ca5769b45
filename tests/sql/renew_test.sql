BEGIN;
SELECT plan(18);

-- The signature reference §5.2 pins.
SELECT has_function('rheo', 'renew', ARRAY['uuid', 'integer', 'timestamp with time zone']::name[], 'rheo.renew has the reference''s argument types');
SELECT function_returns('rheo', 'renew', ARRAY['uuid', 'integer', 'timestamp with time zone']::name[], 'timestamp with time zone', 'rheo.renew returns timestamp with time zone');

SELECT rheo.create_stream('s');
SELECT rheo.append('s', jsonb_build_object('n', n), clock => '2030-01-01Z') FROM generate_series(1, 4) n;
SELECT rheo.create_group('s', 'g');
CREATE TEMP TABLE l AS
    SELECT * FROM rheo.fetch('s', 'g', max_count => 4, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');

-- A held lease.
SELECT is(rheo.renew((SELECT lease_id FROM l WHERE sequence = 1), 5000, clock => '2030-01-01 00:00:00.5Z'),
    '2030-01-01 00:00:05.5Z'::timestamptz,
    'renew returns clock + lease_ms');
SELECT results_eq(
    $$SELECT sequence FROM rheo.fetch('s', 'g', clock => '2030-01-01 00:00:05Z')$$,
    $$VALUES (2::bigint), (3), (4)$$,
    'a renewed lease is not claimable before its new expiry; the others expired at the old one');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('s', 'g', clock => '2030-01-01 00:00:05.5Z')$$,
    $$VALUES (1::bigint, 2)$$,
    'a renewed lease is claimable at its new expiry');
SELECT throws_ok(format('SELECT rheo.renew(%L, clock => %L)', (SELECT lease_id FROM l WHERE sequence = 1), '2030-01-01 00:00:06Z'),
    'RH004', 'stale_lease', 'renew of a lease re-leased to someone else');

-- Settled, never issued, expired.
SELECT rheo.create_group('s', 'h');
CREATE TEMP TABLE m AS
    SELECT * FROM rheo.fetch('s', 'h', max_count => 4, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');
SELECT is(rheo.renew((SELECT lease_id FROM m WHERE sequence = 1), clock => '2030-01-01 00:00:00Z'),
    '2030-01-01 00:00:30Z'::timestamptz,
    'lease_ms defaults to 30 seconds');
SELECT rheo.ack((SELECT lease_id FROM m WHERE sequence = 2), clock => '2030-01-01 00:00:00Z');
SELECT rheo.retry((SELECT lease_id FROM m WHERE sequence = 4), delay_ms => 60000, clock => '2030-01-01 00:00:00Z');
SELECT throws_ok(format('SELECT rheo.renew(%L, clock => %L)', (SELECT lease_id FROM m WHERE sequence = 2), '2030-01-01 00:00:00Z'),
    'RH004', 'stale_lease', 'renew after ack');
SELECT throws_ok($$SELECT rheo.renew(gen_random_uuid())$$,
    'RH004', 'stale_lease', 'renew of a lease id that was never issued');
SELECT is(rheo.renew((SELECT lease_id FROM m WHERE sequence = 3), 2000, clock => '2030-01-01 00:00:10Z'),
    '2030-01-01 00:00:12Z'::timestamptz,
    'an expired lease that no one re-claimed can be renewed');
SELECT is_empty(
    $$SELECT * FROM rheo.fetch('s', 'h', clock => '2030-01-01 00:00:11Z') WHERE sequence = 3$$,
    'after that renewal the event is held again');
SELECT throws_ok(format('SELECT rheo.renew(%L, clock => %L)', (SELECT lease_id FROM m WHERE sequence = 4), '2030-01-01 00:00:00Z'),
    'RH004', 'stale_lease', 'renew of a lease given back by retry');

-- Arguments are checked before the lease state.
SELECT throws_ok(format('SELECT rheo.renew(%L, 0)', (SELECT lease_id FROM m WHERE sequence = 1)),
    'RH011', 'invalid_argument', 'lease_ms 0');
SELECT throws_ok(format('SELECT rheo.renew(%L, -1)', (SELECT lease_id FROM m WHERE sequence = 1)),
    'RH011', 'invalid_argument', 'a negative lease_ms');
SELECT throws_ok(format('SELECT rheo.renew(%L, NULL)', (SELECT lease_id FROM m WHERE sequence = 1)),
    'RH011', 'invalid_argument', 'an explicit NULL lease_ms');
SELECT throws_ok($$SELECT rheo.renew(NULL)$$,
    'RH011', 'invalid_argument', 'a NULL lease_id');
SELECT throws_ok($$SELECT rheo.renew(gen_random_uuid(), 0)$$,
    'RH011', 'invalid_argument', 'a bad lease_ms is reported before an unknown lease');

SELECT is(rheo.renew(lease_id => (SELECT lease_id FROM m WHERE sequence = 1), lease_ms => 1000, clock => '2030-01-01 00:00:01Z'),
    '2030-01-01 00:00:02Z'::timestamptz,
    'renew called with every argument by name');

SELECT * FROM finish();
ROLLBACK;
