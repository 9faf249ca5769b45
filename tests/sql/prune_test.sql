BEGIN;
SELECT plan(38);

-- Partition 0: 1-5 at 00:00, 6 at 02:00, 7 at 00:30 (aged, behind a
-- younger one). Partition 1: 1-4 at 00:00. The clock of the prunes is
-- 02:30 and the retention an hour: the cutoff is 01:30.
SELECT rheo.create_stream('s', 2, clock => '2030-01-01 00:00Z');
SELECT count(*) FROM rheo.append_batch('s', '[{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}, {"n": 5}]',
                                       ids => '{a1,a2,a3,a4,a5}', "partition" => 0, clock => '2030-01-01 00:00Z');
SELECT rheo.append('s', '{"n": 6}', "partition" => 0, clock => '2030-01-01 02:00Z');
SELECT rheo.append('s', '{"n": 7}', "partition" => 0, ts => '2030-01-01 00:30Z', clock => '2030-01-01 02:00Z');
SELECT count(*) FROM rheo.append_batch('s', '[{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]',
                                       ids => '{b1,b2,b3,b4}', "partition" => 1, clock => '2030-01-01 00:00Z');

-- Arguments and retention.
SELECT throws_ok($$SELECT rheo.prune('missing')$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT rheo.prune('s', max_count => -1)$$, 'RH011', 'invalid_argument', 'a negative max_count');
SELECT throws_ok($$SELECT rheo.prune('s', max_count => NULL)$$, 'RH011', 'invalid_argument', 'a NULL max_count');
SELECT throws_ok($$SELECT rheo.prune('s', force => NULL)$$, 'RH011', 'invalid_argument', 'a NULL force');
SELECT throws_ok($$SELECT rheo.prune('s', clock => 'infinity')$$, 'RH011', 'invalid_argument', 'an infinite clock');
SELECT is(rheo.prune('s', clock => '2030-01-01 02:30Z'), 0::bigint, 'a stream without retention prunes nothing');
SELECT rheo.set_retention('s', '1 hour');
SELECT is(rheo.prune('s', max_count => 0, clock => '2030-01-01 02:30Z'), 0::bigint, 'max_count 0 prunes nothing');

-- Groups hold the prune back at their frontiers.
SELECT rheo.create_group('s', 'slow', clock => '2030-01-01 00:00Z');
SELECT rheo.create_group('s', 'fast', max_attempts => 1, clock => '2030-01-01 00:00Z');
CREATE TEMP TABLE slow AS SELECT * FROM rheo.fetch('s', 'slow', max_count => 20, partitions => '{0}', clock => '2030-01-01 02:30Z');
SELECT rheo.ack(lease_id, clock => '2030-01-01 02:30Z') FROM slow WHERE sequence <= 2;
CREATE TEMP TABLE fast AS SELECT * FROM rheo.fetch('s', 'fast', max_count => 20, clock => '2030-01-01 02:30Z');
SELECT rheo.ack(lease_id, clock => '2030-01-01 02:30Z') FROM fast WHERE NOT ("partition" = 0 AND sequence = 3);
SELECT rheo.reject(lease_id, clock => '2030-01-01 02:30Z') FROM fast WHERE "partition" = 0 AND sequence = 3;
CREATE TEMP TABLE lag_before AS SELECT 'slow' AS g, l.* FROM rheo.lag('s', 'slow') l
                                UNION ALL SELECT 'fast', l.* FROM rheo.lag('s', 'fast') l;
-- slow: frontier 2 in partition 0 (3 in flight), 0 in partition 1.
SELECT is(rheo.prune('s', clock => '2030-01-01 02:30Z'), 2::bigint,
    'without force, only what every group has passed: up to the lowest frontier');
SELECT results_eq($$SELECT "partition", low_watermark FROM rheo.stream_info('s')$$,
    $$VALUES (0, 3::bigint), (1, 1::bigint)$$, 'the low watermarks follow');
