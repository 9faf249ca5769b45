BEGIN;
SELECT plan(4);

SELECT has_view('rheo', 'group_status', 'the view rheo.group_status exists');
SELECT results_eq(
    $$SELECT attname::text COLLATE "default" FROM pg_attribute WHERE attrelid = 'rheo.group_status'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum$$,
    $$VALUES ('stream'), ('group_name'), ('partition'), ('frontier'), ('high_watermark'), ('lag'), ('inflight'), ('dead_letters')$$,
    'its columns, in the reference''s order');

SELECT rheo.create_stream('s', 2);
SELECT rheo.create_stream('t');
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => 0) FROM generate_series(1, 4) n;
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => 1) FROM generate_series(5, 6) n;
SELECT rheo.create_group('s', 'g');
SELECT rheo.create_group('s', 'h');
SELECT rheo.create_group('t', 'g');

-- Partition 0 of s/g: 1 leased until after now(), 2 rejected, 3 leased
-- until before now(), 4 not offered. Partition 1: all acked.
CREATE TEMP TABLE l AS SELECT * FROM rheo.fetch('s', 'g', max_count => 2, partitions => '{0}', clock => now());
SELECT rheo.reject((SELECT lease_id FROM l WHERE sequence = 2), clock => now());
SELECT rheo.fetch('s', 'g', max_count => 1, partitions => '{0}', lease_ms => 1000, clock => now() - interval '1 hour');
SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM rheo.fetch('s', 'g', partitions => '{1}', clock => now())), clock => now());

SELECT results_eq(
    $$SELECT stream, group_name, "partition", frontier, high_watermark, lag, inflight, dead_letters
        FROM rheo.group_status ORDER BY stream, group_name, "partition"$$,
    $$VALUES ('s'::text, 'g'::text, 0, 0::bigint, 4::bigint, 4::bigint, 1::bigint, 1::bigint),
             ('s', 'g', 1, 2::bigint, 2::bigint, 0::bigint, 0::bigint, 0::bigint),
             ('s', 'h', 0, 0::bigint, 4::bigint, 4::bigint, 0::bigint, 0::bigint),
             ('s', 'h', 1, 0::bigint, 2::bigint, 2::bigint, 0::bigint, 0::bigint),
             ('t', 'g', 0, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint)$$,
    'one row per group and partition; inflight counts leases unexpired as of now()');
SELECT results_eq(
    $$SELECT "partition", frontier, high_watermark, lag FROM rheo.group_status WHERE stream = 's' AND group_name = 'g' ORDER BY 1$$,
    $$SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('s', 'g')$$,
    'the view agrees with rheo.lag');

SELECT * FROM finish();
ROLLBACK;
