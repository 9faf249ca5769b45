BEGIN;
SELECT plan(11);

SELECT rheo.create_stream('s', 2, clock => '2030-01-01Z');
SELECT rheo.create_group('s', 'g', max_attempts => 1, clock => '2030-01-01Z');
SELECT rheo.create_group('s', 'other', clock => '2030-01-01Z');
SELECT count(*) FROM rheo.append_batch('s', '[{"n": 1}, {"n": 2}, {"n": 3}]', "partition" => 0, clock => '2030-01-01Z');
CREATE TEMP TABLE leases AS SELECT * FROM rheo.fetch('s', 'g', max_count => 3, clock => '2030-01-01Z');
SELECT rheo.reject(lease_id, clock => '2030-01-01Z') FROM leases WHERE sequence = 1;
SELECT count(*) FROM rheo.fetch('s', 'other', max_count => 1, clock => '2030-01-01Z');

SELECT throws_ok($$SELECT rheo.drop_group('s', 'g')$$, 'RH008', 'confirm_required', 'without confirm');
SELECT throws_ok($$SELECT rheo.drop_group('missing', 'g', confirm => NULL)$$, 'RH008', 'confirm_required',
    'confirm is checked before the stream');
SELECT throws_ok($$SELECT rheo.drop_group('missing', 'g', confirm => true)$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT rheo.drop_group('s', 'missing', confirm => true)$$, 'RH002', 'group_not_found', 'a missing group');

CREATE TEMP TABLE g AS SELECT group_id FROM rheo.groups WHERE stream = 's' AND group_name = 'g';
SELECT lives_ok($$SELECT rheo.drop_group('s', 'g', confirm => true)$$, 'drop_group with confirm');
SELECT is((SELECT count(*) FROM rheo.list_groups('s')), 1::bigint, 'the group is gone from list_groups');
SELECT is((SELECT count(*) FROM rheo.deliveries d JOIN g ON d.group_id = g.group_id)
          + (SELECT count(*) FROM rheo.dead_letters d JOIN g ON d.group_id = g.group_id)
          + (SELECT count(*) FROM rheo.cursors c JOIN g ON c.group_id = g.group_id),
    0::bigint, 'its deliveries, dead letters and cursors are gone');
SELECT throws_ok(format($$SELECT rheo.ack(%L)$$, (SELECT lease_id FROM leases WHERE sequence = 2)),
    'RH004', 'stale_lease', 'its leases are stale');
SELECT is((SELECT inflight FROM rheo.group_info('s', 'other', clock => '2030-01-01Z')), 1::bigint,
    'another group keeps its lease');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), 3::bigint, 'the log is untouched');
SELECT rheo.create_group('s', 'g', clock => '2030-01-01Z');
SELECT is((SELECT count(*) FROM rheo.fetch('s', 'g', max_count => 10, clock => '2030-01-01Z')), 3::bigint,
    'the name can be created anew, reading from the start');

SELECT * FROM finish();
ROLLBACK;
