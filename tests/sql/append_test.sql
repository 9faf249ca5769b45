BEGIN;
SELECT plan(47);

-- The signature reference §4.1 pins.
SELECT has_function('rheo', 'append', ARRAY['text', 'jsonb', 'text', 'integer', 'text', 'jsonb', 'timestamp with time zone', 'timestamp with time zone']::name[], 'rheo.append has the reference''s argument types');
SELECT function_returns('rheo', 'append', ARRAY['text', 'jsonb', 'text', 'integer', 'text', 'jsonb', 'timestamp with time zone', 'timestamp with time zone']::name[], 'rheo.events', 'rheo.append returns rheo.events');

-- The partition reference §4.1 routes a key to, written out independently of Rheo.
CREATE FUNCTION pg_temp.route(key text, partition_count int) RETURNS int LANGUAGE sql AS $fn$
    SELECT (('x' || substr(md5(key), 1, 8))::bit(32)::bigint % partition_count)::int
$fn$;

SELECT rheo.create_stream('s', 4, clock => '2030-01-01 00:00:00Z');
SELECT rheo.create_stream('t');

-- The returned row.
CREATE TEMP TABLE first_event AS
    SELECT * FROM rheo.append('s', '{"type": "created", "n": 1}', clock => '2030-01-01 00:00:01Z');
SELECT results_eq(
    $$SELECT stream, "partition", sequence, key, type, payload, metadata, ts FROM first_event$$,
    $$VALUES ('s'::text, 0, 1::bigint, NULL::text, 'created'::text, '{"type": "created", "n": 1}'::jsonb, '{}'::jsonb, '2030-01-01 00:00:01Z'::timestamptz)$$,
    'append returns the stored event: partition 0 without a key, sequence 1, ts from the clock');
SELECT matches((SELECT id FROM first_event), '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$',
    'the generated id is a version 7 uuid');
SELECT results_eq(
    $$SELECT * FROM rheo.events WHERE stream = 's'$$,
    $$SELECT * FROM first_event$$,
    'the returned row is the row stored in rheo.events');

CREATE TEMP TABLE second_event AS
    SELECT * FROM rheo.append('s', '{"n": 2}', clock => '2030-01-01 00:00:02Z');
SELECT results_eq(
    $$SELECT "partition", sequence, type FROM second_event$$,
    $$VALUES (0, 2::bigint, NULL::text)$$,
    'the next event of the partition gets the next sequence; no type without payload.type');
SELECT isnt((SELECT id FROM second_event), (SELECT id FROM first_event),
    'generated ids differ');
SELECT is((SELECT type FROM rheo.append('s', '{"type": 7}')), '7',
    'type is payload->>''type''');

-- Routing.
SELECT results_eq(
    $$SELECT "partition", key FROM rheo.append('s', '{}', key => 'user-1')$$,
    $$SELECT pg_temp.route('user-1', 4), 'user-1'::text$$,
    'the key argument routes by md5 and is stored');
SELECT results_eq(
    $$SELECT "partition", key FROM rheo.append('s', '{"key": "user-1"}')$$,
    $$SELECT pg_temp.route('user-1', 4), 'user-1'::text$$,
    'payload.key routes the same way when there is no key argument, and is stored');
SELECT results_eq(
    $$SELECT "partition", key FROM rheo.append('s', '{"key": "a"}', key => 'b')$$,
    $$SELECT pg_temp.route('b', 4), 'b'::text$$,
    'the key argument wins over payload.key');
SELECT isnt(pg_temp.route('a', 4), pg_temp.route('b', 4),
    'the two keys of the previous test route apart, so it tells them apart');
SELECT results_eq(
    $$SELECT "partition", key FROM rheo.append('s', '{}', key => 'b', "partition" => 1)$$,
    $$VALUES (1, 'b'::text)$$,
    'an explicit partition wins over the key, which is still stored');
SELECT isnt(pg_temp.route('b', 4), 1,
    'the key of the previous test does not route to 1 by itself');
