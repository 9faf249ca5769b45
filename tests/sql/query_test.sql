BEGIN;
SELECT plan(66);

SELECT has_function('rheo', 'query', ARRAY['text', 'jsonb', 'integer', 'text', 'boolean']::name[],
    'rheo.query(stream, filter, max_count, after, descending)');
SELECT function_returns('rheo', 'query', ARRAY['text', 'jsonb', 'integer', 'text', 'boolean']::name[],
    'setof rheo.events', 'rheo.query returns SETOF rheo.events');
SELECT has_function('rheo', 'query_page', ARRAY['text', 'jsonb', 'integer', 'text', 'boolean']::name[],
    'rheo.query_page has the arguments of rheo.query');

-- Stream f, two partitions, written so that every filter tells events apart:
--   p0 s1  order.placed o1, total 10, lines, tags    c1          00:00:01
--   p0 s2  order.paid   o1, total 10.0               c1, caused by p0 s1   00:00:02
--   p0 s3  order.placed o2, total "10"               c2          00:00:03
--   p1 s1  order.shipped o1                          c1, caused by p0 s2   00:00:04
--   p1 s2  no type, no key                           {}          00:00:05
--   p1 s3  order.placed o3, total 1e1                42 (number) 00:00:00
SELECT rheo.create_stream('f', 2);
SELECT rheo.create_stream('other');
SELECT rheo.append('other', '{"type": "order.placed", "order": {"total": 10}}', metadata => '{"correlation_id": "c1"}');
SELECT rheo.append('f', '{"type": "order.placed", "order": {"id": "o1", "total": 10, "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]}, "tags": ["new", "vip"]}',
                   key => 'o1', "partition" => 0, id => 'e1',
                   metadata => '{"correlation_id": "c1", "producer": "shop", "schema": "order", "schema_version": 1}',
                   ts => '2030-01-01 00:00:01Z');
SELECT rheo.append('f', '{"type": "order.paid", "order": {"id": "o1", "total": 10.0}}',
                   key => 'o1', "partition" => 0, id => 'e2',
                   metadata => '{"correlation_id": "c1", "causation_id": "e1"}', ts => '2030-01-01 00:00:02Z');
SELECT rheo.append('f', '{"type": "order.placed", "order": {"id": "o2", "total": "10"}}',
                   key => 'o2', "partition" => 0, id => 'e3',
                   metadata => '{"correlation_id": "c2"}', ts => '2030-01-01 00:00:03Z');
SELECT rheo.append('f', '{"type": "order.shipped", "order": {"id": "o1"}}',
                   key => 'o1', "partition" => 1, id => 'e4',
                   metadata => '{"correlation_id": "c1", "causation_id": "e2"}', ts => '2030-01-01 00:00:04Z');
SELECT rheo.append('f', '{"n": 1}', "partition" => 1, id => 'e5', ts => '2030-01-01 00:00:05Z');
SELECT rheo.append('f', '{"type": "order.placed", "order": {"id": "o3", "total": 1e1}}',
                   "partition" => 1, id => 'e6', metadata => '{"correlation_id": 42}', ts => '2030-01-01 00:00:00Z');

-- Ordering.
SELECT results_eq($$SELECT id FROM rheo.query('f')$$,
    $$VALUES ('e1'), ('e4'), ('e2'), ('e5'), ('e3'), ('e6')$$,
    'the default query returns every event of the stream in (sequence, partition) order');
SELECT results_eq($$SELECT * FROM rheo.query('f')$$,
    $$SELECT * FROM rheo.events WHERE stream = 'f' ORDER BY sequence, "partition"$$,
    'rows are the stored events, every column');
SELECT results_eq($$SELECT id FROM rheo.query('f', descending => true)$$,
    $$VALUES ('e6'), ('e3'), ('e5'), ('e2'), ('e4'), ('e1')$$,
    'descending reverses the order: (sequence, partition) descending');
SELECT results_eq($$SELECT id FROM rheo.query('f', max_count => 4)$$,
    $$VALUES ('e1'), ('e4'), ('e2'), ('e5')$$,
    'max_count cuts the merged order');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{}', 2, NULL, true)$$,
    $$VALUES ('e6'), ('e3')$$,
    'positional arguments: filter, max_count, after, descending');

