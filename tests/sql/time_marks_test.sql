BEGIN;
SELECT plan(8);

SELECT rheo.create_stream('s', 2);
-- Partition 0: 1-1000 at minute 5, 1001-2100 at minute 10 (one batch
-- passing the marks at 1024 and 2048), 2101 at minute 30, given
-- explicitly.
SELECT count(*) FROM rheo.append_batch('s', (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1000) i),
                                       "partition" => 0, clock => '2030-01-01 00:05Z');
SELECT count(*) FROM rheo.append_batch('s', (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1100) i),
                                       "partition" => 0, clock => '2030-01-01 00:10Z');
SELECT rheo.append('s', '{"n": 0}', "partition" => 0, ts => '2030-01-01 00:30Z', clock => '2030-01-01 00:06Z');
-- Partition 1: 1023 events, no mark yet.
SELECT count(*) FROM rheo.append_batch('s', (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1023) i),
                                       "partition" => 1, clock => '2030-01-01 00:01Z');

SELECT results_eq(
    $$SELECT "partition", sequence, max_ts, min_ts FROM rheo.time_marks WHERE stream = 's' ORDER BY 1, 2$$,
    $$VALUES (0, 1024::bigint, '2030-01-01 00:10Z'::timestamptz, '2030-01-01 00:05Z'::timestamptz),
             (0, 2048::bigint, '2030-01-01 00:10Z'::timestamptz, '2030-01-01 00:10Z'::timestamptz)$$,
    'a mark at every 1024th sequence holds the greatest ts up to it and the least of its segment');
SELECT results_eq(
    $$SELECT "partition", max_ts, tail_min_ts FROM rheo.partitions WHERE stream = 's' ORDER BY 1$$,
    $$VALUES (0, '2030-01-01 00:30Z'::timestamptz, '2030-01-01 00:10Z'::timestamptz),
             (1, '2030-01-01 00:01Z'::timestamptz, '2030-01-01 00:01Z'::timestamptz)$$,
    'each partition keeps the greatest ts appended to it and the least since its last mark');

SAVEPOINT before_append;
SELECT rheo.append('s', '{"n": 1}', "partition" => 1, clock => '2030-01-01 00:02Z');
ROLLBACK TO SAVEPOINT before_append;
SELECT is((SELECT count(*) FROM rheo.time_marks WHERE stream = 's' AND "partition" = 1), 0::bigint,
    'a rolled-back append leaves no mark');

SELECT rheo.append('s', '{"n": 1}', "partition" => 1, clock => '2030-01-01 00:00Z');
SELECT results_eq(
    $$SELECT m.min_ts, pt.tail_min_ts FROM rheo.time_marks m
        JOIN rheo.partitions pt ON pt.stream = m.stream AND pt."partition" = m."partition"
       WHERE m.stream = 's' AND m."partition" = 1$$,
    $$VALUES ('2030-01-01 00:00Z'::timestamptz, NULL::timestamptz)$$,
    'an append ending on a mark closes the segment and leaves no tail');

SELECT results_eq(
    $$SELECT "partition", sequence, max_ts, min_ts FROM rheo.time_marks WHERE stream = 's' ORDER BY 1, 2$$,
    $$SELECT r."partition", r.sequence, r.max_ts, r.min_ts
        FROM (SELECT e."partition", e.sequence,
                     max(e.ts) OVER (PARTITION BY e."partition" ORDER BY e.sequence) AS max_ts,
                     min(e.ts) OVER (PARTITION BY e."partition", (e.sequence - 1) / 1024) AS min_ts
                FROM rheo.events e WHERE e.stream = 's') AS r
       WHERE r.sequence % 1024 = 0 ORDER BY 1, 2$$,
    'the marks kept by the appends are those the upgrade computes from the log');

SELECT rheo.create_group('s', 'at7', start_at => '2030-01-01 00:07Z', partitions => '{0}');
SELECT rheo.create_group('s', 'at11', start_at => '2030-01-01 00:11Z', partitions => '{0}');
SELECT results_eq(
    $$SELECT l.frontier FROM rheo.lag('s', 'at7', '{0}') l UNION ALL SELECT l.frontier FROM rheo.lag('s', 'at11', '{0}') l$$,
    $$VALUES (1000::bigint), (2100::bigint)$$,
    'start_at finds the lowest sequence at or after the time through the marks');
SELECT is(rheo._first_at('s', 1, '2030-01-01 00:02Z'), NULL, 'no event at or after the time: NULL');
SELECT is((SELECT oldest_unsettled_ts FROM rheo.group_info('s', 'at7')), '2030-01-01 00:00Z'::timestamptz,
    'group_info reads the oldest unsettled event of a backlog through the segment minima');

SELECT * FROM finish();
ROLLBACK;