SELECT results_eq(
    $$SELECT "partition", key FROM rheo.append('s', '{}', key => '')$$,
    $$VALUES (0, NULL::text)$$,
    'an empty key counts as no key');
SELECT results_eq(
    $$SELECT "partition", count(*), min(sequence), max(sequence) FROM rheo.events WHERE stream = 's' GROUP BY 1 ORDER BY 1$$,
    $$SELECT "partition", count(*), 1::bigint, count(*) FROM rheo.events WHERE stream = 's' GROUP BY 1 ORDER BY 1$$,
    'sequences are contiguous from 1 in every partition');
SELECT is((SELECT count(DISTINCT "partition") FROM rheo.events WHERE stream = 's'), 4::bigint,
    'the appends above reached every partition');

-- ts, metadata and the clock.
SELECT results_eq(
    $$SELECT ts, metadata FROM rheo.append('s', '{}', metadata => '{"correlation_id": "c-1", "causation_id": "c-0", "producer": "billing", "schema": "invoice", "schema_version": 2}',
                                           ts => '2029-06-01 12:00:00Z', clock => '2030-01-01 00:00:00Z')$$,
    $$VALUES ('2029-06-01 12:00:00Z'::timestamptz, '{"correlation_id": "c-1", "causation_id": "c-0", "producer": "billing", "schema": "invoice", "schema_version": 2}'::jsonb)$$,
    'an explicit ts and the metadata are stored');
SELECT is((SELECT ts FROM rheo.append('s', '{}')), now(),
    'without ts or clock, ts is now()');
SELECT results_eq(
    $$SELECT stream, "partition", key, id, payload, ts
        FROM rheo.append(stream => 's', payload => '{"type": "named"}', key => 'k', "partition" => 1,
                         id => 'named-1', metadata => '{}', ts => '2030-02-01Z', clock => '2030-01-01Z')$$,
    $$VALUES ('s'::text, 1, 'k'::text, 'named-1'::text, '{"type": "named"}'::jsonb, '2030-02-01Z'::timestamptz)$$,
    'append called with every argument by name');

-- Errors, stream first.
SELECT throws_ok($$SELECT rheo.append('missing', '{}')$$,
    'RH001', 'stream_not_found', 'append to a missing stream');
SELECT throws_ok($$SELECT rheo.append('missing', '[1]', "partition" => 9)$$,
    'RH001', 'stream_not_found', 'the stream is checked before the arguments');
SELECT throws_ok($$SELECT rheo.append('s', '{}', "partition" => 4)$$,
    'RH007', 'invalid_partition', 'a partition past the last one');
SELECT throws_ok($$SELECT rheo.append('s', '{}', "partition" => -1)$$,
    'RH007', 'invalid_partition', 'a negative partition');
SELECT throws_ok($$SELECT rheo.append('s', '[1]')$$,
    'RH011', 'invalid_argument', 'an array payload');
SELECT throws_ok($$SELECT rheo.append('s', '"text"')$$,
    'RH011', 'invalid_argument', 'a string payload');
SELECT throws_ok($$SELECT rheo.append('s', 'null')$$,
    'RH011', 'invalid_argument', 'a JSON null payload');
SELECT throws_ok($$SELECT rheo.append('s', NULL)$$,
    'RH011', 'invalid_argument', 'a NULL payload');
SELECT throws_ok($$SELECT rheo.append('s', '{}', metadata => '[]')$$,
    'RH011', 'invalid_argument', 'array metadata');
SELECT throws_ok($$SELECT rheo.append('s', '{}', metadata => NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL metadata');
SELECT throws_ok($$SELECT rheo.append('s', '{}', id => '')$$,
    'RH011', 'invalid_argument', 'an empty id');

-- Idempotent ids.
CREATE TEMP TABLE counted AS SELECT count(*) AS n FROM rheo.events WHERE stream = 's';
CREATE TEMP TABLE e1 AS
    SELECT * FROM rheo.append('s', '{"n": 10}', key => 'k1', id => 'e-1', metadata => '{"producer": "p"}',
                              ts => '2030-01-01 00:00:00Z', clock => '2030-01-01 00:00:00Z');
SELECT results_eq(
    $$SELECT * FROM rheo.append('s', '{"n": 10}', key => 'k1', id => 'e-1', metadata => '{"producer": "p"}',
                                "partition" => (pg_temp.route('k1', 4) + 1) % 4,
                                ts => '2031-01-01 00:00:00Z', clock => '2031-01-01 00:00:00Z')$$,
    $$SELECT * FROM e1$$,
    'a repeated id with the same content returns the stored event; ts, partition and clock are ignored');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), (SELECT n + 1 FROM counted),
    'the repeat wrote nothing');
