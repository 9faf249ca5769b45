BEGIN;
SELECT plan(47);

-- The signature reference §4.2 pins.
SELECT has_function('rheo', 'append_batch', ARRAY['text', 'jsonb', 'text[]', 'text[]', 'integer', 'jsonb', 'timestamp with time zone']::name[], 'rheo.append_batch has the reference''s argument types');
SELECT function_returns('rheo', 'append_batch', ARRAY['text', 'jsonb', 'text[]', 'text[]', 'integer', 'jsonb', 'timestamp with time zone']::name[], 'setof rheo.events', 'rheo.append_batch returns setof rheo.events');

-- The partition reference §4.1 routes a key to, written out independently of Rheo.
CREATE FUNCTION pg_temp.route(key text, partition_count int) RETURNS int LANGUAGE sql AS $fn$
    SELECT (('x' || substr(md5(key), 1, 8))::bit(32)::bigint % partition_count)::int
$fn$;

SELECT rheo.create_stream('s', 3, clock => '2030-01-01 00:00:00Z');

-- Without keys: one partition, input order, contiguous sequences.
CREATE TEMP TABLE b1 AS
    SELECT * FROM rheo.append_batch('s', '[{"type": "a"}, {"type": "b"}, {"type": "c"}]', clock => '2030-01-01 00:00:01Z')
           WITH ORDINALITY;
SELECT results_eq(
    $$SELECT ordinality, stream, "partition", sequence, type, metadata, ts FROM b1 ORDER BY ordinality$$,
    $$VALUES (1::bigint, 's'::text, 0, 1::bigint, 'a'::text, '{}'::jsonb, '2030-01-01 00:00:01Z'::timestamptz),
             (2, 's', 0, 2, 'b', '{}', '2030-01-01 00:00:01Z'),
             (3, 's', 0, 3, 'c', '{}', '2030-01-01 00:00:01Z')$$,
    'a batch without keys goes to partition 0 in input order with contiguous sequences');
SELECT is((SELECT count(DISTINCT id) FROM b1), 3::bigint,
    'every event of the batch gets its own generated id');
SELECT bag_eq(
    $$SELECT * FROM rheo.events WHERE stream = 's'$$,
    $$SELECT stream, "partition", sequence, id, key, type, payload, metadata, ts FROM b1$$,
    'the returned rows are the stored rows');

-- With keys: routed per element, result still in input order, sequences
-- contiguous per partition in input order.
CREATE TEMP TABLE keyed AS
    SELECT k, ord FROM unnest(ARRAY['a', 'b', 'k1', 'a', 'k1', 'b', 'a']) WITH ORDINALITY AS u(k, ord);
CREATE TEMP TABLE b2 AS
    SELECT * FROM rheo.append_batch('s',
        (SELECT jsonb_agg(jsonb_build_object('n', ord) ORDER BY ord) FROM keyed),
        keys => (SELECT array_agg(k ORDER BY ord) FROM keyed),
        ids => (SELECT array_agg('k-' || ord ORDER BY ord) FROM keyed))
    WITH ORDINALITY;
SELECT results_eq(
    $$SELECT ordinality, (payload->>'n')::bigint, id, key, "partition" FROM b2 ORDER BY ordinality$$,
    $$SELECT ord, ord, 'k-' || ord, k, pg_temp.route(k, 3) FROM keyed ORDER BY ord$$,
    'keys and ids are parallel to the payloads; each element routes by its key; input order is kept');
SELECT results_eq(
    $$SELECT sequence FROM b2 ORDER BY ordinality$$,
    $$SELECT (SELECT coalesce(max(sequence), 0) FROM b1 WHERE "partition" = pg_temp.route(k, 3))
             + row_number() OVER (PARTITION BY pg_temp.route(k, 3) ORDER BY ord)
        FROM keyed ORDER BY ord$$,
    'each partition gets contiguous sequences following its high watermark, in input order');
SELECT is((SELECT count(DISTINCT pg_temp.route(k, 3)) FROM keyed), 3::bigint,
    'the keys of the batch above cover every partition');

CREATE TEMP TABLE b3 AS
    SELECT * FROM rheo.append_batch('s', '[{"key": "a", "n": 1}, {"n": 2}, {"key": "c", "n": 3}]', keys => ARRAY['b', NULL, NULL])
    WITH ORDINALITY;
SELECT results_eq(
    $$SELECT key, "partition" FROM b3 ORDER BY ordinality$$,
    $$VALUES ('b'::text, pg_temp.route('b', 3)), (NULL, 0), ('c', pg_temp.route('c', 3))$$,
    'a key argument wins over payload.key; without one, payload.key routes; without both, partition 0');

SELECT results_eq(
    $$SELECT "partition", key FROM rheo.append_batch('s', '[{}, {}]', keys => ARRAY['a', 'b'], "partition" => 2)$$,
    $$VALUES (2, 'a'::text), (2, 'b'::text)$$,
    'an explicit partition applies to the whole batch and keys are still stored');
