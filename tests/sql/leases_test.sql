BEGIN;
SELECT plan(7);

SELECT rheo.create_stream('s', 2, clock => '2030-01-01 00:00Z');
SELECT rheo.create_group('s', 'g', clock => '2030-01-01 00:00Z');
SELECT count(*) FROM rheo.append_batch('s', '[{"n": 1}, {"n": 2}, {"n": 3}]', ids => '{a,b,c}', "partition" => 0,
                                       clock => '2030-01-01 00:00Z');
SELECT rheo.append('s', '{"n": 4}', id => 'd', "partition" => 1, clock => '2030-01-01 00:00Z');
CREATE TEMP TABLE l AS
SELECT * FROM rheo.fetch('s', 'g', max_count => 2, partitions => '{0}', consumer_id => 'w1', lease_ms => 60000,
                         clock => '2030-01-01 00:00Z');
INSERT INTO l SELECT * FROM rheo.fetch('s', 'g', max_count => 1, partitions => '{1}', consumer_id => 'w2', lease_ms => 30000,
                                       clock => '2030-01-01 00:00Z');
SELECT rheo.retry(lease_id, reason => 'later', delay_ms => 5000, clock => '2030-01-01 00:00Z') FROM l WHERE event_id = 'b';
SELECT rheo.ack(lease_id, clock => '2030-01-01 00:00Z') FROM l WHERE event_id = 'a';

SELECT throws_ok($$SELECT * FROM rheo.leases('missing', 'g')$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT * FROM rheo.leases('s', 'missing')$$, 'RH002', 'group_not_found', 'a missing group');
SELECT throws_ok($$SELECT * FROM rheo.leases('s', 'g', max_count => -1)$$, 'RH011', 'invalid_argument', 'a negative max_count');
SELECT results_eq(
    $$SELECT event_id, "partition", sequence, state, consumer_id, attempt, expires_at, reason FROM rheo.leases('s', 'g')$$,
    $$VALUES ('b', 0, 2::bigint, 'pending', NULL::text, 1, '2030-01-01 00:00:05Z'::timestamptz, 'later'),
             ('d', 1, 1::bigint, 'leased', 'w2', 1, '2030-01-01 00:00:30Z'::timestamptz, NULL)$$,
    'the deliveries in progress, the soonest due first; acked ones are gone');
SELECT is((SELECT count(*) FROM rheo.leases('s', 'g', max_count => 1)), 1::bigint, 'max_count bounds the rows');
SELECT is((SELECT event_id FROM rheo.leases('s', 'g', max_count => 1)), 'b', 'the soonest due comes first');
SELECT is((SELECT count(*) FROM rheo.leases('s', 'g', max_count => 0)), 0::bigint, 'max_count 0 returns nothing');

SELECT * FROM finish();
ROLLBACK;