-- Filters.
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"type": "order.placed"}')$$,
    $$VALUES ('e1'), ('e3'), ('e6')$$, 'type');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"key": "o1"}')$$,
    $$VALUES ('e1'), ('e4'), ('e2')$$, 'key');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"partition": 1}')$$,
    $$VALUES ('e4'), ('e5'), ('e6')$$, 'partition');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"payload": {"order": {"total": 10}}}')$$,
    $$VALUES ('e1'), ('e2'), ('e6')$$,
    'payload numbers compare as JSON numbers: 10 matches 10, 10.0 and 1e1 but not "10"');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"payload": {"order": {"total": "10"}}}')$$,
    $$VALUES ('e3')$$, 'a payload string matches only the string');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"payload": {"order": {"lines": [{"sku": "b"}]}}}')$$,
    $$VALUES ('e1')$$, 'nested: an array contains an object element that contains the pattern''s');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"payload": {"tags": ["vip"]}}')$$,
    $$VALUES ('e1')$$, 'an array matches an array holding the element');
SELECT is_empty($$SELECT id FROM rheo.query('f', '{"payload": {"tags": "vip"}}')$$,
    'a nested array does not match a bare scalar');
SELECT is_empty($$SELECT id FROM rheo.query('f', '{"payload": {"order": {"id": "o1", "total": 11}}}')$$,
    'every key of the pattern must match');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"metadata": {"correlation_id": "c1"}}')$$,
    $$VALUES ('e1'), ('e4'), ('e2')$$, 'metadata correlation_id, of this stream only');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"metadata": {"correlation_id": 42}}')$$,
    $$VALUES ('e6')$$, 'a numeric correlation_id matches the number');
SELECT is_empty($$SELECT id FROM rheo.query('f', '{"metadata": {"correlation_id": "42"}}')$$,
    'a string correlation_id does not match the number');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"metadata": {"causation_id": "e2"}}')$$,
    $$VALUES ('e4')$$, 'metadata causation_id');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"metadata": {"producer": "shop", "schema": "order", "schema_version": 1}}')$$,
    $$VALUES ('e1')$$, 'metadata producer, schema and schema_version');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"from": "2030-01-01T00:00:02Z", "to": "2030-01-01T00:00:04Z"}')$$,
    $$VALUES ('e4'), ('e2'), ('e3')$$, 'from and to are inclusive ts bounds');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"from": "2030-01-01T01:00:03+01:00"}')$$,
    $$VALUES ('e4'), ('e5'), ('e3')$$, 'from honours the offset');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"after_sequence": 1, "until_sequence": 2}')$$,
    $$VALUES ('e2'), ('e5')$$, 'after_sequence is exclusive, until_sequence inclusive');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"after_sequence": 1, "until_sequence": 2}', descending => true)$$,
    $$VALUES ('e5'), ('e2')$$, 'sequence bounds descending');
SELECT results_eq($$SELECT id FROM rheo.query('f', '{"type": "order.placed", "partition": 0, "metadata": {"correlation_id": "c2"}}')$$,
    $$VALUES ('e3')$$, 'filters combine with AND');
SELECT is_empty($$SELECT id FROM rheo.query('f', '{"type": "order.placed", "key": "o2", "partition": 1}')$$,
    'a key in another partition matches nothing there');

-- Arguments, in the order of checks of reference §1.4.
SELECT throws_ok($$SELECT * FROM rheo.query('missing', '{"bogus": 1}')$$, 'RH001', 'stream_not_found',
    'a missing stream is reported before the filter');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"type": "x", "bogus": 1}')$$, 'RH011', 'invalid_argument',
    'an unknown filter key is invalid_argument');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '[]')$$, 'RH011', 'invalid_argument', 'a filter that is not an object');
SELECT throws_ok($$SELECT * FROM rheo.query('f', NULL)$$, 'RH011', 'invalid_argument', 'a NULL filter');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"type": 1}')$$, 'RH011', 'invalid_argument', 'type must be a string');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"key": ""}')$$, 'RH011', 'invalid_argument', 'key must not be empty');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"partition": 0.5}')$$, 'RH011', 'invalid_argument', 'partition must be an integer');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"partition": "0"}')$$, 'RH011', 'invalid_argument', 'partition must be a number');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"partition": 2}')$$, 'RH007', 'invalid_partition', 'partition out of range');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"payload": [1]}')$$, 'RH011', 'invalid_argument', 'payload must be an object');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"metadata": "c1"}')$$, 'RH011', 'invalid_argument', 'metadata must be an object');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"from": "yesterday-ish"}')$$, 'RH011', 'invalid_argument', 'from must be a timestamp');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"to": 5}')$$, 'RH011', 'invalid_argument', 'to must be a string');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"after_sequence": -1}')$$, 'RH011', 'invalid_argument', 'after_sequence must be >= 0');
SELECT throws_ok($$SELECT * FROM rheo.query('f', '{"until_sequence": null}')$$, 'RH011', 'invalid_argument', 'until_sequence must not be null');
SELECT throws_ok($$SELECT * FROM rheo.query('f', max_count => -1)$$, 'RH011', 'invalid_argument', 'max_count < 0');
SELECT throws_ok($$SELECT * FROM rheo.query('f', max_count => NULL)$$, 'RH011', 'invalid_argument', 'max_count NULL');
SELECT throws_ok($$SELECT * FROM rheo.query('f', descending => NULL)$$, 'RH011', 'invalid_argument', 'descending NULL');

