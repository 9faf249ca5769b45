BEGIN;
SELECT plan(58);

-- The signature reference §3.2 pins: ordering after clock, and no
-- overload left of the signature without it.
SELECT has_function('rheo', 'create_group', ARRAY['text', 'text', 'integer', 'bigint', 'timestamp with time zone', 'integer[]', 'timestamp with time zone', 'text']::name[], 'rheo.create_group has the reference''s argument types');
SELECT function_returns('rheo', 'create_group', ARRAY['text', 'text', 'integer', 'bigint', 'timestamp with time zone', 'integer[]', 'timestamp with time zone', 'text']::name[], 'void', 'rheo.create_group returns void');
SELECT is((SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'rheo'::regnamespace AND p.proname = 'create_group'),
    1::bigint, 'one rheo.create_group, with the ordering');

SELECT rheo.create_stream('s', 3, clock => '2030-01-01 00:00:00Z');
-- Partition 0 has an event (sequence 3) with an earlier explicit ts than
-- the one before it; partition 1 has two events; partition 2 none.
SELECT rheo.append('s', '{"n": 1}', "partition" => 0, ts => '2030-01-01 01:00:00Z');
SELECT rheo.append('s', '{"n": 2}', "partition" => 0, ts => '2030-01-01 03:00:00Z');
SELECT rheo.append('s', '{"n": 3}', "partition" => 0, ts => '2030-01-01 02:00:00Z');
SELECT rheo.append('s', '{"n": 4}', "partition" => 0, ts => '2030-01-01 04:00:00Z');
SELECT rheo.append('s', '{"n": 5}', "partition" => 1, ts => '2030-01-01 01:00:00Z');
SELECT rheo.append('s', '{"n": 6}', "partition" => 1, ts => '2030-01-01 01:30:00Z');
SELECT rheo.create_stream('other');

-- Defaults.
SELECT lives_ok($$SELECT rheo.create_group('s', 'g', clock => '2030-01-02 00:00:00Z')$$,
    'create_group with defaults');
SELECT results_eq(
    $$SELECT group_name, max_attempts, created_at FROM rheo.list_groups('s')$$,
    $$VALUES ('g'::text, 20, '2030-01-02 00:00:00Z'::timestamptz)$$,
    'max_attempts defaults to 20, created_at is the clock');
SELECT results_eq(
    $$SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('s', 'g')$$,
    $$VALUES (0, 0::bigint, 4::bigint, 4::bigint), (1, 0::bigint, 2::bigint, 2::bigint), (2, 0::bigint, 0::bigint, 0::bigint)$$,
    'a default group starts at the beginning of every partition');
SELECT results_eq(
    $$SELECT "partition", sequence, attempt FROM rheo.fetch('s', 'g', max_count => 100, clock => '2030-01-02 00:00:00Z') ORDER BY 1, 2$$,
    $$VALUES (0, 1::bigint, 1), (0, 2::bigint, 1), (0, 3::bigint, 1), (0, 4::bigint, 1), (1, 1::bigint, 1), (1, 2::bigint, 1)$$,
    'a default group is offered every event');
SELECT lives_ok($$SELECT rheo.create_group('s', 'once', max_attempts => 1)$$,
    'max_attempts 1 is allowed');
SELECT is((SELECT max_attempts FROM rheo.list_groups('s') WHERE group_name = 'once'), 1,
    'max_attempts is stored');
SELECT lives_ok($$SELECT rheo.create_group('other', 'g')$$,
    'the same group name on another stream is another group');
SELECT rheo.create_group('s', 'now-clock');
SELECT is((SELECT created_at FROM rheo.list_groups('s') WHERE group_name = 'now-clock'), now(),
    'without a clock, created_at is now()');

-- Errors, in the order of checks.
SELECT throws_ok($$SELECT rheo.create_group('s', 'g')$$,
    'RH003', 'already_exists', 'a duplicate group');
SELECT throws_ok($$SELECT rheo.create_group('missing', 'g')$$,
    'RH001', 'stream_not_found', 'a group on a missing stream');
SELECT throws_ok($$SELECT rheo.create_group('missing', 'bad name', max_attempts => 0, start_after => -1)$$,
    'RH001', 'stream_not_found', 'the stream is checked before the arguments');
SELECT throws_ok($$SELECT rheo.create_group('s', '')$$,
    'RH011', 'invalid_argument', 'an empty group name');
SELECT throws_ok($$SELECT rheo.create_group('s', 'bad name')$$,
    'RH011', 'invalid_argument', 'a group name with a space');
SELECT throws_ok($$SELECT rheo.create_group('s', '.dot-first')$$,
    'RH011', 'invalid_argument', 'a group name must start with a letter or digit');
SELECT throws_ok(format('SELECT rheo.create_group(%L, %L)', 's', repeat('g', 129)),
    'RH011', 'invalid_argument', 'a group name of 129 characters');
SELECT throws_ok($$SELECT rheo.create_group('s', NULL)$$,
    'RH011', 'invalid_argument', 'a NULL group name');
SELECT throws_ok($$SELECT rheo.create_group('s', 'g0', max_attempts => 0)$$,
    'RH011', 'invalid_argument', 'max_attempts 0');
