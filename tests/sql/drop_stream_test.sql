BEGIN;
SELECT plan(11);

SELECT rheo.create_stream('s', 2, clock => '2030-01-01Z');
SELECT rheo.create_stream('kept', clock => '2030-01-01Z');
SELECT rheo.create_group('s', 'g', clock => '2030-01-01Z');
SELECT count(*) FROM rheo.append_batch('s', (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1500) i),
                                       "partition" => 0, clock => '2030-01-01Z');
SELECT rheo.append('s', '{"n": 0}', "partition" => 1, id => 'x', clock => '2030-01-01Z');
SELECT rheo.append('kept', '{"n": 0}', clock => '2030-01-01Z');
CREATE TEMP TABLE leases AS SELECT * FROM rheo.fetch('s', 'g', max_count => 2, clock => '2030-01-01Z');

SELECT throws_ok($$SELECT rheo.drop_stream('s')$$, 'RH008', 'confirm_required', 'without confirm');
SELECT throws_ok($$SELECT rheo.drop_stream('missing')$$, 'RH008', 'confirm_required', 'confirm is checked before the stream');
SELECT throws_ok($$SELECT rheo.drop_stream('missing', confirm => true)$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT is(rheo.drop_stream('s', confirm => true), 1501::bigint, 'drop_stream returns the events it deleted');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), 0::bigint, 'the events are gone');
SELECT is((SELECT count(*) FROM rheo.list_streams() WHERE stream = 's'), 0::bigint, 'the stream is gone');
SELECT is((SELECT count(*) FROM rheo.groups WHERE stream = 's') + (SELECT count(*) FROM rheo.partitions WHERE stream = 's')
          + (SELECT count(*) FROM rheo.time_marks WHERE stream = 's'),
    0::bigint, 'its groups, partitions and time marks are gone');
SELECT throws_ok(format($$SELECT rheo.ack(%L)$$, (SELECT lease_id FROM leases LIMIT 1)),
    'RH004', 'stale_lease', 'its leases are stale');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 'kept'), 1::bigint, 'other streams keep their events');
SELECT rheo.create_stream('s', clock => '2030-01-01Z');
SELECT is((SELECT sequence FROM rheo.append('s', '{"n": 1}', clock => '2030-01-01Z')), 1::bigint,
    'the name can be created anew, with sequences from 1');
SELECT is((SELECT sequence FROM rheo.append('s', '{"n": 0}', id => 'x', clock => '2030-01-01Z')), 2::bigint,
    'an id of the dropped stream is a new event');

SELECT * FROM finish();
ROLLBACK;