-- Cursors.
SELECT throws_ok($$SELECT * FROM rheo.query('f', after => 'not a cursor!')$$, 'RH011', 'invalid_argument',
    'a string that is not a cursor is invalid_argument');
SELECT throws_ok($$SELECT * FROM rheo.query('f', after => 'eHl6')$$, 'RH011', 'invalid_argument',
    'base64 of something else is invalid_argument');
SELECT throws_ok(format('SELECT * FROM rheo.query(%L, after => %L)', 'f',
                        (SELECT next_cursor FROM rheo.query_page('f', '{"type": "order.placed"}', 1))),
    'RH010', 'cursor_not_found', 'a cursor of another filter is cursor_not_found');
SELECT throws_ok(format('SELECT * FROM rheo.query(%L, after => %L)', 'other',
                        (SELECT next_cursor FROM rheo.query_page('f', '{}', 1))),
    'RH010', 'cursor_not_found', 'a cursor of another stream is cursor_not_found');
SELECT throws_ok(format('SELECT * FROM rheo.query(%L, after => %L, descending => true)', 'f',
                        (SELECT next_cursor FROM rheo.query_page('f', '{}', 1))),
    'RH010', 'cursor_not_found', 'a cursor of the other direction is cursor_not_found');

-- Paging: the walk pages through a query with page sizes taken in turn
-- from sizes, following each page's cursor, until a short page.
CREATE FUNCTION pg_temp.walk(stream text, filter jsonb, sizes int[], descending boolean)
RETURNS SETOF rheo.events LANGUAGE plpgsql AS $fn$
DECLARE
    v_cursor text;
    v_page   record;
    v_size   int;
    v_i      int := 0;
BEGIN
    LOOP
        v_size := sizes[1 + v_i % cardinality(sizes)];
        SELECT * INTO v_page FROM rheo.query_page(stream, filter, v_size, v_cursor, descending);
        RETURN QUERY SELECT * FROM unnest(v_page.events);
        EXIT WHEN cardinality(v_page.events) < v_size;
        v_cursor := v_page.next_cursor;
        v_i := v_i + 1;
    END LOOP;
END
$fn$;

-- Random data over 5 partitions: uneven partitions, random types.
SELECT setseed(0.25);
SELECT rheo.create_stream('r', 5);
SELECT count(*) FROM (
    SELECT rheo.append('r', jsonb_build_object('type', 't' || floor(random() * 3)::int, 'n', n),
                       "partition" => floor(random() * random() * 5)::int)
      FROM generate_series(1, 300) n) AS x;

SELECT results_eq($$SELECT id FROM pg_temp.walk('r', '{}', ARRAY[1, 7, 2, 30, 3], false)$$,
    $$SELECT id FROM rheo.events WHERE stream = 'r' ORDER BY sequence, "partition"$$,
    'ascending pages of varied sizes concatenate to the whole stream in order');
SELECT results_eq($$SELECT id FROM pg_temp.walk('r', '{}', ARRAY[13, 1, 4], true)$$,
    $$SELECT id FROM rheo.events WHERE stream = 'r' ORDER BY sequence DESC, "partition" DESC$$,
    'descending pages of varied sizes concatenate to the whole stream in reverse order');
SELECT results_eq($$SELECT id FROM pg_temp.walk('r', '{"type": "t1"}', ARRAY[5, 2, 9], false)$$,
    $$SELECT id FROM rheo.events WHERE stream = 'r' AND type = 't1' ORDER BY sequence, "partition"$$,
    'filtered ascending pages concatenate to the filtered result');
SELECT results_eq($$SELECT id FROM pg_temp.walk('r', '{"type": "t2", "after_sequence": 10, "until_sequence": 60}', ARRAY[3, 1], true)$$,
    $$SELECT id FROM rheo.events WHERE stream = 'r' AND type = 't2' AND sequence > 10 AND sequence <= 60
       ORDER BY sequence DESC, "partition" DESC$$,
    'filtered descending pages within sequence bounds concatenate to the filtered result');
SELECT results_eq($$SELECT id FROM pg_temp.walk('r', '{"partition": 3}', ARRAY[4], false)$$,
    $$SELECT id FROM rheo.events WHERE stream = 'r' AND "partition" = 3 ORDER BY sequence$$,
    'one partition pages in sequence order');