SELECT results_eq(
    $$SELECT metadata FROM rheo.append_batch('s', '[{}, {}]', metadata => '{"producer": "loader"}')$$,
    $$VALUES ('{"producer": "loader"}'::jsonb), ('{"producer": "loader"}'::jsonb)$$,
    'metadata applies to every event of the batch');
SELECT is((SELECT ts FROM rheo.append_batch('s', '[{}]') LIMIT 1), now(),
    'without a clock, ts is now()');
SELECT results_eq(
    $$SELECT "partition", count(*), min(sequence), max(sequence) FROM rheo.events WHERE stream = 's' GROUP BY 1 ORDER BY 1$$,
    $$SELECT "partition", count(*), 1::bigint, count(*) FROM rheo.events WHERE stream = 's' GROUP BY 1 ORDER BY 1$$,
    'sequences are contiguous from 1 in every partition');

-- Empty batch.
CREATE TEMP TABLE counted AS SELECT count(*) AS n FROM rheo.events WHERE stream = 's';
SELECT is_empty($$SELECT * FROM rheo.append_batch('s', '[]')$$,
    'an empty array returns no rows');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), (SELECT n FROM counted),
    'an empty array writes nothing');

-- Errors: stream first, then arguments; a failing batch writes nothing.
SELECT throws_ok($$SELECT rheo.append_batch('missing', '[{}]')$$,
    'RH001', 'stream_not_found', 'a batch to a missing stream');
SELECT throws_ok($$SELECT rheo.append_batch('missing', '{}', "partition" => 7)$$,
    'RH001', 'stream_not_found', 'the stream is checked before the arguments');
SELECT throws_ok($$SELECT rheo.append_batch('s', '{}')$$,
    'RH011', 'invalid_argument', 'payloads that are an object, not an array');
SELECT throws_ok($$SELECT rheo.append_batch('s', NULL)$$,
    'RH011', 'invalid_argument', 'NULL payloads');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{}, 1, {}]')$$,
    'RH011', 'invalid_argument', 'an array with an element that is not an object');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{}, {}]', keys => ARRAY['a'])$$,
    'RH011', 'invalid_argument', 'fewer keys than payloads');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{}, {}]', ids => ARRAY['x', 'y', 'z'])$$,
    'RH011', 'invalid_argument', 'more ids than payloads');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{}, {}]', ids => ARRAY['x', ''])$$,
    'RH011', 'invalid_argument', 'an empty id');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{}]', metadata => '"m"')$$,
    'RH011', 'invalid_argument', 'metadata that is not an object');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{}]', "partition" => 3)$$,
    'RH007', 'invalid_partition', 'a partition past the last one');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), (SELECT n FROM counted),
    'failed batches wrote nothing');

-- Idempotent ids.
CREATE TEMP TABLE dup AS
    SELECT * FROM rheo.append_batch('s', '[{"n": 1}, {"n": 2}, {"n": 1}]', ids => ARRAY['d-1', 'd-2', 'd-1'], "partition" => 1)
    WITH ORDINALITY;
SELECT results_eq(
    $$SELECT ordinality, id, (payload->>'n')::int FROM dup ORDER BY ordinality$$,
    $$VALUES (1::bigint, 'd-1'::text, 1), (2, 'd-2', 2), (3, 'd-1', 1)$$,
    'a repeated id inside a batch keeps its place in the result');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's' AND id = 'd-1'), 1::bigint,
    'a repeated id with identical content is stored once');
SELECT results_eq(
    $$SELECT sequence - min(sequence) OVER () FROM dup ORDER BY ordinality$$,
    $$VALUES (0::bigint), (1), (0)$$,
    'the repeat inside the batch takes no sequence of its own');
SELECT is((SELECT sequence FROM rheo.append('s', '{}', "partition" => 1)), (SELECT max(sequence) + 1 FROM dup),
    'the batch allocated exactly one sequence per distinct id');

UPDATE counted SET n = (SELECT count(*) FROM rheo.events WHERE stream = 's');
SELECT results_eq(
    $$SELECT id, sequence, payload FROM rheo.append_batch('s', '[{"n": 2}, {"n": 3}]', ids => ARRAY['d-2', 'd-3'], "partition" => 1)$$,
    $$VALUES ('d-2'::text, (SELECT sequence FROM dup WHERE id = 'd-2'), '{"n": 2}'::jsonb),
             ('d-3', (SELECT max(sequence) + 2 FROM dup), '{"n": 3}')$$,
    'a stored id in a batch returns the stored event; the new ones follow without a gap');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), (SELECT n + 1 FROM counted),
    'only the new id was written');