SELECT results_eq($$SELECT 'slow' AS g, l.* FROM rheo.lag('s', 'slow') l UNION ALL SELECT 'fast', l.* FROM rheo.lag('s', 'fast') l$$,
    $$SELECT * FROM lag_before$$, 'a prune without force leaves the lag of every group as it was');
SELECT is(rheo.prune('s', clock => '2030-01-01 02:30Z'), 0::bigint, 'a second prune finds nothing more');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's' AND "partition" = 0 AND sequence <= 2), 0::bigint,
    'the pruned events are gone from rheo.events');
SELECT throws_ok($$DELETE FROM rheo.events WHERE stream = 's'$$, 'RH012', 'immutable_event',
    'a plain DELETE is still refused');

-- The slow group settles: the run stops at the first young event.
SELECT rheo.ack(lease_id, clock => '2030-01-01 02:30Z') FROM slow WHERE sequence > 2;
SELECT rheo.drop_group('s', 'slow', confirm => true);
SELECT is((SELECT count(*) FROM rheo.dead_letters('s', 'fast')), 1::bigint, 'fast has a dead letter of sequence 3');
SELECT is(rheo.prune('s', max_count => 4, clock => '2030-01-01 02:30Z'), 4::bigint,
    'max_count bounds a call: partition 0 first');
SELECT results_eq($$SELECT "partition", low_watermark FROM rheo.stream_info('s')$$,
    $$VALUES (0, 6::bigint), (1, 2::bigint)$$, 'partition 0 stopped at its young event 6, partition 1 took the rest');
SELECT is((SELECT count(*) FROM rheo.dead_letters('s', 'fast')), 0::bigint, 'the dead letters of deleted events go with them');
SELECT is(rheo.prune('s', clock => '2030-01-01 02:30Z'), 3::bigint, 'the next call goes on');
SELECT results_eq($$SELECT "partition", low_watermark, high_watermark FROM rheo.stream_info('s')$$,
    $$VALUES (0, 6::bigint, 7::bigint), (1, 5::bigint, 4::bigint)$$,
    'event 7, aged but behind the young 6, waits');

-- After the prune: groups and reads start at the low watermark.
SELECT rheo.create_group('s', 'new', clock => '2030-01-01 02:30Z');
SELECT rheo.create_group('s', 'after0', start_after => 0, clock => '2030-01-01 02:30Z');
SELECT rheo.create_group('s', 'old', start_at => '2029-01-01Z', clock => '2030-01-01 02:30Z');
SELECT results_eq($$SELECT g.group_name, l."partition", l.frontier FROM rheo.list_groups('s') g
                     CROSS JOIN LATERAL rheo.lag('s', g.group_name) l
                    WHERE g.group_name IN ('new', 'after0', 'old') ORDER BY 1, 2$$,
    $$VALUES ('after0', 0, 5::bigint), ('after0', 1, 4::bigint), ('new', 0, 5::bigint), ('new', 1, 4::bigint),
             ('old', 0, 5::bigint), ('old', 1, 4::bigint)$$,
    'a new group starts at the low watermark, whatever start_after or start_at asked');
SELECT rheo.reset_group('s', 'fast', confirm => true, start_after => 1, clock => '2030-01-01 02:30Z');
SELECT results_eq($$SELECT "partition", frontier FROM rheo.lag('s', 'fast')$$,
    $$VALUES (0, 5::bigint), (1, 4::bigint)$$, 'so does a reset');
SELECT results_eq($$SELECT sequence FROM rheo.read('s', after => 0)$$, $$VALUES (6::bigint), (7::bigint)$$,
    'read after a sequence below the low watermark returns from it');
SELECT is((SELECT count(*) FROM rheo.fetch('s', 'fast', max_count => 10, clock => '2030-01-01 02:30Z')), 2::bigint,
    'fetch offers the retained events');
SELECT is(rheo.replay('s', 'fast', from_sequence => 0, clock => '2030-01-01 02:30Z'), 2::bigint,
    'replay from a sequence below the low watermark rewinds to it');