SELECT throws_ok($$SELECT rheo.create_group('s', 'g0', max_attempts => NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL max_attempts');
SELECT throws_ok($$SELECT rheo.create_group('s', 'g0', start_after => 1, start_at => '2030-01-01Z')$$,
    'RH011', 'invalid_argument', 'start_after and start_at together');
SELECT throws_ok($$SELECT rheo.create_group('s', 'g0', start_after => -1)$$,
    'RH011', 'invalid_argument', 'a negative start_after');
SELECT throws_ok($$SELECT rheo.create_group('s', 'g0', partitions => '{3}')$$,
    'RH007', 'invalid_partition', 'a partition past the last one');
SELECT throws_ok($$SELECT rheo.create_group('s', 'g0', partitions => '{0,-1}')$$,
    'RH007', 'invalid_partition', 'a negative partition');
SELECT is((SELECT count(*) FROM rheo.list_groups('s') WHERE group_name = 'g0'), 0::bigint,
    'failed calls created nothing');

-- start_after in every partition, beyond the high watermark of two of them.
SELECT lives_ok($$SELECT rheo.create_group('s', 'after2', start_after => 2)$$,
    'create_group with start_after');
SELECT results_eq(
    $$SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('s', 'after2')$$,
    $$VALUES (0, 2::bigint, 4::bigint, 2::bigint), (1, 2::bigint, 2::bigint, 0::bigint), (2, 2::bigint, 0::bigint, 0::bigint)$$,
    'start_after N puts the frontier at N, lag never negative');
SELECT results_eq(
    $$SELECT "partition", sequence FROM rheo.fetch('s', 'after2', max_count => 100, clock => '2030-01-02 00:00:00Z') ORDER BY 1, 2$$,
    $$VALUES (0, 3::bigint), (0, 4::bigint)$$,
    'start_after N offers only sequences after N');
SELECT rheo.append('s', '{"n": 7}', "partition" => 1, ts => '2030-01-01 00:10:00Z');
SELECT rheo.append('s', '{"n": 8}', "partition" => 2, ts => '2030-01-01 00:10:00Z');
SELECT rheo.append('s', '{"n": 9}', "partition" => 2, ts => '2030-01-01 00:10:00Z');
SELECT rheo.append('s', '{"n": 10}', "partition" => 2, ts => '2030-01-01 00:10:00Z');
SELECT results_eq(
    $$SELECT "partition", sequence FROM rheo.fetch('s', 'after2', max_count => 100, clock => '2030-01-02 00:00:00Z') ORDER BY 1, 2$$,
    $$VALUES (1, 3::bigint), (2, 3::bigint)$$,
    'past the high watermark, events up to N are never offered, later ones are');

-- start_after in listed partitions only.
SELECT lives_ok($$SELECT rheo.create_group('s', 'after1-p1', start_after => 1, partitions => '{1}')$$,
    'create_group with start_after in one partition');
SELECT results_eq(
    $$SELECT "partition", frontier FROM rheo.lag('s', 'after1-p1')$$,
    $$VALUES (0, 0::bigint), (1, 1::bigint), (2, 0::bigint)$$,
    'partitions not listed start at the beginning');
SELECT lives_ok($$SELECT rheo.create_group('s', 'after1-none', start_after => 1, partitions => '{}')$$,
    'create_group with start_after and no partitions listed');
SELECT results_eq(
    $$SELECT "partition", frontier FROM rheo.lag('s', 'after1-none')$$,
    $$VALUES (0, 0::bigint), (1, 0::bigint), (2, 0::bigint)$$,
    'with an empty partitions list every partition starts at the beginning');

-- start_at: the lowest sequence with ts >= T, later events with an earlier
-- ts included; past the high watermark where no event is that recent.
SELECT lives_ok($$SELECT rheo.create_group('s', 'at0230', start_at => '2030-01-01 02:30:00Z')$$,
    'create_group with start_at');
SELECT results_eq(
    $$SELECT "partition", frontier, high_watermark FROM rheo.lag('s', 'at0230')$$,
    $$VALUES (0, 1::bigint, 4::bigint), (1, 3::bigint, 3::bigint), (2, 3::bigint, 3::bigint)$$,
    'start_at places each cursor at the first event with ts >= T');
SELECT results_eq(
    $$SELECT "partition", sequence FROM rheo.fetch('s', 'at0230', max_count => 100, clock => '2030-01-02 00:00:00Z') ORDER BY 1, 2$$,
    $$VALUES (0, 2::bigint), (0, 3::bigint), (0, 4::bigint)$$,
    'start_at still offers a later event with an earlier ts');
SELECT rheo.append('s', '{"n": 11}', "partition" => 1, ts => '2030-01-01 00:00:00Z');
SELECT results_eq(
    $$SELECT "partition", sequence FROM rheo.fetch('s', 'at0230', max_count => 100, clock => '2030-01-02 00:00:00Z') ORDER BY 1, 2$$,
    $$VALUES (1, 4::bigint)$$,
    'where no event was that recent, only newer appends are offered');

SELECT lives_ok($$SELECT rheo.create_group('s', 'at-p0', start_at => '2030-01-01 03:30:00Z', partitions => '{0}')$$,
    'create_group with start_at in one partition');
SELECT results_eq(
    $$SELECT "partition", frontier FROM rheo.lag('s', 'at-p0')$$,
    $$VALUES (0, 3::bigint), (1, 0::bigint), (2, 0::bigint)$$,
    'start_at applies to the listed partitions only');
SELECT lives_ok($$SELECT rheo.create_group('s', 'at-future', start_at => '2031-01-01Z')$$,
    'create_group with start_at after every event');
SELECT results_eq(
    $$SELECT "partition", frontier, lag FROM rheo.lag('s', 'at-future')$$,
    $$VALUES (0, 4::bigint, 0::bigint), (1, 4::bigint, 0::bigint), (2, 3::bigint, 0::bigint)$$,
    'start_at after every event starts at the high watermarks');

SELECT lives_ok(
    $$SELECT rheo.create_group(stream => 's', group_name => 'by-name', max_attempts => 2, start_after => 1, start_at => NULL,
                               partitions => '{0}', clock => '2030-01-01Z')$$,
    'create_group called with every argument by name');

-- Ordering (reference §3.3).
SELECT is((SELECT g.ordering FROM rheo.groups g WHERE g.stream = 's' AND g.group_name = 'g'), 'none',
    'the ordering defaults to none');
SELECT lives_ok($$SELECT rheo.create_group('s', 'ordered', ordering => 'key')$$, 'create_group with ordering key');
SELECT lives_ok($$SELECT rheo.create_group('s', 'serial', 5, NULL, NULL, NULL, NULL, 'partition')$$,
    'create_group with the ordering as its eighth positional argument');
SELECT results_eq($$SELECT group_name, ordering FROM rheo.list_groups('s') WHERE group_name IN ('ordered', 'serial')$$,
    $$VALUES ('ordered'::text, 'key'::text), ('serial', 'partition')$$,
    'the ordering is stored');
SELECT throws_ok($$SELECT rheo.create_group('s', 'bad', ordering => 'Key')$$, 'RH011', 'invalid_argument',
    'an ordering other than the three words');
SELECT throws_ok($$SELECT rheo.create_group('s', 'bad', ordering => NULL)$$, 'RH011', 'invalid_argument',
    'an explicit NULL ordering');
SELECT set_eq(
    $$SELECT group_name FROM rheo.list_groups('s')$$,
    $$VALUES ('by-name'::text), ('after1-none'), ('after1-p1'), ('after2'), ('at-future'), ('at-p0'), ('at0230'), ('g'), ('now-clock'), ('once'), ('ordered'), ('serial')$$,
    'every created group is listed');

-- The Citus group id (docs/decisions.md, "Citus"), run here by turning
-- rheo._distributed() true in this transaction: a random id new on its
-- stream, drawn again when the stream has it, cursors and all.
CREATE OR REPLACE FUNCTION rheo._distributed() RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT true $$;
SELECT rheo.create_stream('citus', 2);
SELECT setseed(0.25);
SELECT lives_ok($$SELECT rheo.create_group('citus', 'a', clock => '2030-01-02 00:00:00Z')$$,
    'a group is created with a drawn id');
-- The same seed draws a's id first for b: taken, so drawn again.
SELECT setseed(0.25);
SELECT lives_ok($$SELECT rheo.create_group('citus', 'b', start_after => 1)$$,
    'a drawn id the stream has is drawn again');
SELECT is((SELECT count(DISTINCT g.group_id) FROM rheo.groups g WHERE g.stream = 'citus'), 2::bigint,
    'the two groups have ids of their own');
SELECT setseed(0.25);
SELECT is((SELECT g.group_id FROM rheo.groups g WHERE g.stream = 'citus' AND g.group_name = 'a'),
    1 + floor(random() * 2147483646)::int, 'a has the first draw');
SELECT is((SELECT g.group_id FROM rheo.groups g WHERE g.stream = 'citus' AND g.group_name = 'b'),
    1 + floor(random() * 2147483646)::int, 'b has the second, the first being taken');
SELECT results_eq(
    $$SELECT g.group_name, count(c.*) FROM rheo.groups g JOIN rheo.cursors c ON c.group_id = g.group_id AND c.stream = g.stream
       WHERE g.stream = 'citus' GROUP BY 1 ORDER BY 1$$,
    $$VALUES ('a'::text, 2::bigint), ('b', 2::bigint)$$,
    'each has a cursor per partition, under its own id');
SELECT results_eq($$SELECT group_name, max_attempts, created_at FROM rheo.list_groups('citus') WHERE group_name = 'a'$$,
    $$VALUES ('a'::text, 20, '2030-01-02 00:00:00Z'::timestamptz)$$,
    'its row is the one the identity would have made');
SELECT setseed(0.25);
SELECT throws_ok($$SELECT rheo.create_group('citus', 'a')$$, 'RH003', 'already_exists',
    'a duplicate group with a drawn id is already_exists');

SELECT * FROM finish();
ROLLBACK;