SELECT is((SELECT sequence FROM rheo.append('s', '{"n": 11}', key => 'k1')), (SELECT sequence + 1 FROM e1),
    'the repeat allocated no sequence');
SELECT throws_ok($$SELECT rheo.append('s', '{"n": 99}', key => 'k1', id => 'e-1', metadata => '{"producer": "p"}')$$,
    'RH003', 'already_exists', 'a repeated id with another payload');
SELECT throws_ok($$SELECT rheo.append('s', '{"n": 10}', key => 'other', id => 'e-1', metadata => '{"producer": "p"}')$$,
    'RH003', 'already_exists', 'a repeated id with another key');
SELECT throws_ok($$SELECT rheo.append('s', '{"n": 10}', id => 'e-1', metadata => '{"producer": "p"}')$$,
    'RH003', 'already_exists', 'a repeated id without the key');
SELECT throws_ok($$SELECT rheo.append('s', '{"n": 10}', key => 'k1', id => 'e-1', metadata => '{"producer": "q"}')$$,
    'RH003', 'already_exists', 'a repeated id with other metadata');
SELECT throws_ok($$SELECT rheo.append('s', '{"n": 10}', key => 'k1', id => 'e-1')$$,
    'RH003', 'already_exists', 'a repeated id with the default metadata');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), (SELECT n + 2 FROM counted),
    'conflicting repeats wrote nothing');
SELECT is((SELECT sequence FROM rheo.append('s', '{"n": 12}', key => 'k1')), (SELECT sequence + 2 FROM e1),
    'conflicting repeats allocated no sequence');

CREATE TEMP TABLE e2 AS SELECT * FROM rheo.append('s', '{"key": "k2", "n": 1}', id => 'e-2');
SELECT results_eq(
    $$SELECT * FROM rheo.append('s', '{"key": "k2", "n": 1}', key => 'k2', id => 'e-2')$$,
    $$SELECT * FROM e2$$,
    'a repeat is compared by effective key: payload.key equals the same key argument');
SELECT throws_ok($$SELECT rheo.append('s', '{"key": "k2", "n": 1}', key => 'k3', id => 'e-2')$$,
    'RH003', 'already_exists', 'a key argument that changes the effective key conflicts');

SELECT results_eq(
    $$SELECT stream, sequence, id FROM rheo.append('t', '{"n": 10}', key => 'k1', id => 'e-1')$$,
    $$VALUES ('t'::text, 1::bigint, 'e-1'::text)$$,
    'ids are unique per stream: the same id on another stream is a new event');
SELECT results_eq(
    $$SELECT stream, sequence, payload FROM rheo.events WHERE id = 'e-1' ORDER BY stream$$,
    $$VALUES ('s'::text, (SELECT sequence FROM e1), '{"n": 10}'::jsonb), ('t', 1::bigint, '{"n": 10}'::jsonb)$$,
    'each stream holds its own event e-1');

SELECT results_eq(
    $$SELECT "partition", sequence FROM rheo.read('s', "partition" => pg_temp.route('k1', 4), after => (SELECT sequence - 1 FROM e1))$$,
    $$SELECT pg_temp.route('k1', 4), s::bigint FROM generate_series((SELECT sequence FROM e1), (SELECT sequence + 2 FROM e1)) s$$,
    'the partition of e-1 has no gap after the repeats');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's' AND id = 'e-1'), 1::bigint,
    'e-1 is stored once on s');

SELECT * FROM finish();
ROLLBACK;