UPDATE counted SET n = (SELECT count(*) FROM rheo.events WHERE stream = 's');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{"n": 4}, {"n": 5}, {"n": 6}]', ids => ARRAY['d-4', 'd-5', 'd-4'])$$,
    'RH003', 'already_exists', 'a repeated id inside a batch with different content');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{"n": 4}, {"n": 99}]', ids => ARRAY['d-4', 'd-1'])$$,
    'RH003', 'already_exists', 'a stored id with different content');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{"n": 1}]', ids => ARRAY['d-1'], keys => ARRAY['other'])$$,
    'RH003', 'already_exists', 'a stored id with a different key');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), (SELECT n FROM counted),
    'a conflicting batch writes none of its events');
SELECT results_eq(
    $$SELECT id, sequence FROM rheo.append_batch('s', '[{"n": 1}, {"n": 2}]', ids => ARRAY['d-1', 'd-2'], "partition" => 0, clock => '2031-01-01Z')$$,
    $$SELECT id, sequence FROM dup WHERE ordinality < 3 ORDER BY ordinality$$,
    'a repeated batch returns the stored events; partition and clock are ignored');

SELECT results_eq(
    $$SELECT "partition", key, id FROM rheo.append_batch(stream => 's', payloads => '[{}]', keys => ARRAY['a'], ids => ARRAY['by-name'],
                                                        "partition" => 2, metadata => '{}', clock => '2030-01-01Z')$$,
    $$VALUES (2, 'a'::text, 'by-name'::text)$$,
    'append_batch called with every argument by name');
SELECT throws_ok($$SELECT rheo.append_batch('s', '[{}]', metadata => NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL metadata');

-- Payloads are checked where the append reads them (in the INSERT, the
-- routing pass or the pass over given ids); a failure there reports what
-- a check of the whole batch in the order of reference §1.5 finds first,
-- and the call writes nothing.
CREATE FUNCTION pg_temp.detail_of(q text) RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
    v_detail text;
BEGIN
    EXECUTE q;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
    RETURN v_detail;
END
$fn$;
CREATE TEMP TABLE before_bad AS
    SELECT (SELECT count(*) FROM rheo.events WHERE stream = 's') AS events,
           (SELECT sum(high_watermark) FROM rheo.partitions WHERE stream = 's') AS high;
SELECT is(pg_temp.detail_of($$SELECT * FROM rheo.append_batch('s', '[{}, {}, 1, {}]', "partition" => 1)$$),
    'payload 2 of the batch is not a JSON object', 'one partition: the non-object payload found in the INSERT');
SELECT is(pg_temp.detail_of($$SELECT * FROM rheo.append_batch('s', '[{"key": "a"}, [1], {"key": "b"}]')$$),
    'payload 1 of the batch is not a JSON object', 'routed: the non-object payload found in the routing pass');
SELECT is(pg_temp.detail_of($$SELECT * FROM rheo.append_batch('s', '[{}, {}, "x"]', ids => ARRAY['n-1', NULL, 'n-3'])$$),
    'payload 2 of the batch is not a JSON object', 'given ids: the non-object payload found in the pass over the inputs');
SELECT is(pg_temp.detail_of(format($$SELECT * FROM rheo.append_batch('s', %L, "partition" => 0)$$,
                                   jsonb_build_array('{}'::jsonb, jsonb_build_object('key', repeat('k', 1025))))),
    'payload key 1 of the batch must be at most 1024 bytes, got 1025 bytes', 'one partition: a long payload key found in the INSERT');
SELECT is(pg_temp.detail_of(format($$SELECT * FROM rheo.append_batch('s', %L, ids => ARRAY[NULL, 'n-2'])$$,
                                   jsonb_build_array(jsonb_build_object('key', repeat('k', 1025)), '{}'::jsonb))),
    'payload key 0 of the batch must be at most 1024 bytes, got 1025 bytes', 'given ids: a long payload key found in the pass over the inputs');
SELECT is(pg_temp.detail_of(format($$SELECT * FROM rheo.append_batch('s', %L, "partition" => 0)$$,
                                   jsonb_build_array(jsonb_build_object('key', repeat('k', 1025)), '{}'::jsonb, 'null'::jsonb))),
    'payload 2 of the batch is not a JSON object', 'a non-object payload is reported before an earlier long payload key');
SELECT is(pg_temp.detail_of(format($$SELECT * FROM rheo.append_batch('s', '[{}, 7]', keys => ARRAY[%L, 'k'])$$, repeat('k', 1025))),
    'payload 1 of the batch is not a JSON object', 'a non-object payload is reported before a long key');
SELECT results_eq(
    $$SELECT (SELECT count(*) FROM rheo.events WHERE stream = 's'), (SELECT sum(high_watermark) FROM rheo.partitions WHERE stream = 's')$$,
    $$SELECT events, high FROM before_bad$$,
    'the failed batches stored and allocated nothing');

SELECT * FROM finish();
ROLLBACK;
