BEGIN;
SELECT plan(19);

-- The signature reference §6.5 pins.
SELECT has_function('rheo', 'dead_letters', ARRAY['text', 'text', 'integer', 'text']::name[], 'rheo.dead_letters has the reference''s argument types');
SELECT function_returns('rheo', 'dead_letters', ARRAY['text', 'text', 'integer', 'text']::name[], 'setof record', 'rheo.dead_letters returns setof record');

SELECT rheo.create_stream('s', 2);
SELECT rheo.append('s', jsonb_build_object('type', 'order.placed', 'n', n), key => 'k' || n, "partition" => 0,
                   metadata => jsonb_build_object('producer', 'shop'), ts => '2029-12-31Z', clock => '2030-01-01Z')
  FROM generate_series(1, 3) n;
SELECT rheo.append('s', jsonb_build_object('n', n), "partition" => 1, clock => '2030-01-01Z') FROM generate_series(4, 5) n;
SELECT rheo.create_group('s', 'g', max_attempts => 1);
SELECT rheo.create_group('s', 'other');

-- Dead letters made out of order: (1,1) rejected, (0,2) out of attempts by
-- retry, (0,1) by lease expiry.
CREATE TEMP TABLE l AS SELECT * FROM rheo.fetch('s', 'g', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');
SELECT rheo.renew(lease_id, 60000, clock => '2030-01-01 00:00:00Z') FROM l WHERE NOT ("partition" = 0 AND sequence = 1);
SELECT rheo.reject((SELECT lease_id FROM l WHERE "partition" = 1 AND sequence = 1), 'bad input', clock => '2030-01-01 00:00:01Z');
SELECT rheo.retry((SELECT lease_id FROM l WHERE "partition" = 0 AND sequence = 2), 'timeout', clock => '2030-01-01 00:00:02Z');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'g', clock => '2030-01-01 00:00:03Z')$$,
    'the fetch that finds the expired lease at the limit returns nothing');

SELECT results_eq(
    $$SELECT "partition", sequence, attempt, reason, dead_lettered_at FROM rheo.dead_letters('s', 'g')$$,
    $$VALUES (0, 1::bigint, 1, 'lease_expired'::text, '2030-01-01 00:00:03Z'::timestamptz),
             (0, 2::bigint, 1, 'timeout'::text, '2030-01-01 00:00:02Z'::timestamptz),
             (1, 1::bigint, 1, 'bad input'::text, '2030-01-01 00:00:01Z'::timestamptz)$$,
    'dead letters ordered by (partition, sequence) with attempt, reason and time');
SELECT results_eq(
    $$SELECT event_id, type, key, payload, metadata, ts FROM rheo.dead_letters('s', 'g')$$,
    $$SELECT e.id, e.type, e.key, e.payload, e.metadata, e.ts
        FROM rheo.events e JOIN (VALUES (0, 1), (0, 2), (1, 1)) v(p, q) ON e."partition" = v.p AND e.sequence = v.q
       WHERE e.stream = 's' ORDER BY e."partition", e.sequence$$,
    'each dead letter carries its event');

-- Paging by event id.
SELECT results_eq($$SELECT "partition", sequence FROM rheo.dead_letters('s', 'g', max_count => 2)$$,
    $$VALUES (0, 1::bigint), (0, 2::bigint)$$, 'max_count limits the page');
SELECT results_eq(
    format('SELECT "partition", sequence FROM rheo.dead_letters(%L, %L, max_count => 2, after => %L)', 's', 'g',
           (SELECT id FROM rheo.events WHERE stream = 's' AND "partition" = 0 AND sequence = 2)),
    $$VALUES (1, 1::bigint)$$, 'after an event id, the next page');
SELECT results_eq(
    format('SELECT "partition", sequence FROM rheo.dead_letters(%L, %L, after => %L)', 's', 'g',
           (SELECT id FROM rheo.events WHERE stream = 's' AND "partition" = 0 AND sequence = 1)),
    $$VALUES (0, 2::bigint), (1, 1::bigint)$$, 'after the first dead letter, the rest');
SELECT is_empty(
    format('SELECT * FROM rheo.dead_letters(%L, %L, after => %L)', 's', 'g',
           (SELECT id FROM rheo.events WHERE stream = 's' AND "partition" = 1 AND sequence = 1)),
    'after the last dead letter, nothing');
SELECT throws_ok($$SELECT * FROM rheo.dead_letters('s', 'g', after => 'no-such-id')$$,
    'RH010', 'cursor_not_found', 'after an unknown id');
SELECT throws_ok(
    format('SELECT * FROM rheo.dead_letters(%L, %L, after => %L)', 's', 'g',
           (SELECT id FROM rheo.events WHERE stream = 's' AND "partition" = 0 AND sequence = 3)),
    'RH010', 'cursor_not_found', 'after an event that is not a dead letter of the group');
SELECT is_empty($$SELECT * FROM rheo.dead_letters('s', 'g', max_count => 0)$$, 'max_count 0 returns nothing');
SELECT is_empty($$SELECT * FROM rheo.dead_letters('s', 'other')$$, 'another group has its own dead letters');

SELECT rheo.create_stream('many');
SELECT rheo.append_batch('many', (SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 120) n));
SELECT rheo.create_group('many', 'g');
SELECT rheo.reject(lease_id) FROM rheo.fetch('many', 'g', max_count => 120);
SELECT is((SELECT count(*) FROM rheo.dead_letters('many', 'g')), 100::bigint, 'max_count defaults to 100');

SELECT throws_ok($$SELECT * FROM rheo.dead_letters('s', 'g', max_count => -1)$$,
    'RH011', 'invalid_argument', 'a negative max_count');
SELECT throws_ok($$SELECT * FROM rheo.dead_letters('s', 'g', max_count => NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL max_count');
SELECT throws_ok($$SELECT * FROM rheo.dead_letters('missing', 'g')$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT * FROM rheo.dead_letters('s', 'missing', max_count => -1)$$,
    'RH002', 'group_not_found', 'the group is checked before the arguments');

SELECT results_eq(
    format('SELECT "partition", sequence FROM rheo.dead_letters(stream => %L, group_name => %L, max_count => 1, after => %L)', 's', 'g',
           (SELECT id FROM rheo.events WHERE stream = 's' AND "partition" = 0 AND sequence = 1)),
    $$VALUES (0, 2::bigint)$$, 'dead_letters called with every argument by name');

SELECT * FROM finish();
ROLLBACK;