SELECT results_eq($$SELECT "partition", frontier FROM rheo.lag('s', 'fast')$$,
    $$VALUES (0, 5::bigint), (1, 4::bigint)$$, 'and no further');
SELECT is(rheo.replay('s', 'new', event_ids => '{a1,a2,b1}', clock => '2030-01-01 02:30Z'), 0::bigint,
    'pruned ids are ignored by replay');
SELECT is((SELECT sequence FROM rheo.append('s', '{"n": 1}', id => 'a1', "partition" => 0, clock => '2030-01-01 02:30Z')),
    8::bigint, 'an idempotent append of a pruned id stores a new event');

-- force: aged events go whatever the groups hold.
SELECT count(*) FROM rheo.append_batch('s', '[{"n": 5}, {"n": 6}]', "partition" => 1, clock => '2030-01-01 00:00Z');
SELECT rheo.create_group('s', 'stuck', clock => '2030-01-01 02:30Z');
CREATE TEMP TABLE stuck AS SELECT * FROM rheo.fetch('s', 'stuck', max_count => 1, partitions => '{1}', clock => '2030-01-01 02:30Z');
SELECT is(rheo.prune('s', clock => '2030-01-01 02:30Z'), 0::bigint, 'without force, the unsettled events stay');
SELECT is(rheo.prune('s', force => true, clock => '2030-01-01 02:30Z'), 2::bigint,
    'with force, the aged events of partition 1 go though groups hold them');
SELECT throws_ok(format($$SELECT rheo.ack(%L)$$, (SELECT lease_id FROM stuck)), 'RH004', 'stale_lease',
    'their leases are stale');
SELECT results_eq($$SELECT "partition", frontier, lag FROM rheo.lag('s', 'stuck')$$,
    $$VALUES (0, 5::bigint, 3::bigint), (1, 6::bigint, 0::bigint)$$,
    'the cursors and frontiers move past them');
SELECT is((SELECT count(*) FROM rheo.deliveries d JOIN rheo.groups g ON g.group_id = d.group_id
            WHERE g.stream = 's' AND d."partition" = 1), 0::bigint, 'their deliveries are gone');
SELECT is((SELECT count(*) FROM rheo.time_marks WHERE stream = 's'), 0::bigint, 'no time marks were due');

-- The time marks of pruned events go with them.
SELECT rheo.create_stream('long', clock => '2030-01-01 00:00Z');
SELECT rheo.set_retention('long', '1 hour');
SELECT count(*) FROM rheo.append_batch('long', (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 2100) i),
                                       clock => '2030-01-01 00:00Z');
SELECT is(rheo.prune('long', max_count => 2000, clock => '2030-01-01 02:30Z'), 2000::bigint, 'a long run, bounded');
SELECT results_eq($$SELECT sequence FROM rheo.time_marks WHERE stream = 'long'$$, $$VALUES (2048::bigint)$$,
    'the mark whose 1024 events are all pruned is gone, the one with events left stays');
SELECT rheo.create_group('long', 'g', start_at => '2029-01-01Z', clock => '2030-01-01 02:30Z');
SELECT is((SELECT frontier FROM rheo.lag('long', 'g')), 2000::bigint, 'start_at still finds the first retained event');

-- A retention whose cutoff reaches the clock (months and days of
-- opposite signs, stored before set_retention checked them against the
-- clock) prunes nothing, rather than what was appended a moment ago.
SELECT rheo.create_stream('odd', clock => '2030-03-01 00:00Z');
SELECT rheo.append('odd', '{}', clock => '2030-03-01 00:00Z');
UPDATE rheo.streams SET max_age = '-2 months +59 days' WHERE stream = 'odd';
SELECT is(rheo.prune('odd', clock => '2030-03-01 00:00Z'), 0::bigint,
    'a cutoff at or after the clock prunes nothing');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 'odd'), 1::bigint, 'the event just appended is kept');

SELECT * FROM finish();
ROLLBACK;