-- Appends between pages: the page after them holds the new events of
-- the partitions behind and nothing twice.
SELECT rheo.create_stream('live', 3);
SELECT rheo.append('live', jsonb_build_object('n', n), "partition" => 0) FROM generate_series(1, 6) n;
SELECT rheo.append('live', '{"n": 7}', "partition" => 1);
CREATE TEMP TABLE live1 AS SELECT * FROM rheo.query_page('live', max_count => 4);
SELECT results_eq($$SELECT "partition", sequence FROM live1, unnest(live1.events)$$,
    $$VALUES (0, 1::bigint), (1, 1::bigint), (0, 2::bigint), (0, 3::bigint)$$,
    'live: the first page');
SELECT rheo.append('live', '{"n": 8}', "partition" => 1);
SELECT rheo.append('live', '{"n": 9}', "partition" => 2);
SELECT results_eq(format('SELECT "partition", sequence FROM rheo.query(%L, after => %L)', 'live', (SELECT next_cursor FROM live1)),
    $$VALUES (2, 1::bigint), (1, 2::bigint), (0, 4::bigint), (0, 5::bigint), (0, 6::bigint)$$,
    'live: events appended behind the cursor''s last event come on the next page, nothing repeats');
CREATE TEMP TABLE live2 AS
    SELECT * FROM rheo.query_page('live', max_count => 100, after => (SELECT next_cursor FROM live1));
SELECT rheo.append('live', '{"n": 10}', "partition" => 2);
SELECT results_eq(format('SELECT "partition", sequence FROM rheo.query(%L, after => %L)', 'live', (SELECT next_cursor FROM live2)),
    $$VALUES (2, 2::bigint)$$,
    'live: the cursor of a short page finds what is appended after it');
SELECT results_eq(format('SELECT cardinality(events), next_cursor FROM rheo.query_page(%L, max_count => 0, after => %L)',
                         'live', (SELECT next_cursor FROM live2)),
    format('VALUES (0, %L)', (SELECT next_cursor FROM live2)),
    'max_count 0 returns no events and the cursor it was given');
CREATE TEMP TABLE back1 AS SELECT * FROM rheo.query_page('live', max_count => 2, descending => true);
SELECT rheo.append('live', '{"n": 11}', "partition" => 1);
SELECT results_eq(format('SELECT "partition", sequence FROM rheo.query(%L, after => %L, descending => true)',
                         'live', (SELECT next_cursor FROM back1)),
    $$VALUES (0, 4::bigint), (0, 3::bigint), (2, 2::bigint), (1, 2::bigint), (0, 2::bigint),
             (2, 1::bigint), (1, 1::bigint), (0, 1::bigint)$$,
    'descending: the walk covers what was there at its first page, not later appends');
SELECT is(cardinality((SELECT events FROM rheo.query_page('live', '{"type": "none"}'))), 0,
    'a query matching nothing returns an empty page');

-- Lineage lookups read their matches through the lineage indexes, not
-- the stream: rows of rheo.events read in this transaction, before and
-- after each lookup.
SELECT rheo.create_stream('lineage', 4);
SELECT count(*) FROM rheo.append_batch('lineage', (SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 4000) n),
                                       metadata => '{"correlation_id": "bulk", "causation_id": "bulk"}');
SELECT count(*) FROM rheo.append_batch('lineage', '[{"n": 1}, {"n": 2}]', metadata => '{"correlation_id": "needle", "causation_id": "pin"}');
ANALYZE rheo.events;
CREATE FUNCTION pg_temp.events_read() RETURNS bigint LANGUAGE sql AS $fn$
    SELECT coalesce(t.seq_tup_read, 0) + coalesce(t.idx_tup_fetch, 0)
      FROM pg_stat_xact_user_tables t WHERE t.relid = 'rheo.events'::regclass
$fn$;
CREATE TEMP TABLE reads (n bigint);
INSERT INTO reads SELECT pg_temp.events_read();
SELECT is((SELECT count(*) FROM rheo.query('lineage', '{"metadata": {"correlation_id": "needle"}}')), 2::bigint,
    'lineage: the correlation id lookup finds its events');
SELECT cmp_ok(pg_temp.events_read() - (SELECT n FROM reads), '<', 20::bigint,
    'lineage: a correlation id lookup reads its matches, not the 4000 other events of the stream');
UPDATE reads SET n = pg_temp.events_read();
SELECT is((SELECT count(*) FROM rheo.query('lineage', '{"metadata": {"causation_id": "pin"}}', descending => true)), 2::bigint,
    'lineage: the causation id lookup finds its events');
SELECT cmp_ok(pg_temp.events_read() - (SELECT n FROM reads), '<', 20::bigint,
    'lineage: a causation id lookup reads its matches, not the stream');

SELECT * FROM finish();
ROLLBACK;
