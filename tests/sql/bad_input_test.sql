BEGIN;
SELECT plan(208);
-- A check that is missing must fail, not hang: before the partition_count
-- limit, create_stream('pmax', 2147483647) inserted two billion rows.
SET LOCAL statement_timeout = '20s';

-- Bad input never reaches a raw PostgreSQL error (reference §1.5): each
-- case is the reference's word, with a DETAIL naming the argument, and changes nothing.

-- The DETAIL of the error a statement raises; NULL when it succeeds.
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

-- Everything a call could change, as text.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $fn$
    SELECT concat_ws(E'\n',
        (SELECT string_agg(format('%s %s %s', s.stream, s.partition_count, s.created_at), ',' ORDER BY s.stream) FROM rheo.streams s),
        (SELECT string_agg(format('%s %s %s', p.stream, p."partition", p.high_watermark), ',' ORDER BY p.stream, p."partition") FROM rheo.partitions p),
        (SELECT string_agg(format('%s', e), ',' ORDER BY e.stream, e."partition", e.sequence) FROM rheo.events e),
        (SELECT string_agg(format('%s %s %s', g.stream, g.group_name, g.max_attempts), ',' ORDER BY g.stream, g.group_name) FROM rheo.groups g),
        (SELECT string_agg(format('%s', c), ',' ORDER BY c.group_id, c."partition") FROM rheo.cursors c),
        (SELECT string_agg(format('%s', d), ',' ORDER BY d.group_id, d."partition", d.sequence) FROM rheo.deliveries d),
        (SELECT string_agg(format('%s', dl), ',' ORDER BY dl.group_id, dl."partition", dl.sequence) FROM rheo.dead_letters dl))
$fn$;

SELECT rheo.create_stream('s', 2, clock => '2030-01-01Z');
SELECT rheo.create_group('s', 'g', clock => '2030-01-01Z');
SELECT rheo.append('s', '{"n": 1}', "partition" => 0, id => 'e1', clock => '2030-01-01Z');
SELECT rheo.append('s', '{"n": 2}', "partition" => 1, id => 'e2', clock => '2030-01-01Z');
CREATE TEMP TABLE held AS
    SELECT * FROM rheo.fetch('s', 'g', 1, partitions => '{0}', clock => '2030-01-01Z');
CREATE TEMP TABLE before AS SELECT pg_temp.state() AS state;

-- partition_count above 4096.
SELECT throws_ok($$SELECT rheo.create_stream('p4097', 4097)$$,
    'RH006', 'invalid_partition_count', 'partition_count 4097');
SELECT throws_ok($$SELECT rheo.create_stream('pmax', 2147483647)$$,
    'RH006', 'invalid_partition_count', 'partition_count 2^31-1 fails at once instead of inserting two billion rows');
SELECT is(pg_temp.detail_of($$SELECT rheo.create_stream('p4097', 4097)$$),
    'partition_count must be between 1 and 4096, got 4097', 'the DETAIL names partition_count');

-- start_after and from_sequence of the largest bigint.
SELECT throws_ok($$SELECT rheo.create_group('s', 'g-max', start_after => 9223372036854775807)$$,
    'RH011', 'invalid_argument', 'create_group start_after 2^63-1');
SELECT is(pg_temp.detail_of($$SELECT rheo.create_group('s', 'g-max', start_after => 9223372036854775807)$$),
    'start_after must be between 0 and 9223372036854775806, got 9223372036854775807', 'the DETAIL names start_after');
SELECT throws_ok($$SELECT rheo.reset_group('s', 'g', true, start_after => 9223372036854775807)$$,
    'RH011', 'invalid_argument', 'reset_group start_after 2^63-1');
SELECT throws_ok($$SELECT rheo.replay('s', 'g', from_sequence => 9223372036854775807)$$,
    'RH011', 'invalid_argument', 'replay from_sequence 2^63-1');
SELECT is(pg_temp.detail_of($$SELECT rheo.replay('s', 'g', from_sequence => 9223372036854775807)$$),
    'from_sequence must be between 0 and 9223372036854775806, got 9223372036854775807', 'the DETAIL names from_sequence');

-- Arrays that are not plain lists: two-dimensional, or not starting at 1.
SELECT throws_ok($$SELECT rheo.create_group('s', 'g-2d', partitions => '{{0},{1}}')$$,
    'RH011', 'invalid_argument', 'create_group with two-dimensional partitions');
SELECT throws_ok($$SELECT * FROM rheo.fetch('s', 'g', partitions => '{{0},{1}}')$$,
    'RH011', 'invalid_argument', 'fetch with two-dimensional partitions');
SELECT throws_ok($$SELECT * FROM rheo.fetch('s', 'g', partitions => '[0:1]={0,1}')$$,
    'RH011', 'invalid_argument', 'fetch with partitions starting at index 0');
SELECT throws_ok($$SELECT * FROM rheo.lag('s', 'g', partitions => '{{0},{1}}')$$,
    'RH011', 'invalid_argument', 'lag with two-dimensional partitions');
SELECT throws_ok($$SELECT * FROM rheo.lag('s', 'g', partitions => '[2:2]={1}')$$,
    'RH011', 'invalid_argument', 'lag with partitions starting at index 2');
SELECT throws_ok($$SELECT rheo.replay('s', 'g', from_sequence => 0, partitions => '{{0}}')$$,
    'RH011', 'invalid_argument', 'replay with two-dimensional partitions');
SELECT throws_ok($$SELECT rheo.reset_group('s', 'g', true, partitions => '[0:0]={0}')$$,
    'RH011', 'invalid_argument', 'reset_group with partitions starting at index 0');
SELECT is(pg_temp.detail_of($$SELECT * FROM rheo.fetch('s', 'g', partitions => '{{0},{1}}')$$),
    'partitions must be a one-dimensional array starting at index 1', 'the DETAIL names partitions');
SELECT throws_ok($$SELECT * FROM rheo.append_batch('s', '[{"a": 1}, {"a": 2}]', ids => '{{z1},{z2}}')$$,
    'RH011', 'invalid_argument', 'append_batch with two-dimensional ids');
SELECT throws_ok($$SELECT * FROM rheo.append_batch('s', '[{"a": 1}, {"a": 2}]', ids => '[0:1]={z1,z2}')$$,
    'RH011', 'invalid_argument', 'append_batch with ids starting at index 0 (it used to store z2 under z1''s place)');
SELECT is(pg_temp.detail_of($$SELECT * FROM rheo.append_batch('s', '[{"a": 1}, {"a": 2}]', ids => '[0:1]={z1,z2}')$$),
    'ids must be a one-dimensional array starting at index 1', 'the DETAIL names ids');
SELECT throws_ok($$SELECT * FROM rheo.append_batch('s', '[{"a": 1}, {"a": 2}]', keys => '{{k2},{k3}}')$$,
    'RH011', 'invalid_argument', 'append_batch with two-dimensional keys (it used to drop them)');
SELECT throws_ok($$SELECT * FROM rheo.append_batch('s', '[{"a": 1}]', keys => '[5:5]={k1}')$$,
    'RH011', 'invalid_argument', 'append_batch with keys starting at index 5');
SELECT is(pg_temp.detail_of($$SELECT * FROM rheo.append_batch('s', '[{"a": 1}, {"a": 2}]', keys => '{{k2},{k3}}')$$),
    'keys must be a one-dimensional array starting at index 1', 'the DETAIL names keys');
SELECT throws_ok($$SELECT rheo.replay('s', 'g', event_ids => '{{e1},{e2}}')$$,
    'RH011', 'invalid_argument', 'replay with two-dimensional event_ids');
SELECT throws_ok($$SELECT rheo.replay('s', 'g', event_ids => '[0:0]={e1}')$$,
    'RH011', 'invalid_argument', 'replay with event_ids starting at index 0');
SELECT is(pg_temp.detail_of($$SELECT rheo.replay('s', 'g', event_ids => '{{e1},{e2}}')$$),
    'event_ids must be a one-dimensional array starting at index 1', 'the DETAIL names event_ids');
SELECT throws_ok(format('SELECT * FROM rheo.ack_batch(%L::uuid[])', '{{' || (SELECT lease_id FROM held) || '}}'),
    'RH011', 'invalid_argument', 'ack_batch with two-dimensional lease_ids');
SELECT throws_ok(format('SELECT * FROM rheo.ack_batch(%L::uuid[])', '[0:0]={' || (SELECT lease_id FROM held) || '}'),
    'RH011', 'invalid_argument', 'ack_batch with lease_ids starting at index 0');
SELECT is(pg_temp.detail_of(format('SELECT * FROM rheo.ack_batch(%L::uuid[])', '{{' || (SELECT lease_id FROM held) || '}}')),
    'lease_ids must be a one-dimensional array starting at index 1', 'the DETAIL names lease_ids');

-- A clock that is infinite or outside the years 0001 to 9999, in every
-- function that takes one.
CREATE TEMP TABLE bad_clock (clock timestamptz, what text);
INSERT INTO bad_clock VALUES ('infinity', 'infinity'), ('-infinity', '-infinity'),
    ('10000-01-01 00:00:00Z', '10000-01-01'), ('0001-01-01 00:00:00Z'::timestamptz - interval '1 microsecond', 'just before 0001-01-01'),
    ('294276-12-31 23:59:59Z', 'near the timestamptz maximum');
CREATE TEMP TABLE clocked (name text, q text);
INSERT INTO clocked VALUES
    ('create_stream', $$SELECT rheo.create_stream('c-new', clock => %L)$$),
    ('create_group', $$SELECT rheo.create_group('s', 'c-new', clock => %L)$$),
    ('append', $$SELECT rheo.append('s', '{}', clock => %L)$$),
    ('append_batch', $$SELECT * FROM rheo.append_batch('s', '[{}]', clock => %L)$$),
    ('fetch', $$SELECT * FROM rheo.fetch('s', 'g', clock => %L)$$),
    ('renew', format($$SELECT rheo.renew(%L, clock => %%L)$$, (SELECT lease_id FROM held))),
    ('ack', format($$SELECT rheo.ack(%L, clock => %%L)$$, (SELECT lease_id FROM held))),
    ('ack_batch', format($$SELECT * FROM rheo.ack_batch(ARRAY[%L]::uuid[], clock => %%L)$$, (SELECT lease_id FROM held))),
    ('retry', format($$SELECT rheo.retry(%L, clock => %%L)$$, (SELECT lease_id FROM held))),
    ('reject', format($$SELECT rheo.reject(%L, clock => %%L)$$, (SELECT lease_id FROM held))),
    ('replay', $$SELECT rheo.replay('s', 'g', from_sequence => 0, clock => %L)$$),
    ('reset_group', $$SELECT rheo.reset_group('s', 'g', true, clock => %L)$$),
    ('group_info', $$SELECT * FROM rheo.group_info('s', 'g', clock => %L)$$);
SELECT throws_ok(format(c.q, b.clock), 'RH011', 'invalid_argument', format('%s with a clock %s', c.name, b.what))
  FROM clocked c CROSS JOIN bad_clock b
 ORDER BY c.name, b.what;
SELECT is(pg_temp.detail_of(format(c.q, 'infinity')),
          'clock must be finite, from 0001-01-01T00:00:00Z up to but not including 10000-01-01T00:00:00Z, got infinity',
          format('the DETAIL of %s names the clock', c.name))
  FROM clocked c
 ORDER BY c.name;

-- The same for append's ts.
SELECT throws_ok(format($$SELECT rheo.append('s', '{}', ts => %L)$$, b.clock), 'RH011', 'invalid_argument',
                 format('append with a ts %s', b.what))
  FROM bad_clock b
 ORDER BY b.what;
SELECT is(pg_temp.detail_of($$SELECT rheo.append('s', '{}', ts => '-infinity')$$),
    'ts must be finite, from 0001-01-01T00:00:00Z up to but not including 10000-01-01T00:00:00Z, got -infinity',
    'the DETAIL names ts');

-- Values longer than 1024 bytes: ids, keys, consumer ids, lineage.
SELECT throws_ok(format($$SELECT rheo.append('s', '{}', id => %L)$$, repeat('i', 1025)),
    'RH011', 'invalid_argument', 'an id of 1025 bytes');
SELECT throws_ok(format($$SELECT rheo.append('s', '{}', id => %L)$$, (SELECT string_agg(md5(x::text), '') FROM generate_series(1, 320) x)),
    'RH011', 'invalid_argument', 'an id of 10240 bytes that does not compress (it used to fail 54000, index row too big)');
SELECT throws_ok(format($$SELECT rheo.append('s', '{}', id => %L)$$, repeat('é', 513)),
    'RH011', 'invalid_argument', 'an id of 513 characters but 1026 bytes: the limit is in bytes');
SELECT is(pg_temp.detail_of(format($$SELECT rheo.append('s', '{}', id => %L)$$, repeat('i', 1025))),
    'event id must be at most 1024 bytes, got 1025 bytes', 'the DETAIL names the id');
SELECT throws_ok(format($$SELECT * FROM rheo.append_batch('s', '[{}, {}]', ids => ARRAY['b1', %L])$$, repeat('i', 1025)),
    'RH011', 'invalid_argument', 'a batch id of 1025 bytes');
SELECT is(pg_temp.detail_of(format($$SELECT * FROM rheo.append_batch('s', '[{}, {}]', ids => ARRAY['b1', %L])$$, repeat('i', 1025))),
    'event id 1 of the batch must be at most 1024 bytes, got 1025 bytes', 'the DETAIL names the id and its place');
SELECT throws_ok(format($$SELECT rheo.append('s', '{}', key => %L)$$, repeat('k', 1025)),
    'RH011', 'invalid_argument', 'a key of 1025 bytes');
SELECT is(pg_temp.detail_of(format($$SELECT rheo.append('s', '{}', key => %L)$$, repeat('k', 1025))),
    'key must be at most 1024 bytes, got 1025 bytes', 'the DETAIL names the key');
SELECT throws_ok(format($$SELECT * FROM rheo.append_batch('s', '[{}, {}]', keys => ARRAY[%L, 'k'])$$, repeat('k', 1025)),
    'RH011', 'invalid_argument', 'a batch key of 1025 bytes');
SELECT throws_ok(format($$SELECT rheo.append('s', %L)$$, jsonb_build_object('key', repeat('k', 1025))),
    'RH011', 'invalid_argument', 'a payload key of 1025 bytes, the effective key');
SELECT is(pg_temp.detail_of(format($$SELECT rheo.append('s', %L)$$, jsonb_build_object('key', repeat('k', 1025)))),
    'payload key must be at most 1024 bytes, got 1025 bytes', 'the DETAIL names the payload key');
SELECT throws_ok(format($$SELECT * FROM rheo.append_batch('s', %L, keys => ARRAY['k', NULL])$$,
                        jsonb_build_array(jsonb_build_object('key', repeat('k', 1025)), jsonb_build_object('key', repeat('k', 1025)))),
    'RH011', 'invalid_argument', 'a payload key of 1025 bytes in a batch, where keys gives none for it');
SELECT is(pg_temp.detail_of(format($$SELECT * FROM rheo.append_batch('s', %L, keys => ARRAY['k', NULL])$$,
                                   jsonb_build_array(jsonb_build_object('key', repeat('k', 1025)), jsonb_build_object('key', repeat('k', 1025))))),
    'payload key 1 of the batch must be at most 1024 bytes, got 1025 bytes', 'the DETAIL names the payload key and its place');
SELECT throws_ok(format($$SELECT rheo.append('s', %L)$$, jsonb_build_object('key', jsonb_build_object('a', repeat('k', 1020)))),
    'RH011', 'invalid_argument', 'a payload key that is an object whose text is longer than 1024 bytes');
SELECT throws_ok(format($$SELECT * FROM rheo.fetch('s', 'g', consumer_id => %L)$$, repeat('c', 1025)),
    'RH011', 'invalid_argument', 'a consumer_id of 1025 bytes');
SELECT is(pg_temp.detail_of(format($$SELECT * FROM rheo.fetch('s', 'g', consumer_id => %L)$$, repeat('c', 1025))),
    'consumer_id must be at most 1024 bytes, got 1025 bytes', 'the DETAIL names consumer_id');
SELECT throws_ok(format($$SELECT rheo.append('s', '{}', metadata => %L)$$, jsonb_build_object(k, repeat('m', 1025))),
    'RH011', 'invalid_argument', format('metadata %s of 1025 bytes', k))
  FROM unnest(ARRAY['correlation_id', 'causation_id', 'producer', 'schema', 'schema_version']) AS k
 ORDER BY k;
SELECT throws_ok(format($$SELECT * FROM rheo.append_batch('s', '[]', metadata => %L)$$, jsonb_build_object('correlation_id', repeat('m', 1025))),
    'RH011', 'invalid_argument', 'lineage metadata of 1025 bytes, even for an empty batch');
SELECT is(pg_temp.detail_of(format($$SELECT rheo.append('s', '{}', metadata => %L)$$, jsonb_build_object('causation_id', repeat('m', 1025)))),
    'metadata causation_id must be at most 1024 bytes, got 1025 bytes', 'the DETAIL names the metadata key');
SELECT throws_ok(format($$SELECT rheo.append('s', '{}', metadata => %L)$$, jsonb_build_object('correlation_id', (SELECT string_agg(md5(x::text), '') FROM generate_series(1, 320) x))),
    'RH011', 'invalid_argument', 'a correlation_id of 10240 bytes that does not compress (it used to fail 54000)');

-- An unknown time zone in a query bound.
SELECT throws_ok($$SELECT * FROM rheo.query('s', '{"from": "2030-01-01 00:00:00 Nowhere/Land"}')$$,
    'RH011', 'invalid_argument', 'a from bound with an unknown time zone (it used to fail 22023)');
SELECT is(pg_temp.detail_of($$SELECT * FROM rheo.query('s', '{"to": "2030-01-01 00:00:00 Nowhere/Land"}')$$),
    'filter to is not a timestamp: 2030-01-01 00:00:00 Nowhere/Land', 'the DETAIL names the bound');

SELECT is(pg_temp.state(), (SELECT state FROM before), 'none of the rejected calls changed anything');
SELECT is((SELECT count(*) FROM rheo.events WHERE id IN ('z1', 'z2', 'b1')), 0::bigint,
    'no event of a rejected batch is stored');

-- What stays valid.
SELECT is((SELECT count(*) FROM rheo.fetch('s', 'g', partitions => '{}', clock => '2030-01-01Z')), 0::bigint,
    'fetch with partitions ''{}'' claims nothing, as before');
SELECT is((SELECT count(*) FROM rheo.lag('s', 'g', partitions => '{}')), 0::bigint, 'lag with partitions ''{}''');
SELECT is((SELECT count(*) FROM rheo.append_batch('s', '[]', keys => '{}', ids => '{}')), 0::bigint,
    'an empty batch with empty keys and ids');
SELECT is((SELECT count(*) FROM rheo.ack_batch('{}')), 0::bigint, 'ack_batch of ''{}''');
SELECT is(rheo.replay('s', 'g', event_ids => '{}'), 0::bigint, 'replay of event_ids ''{}''');
SELECT lives_ok($$SELECT rheo.create_group('s', 'g-none', partitions => '{}', start_after => 1)$$,
    'create_group with partitions ''{}''');
SELECT lives_ok($$SELECT rheo.reset_group('s', 'g-none', true, partitions => '{}')$$,
    'reset_group with partitions ''{}''');
SELECT lives_ok($$SELECT rheo.create_stream('p4096', 4096)$$, 'partition_count 4096');
SELECT is((SELECT count(*) FROM rheo.partitions WHERE stream = 'p4096'), 4096::bigint, 'with 4096 partitions');

-- 1024 bytes is the limit, not 1023.
SELECT is((SELECT octet_length(id) FROM rheo.append('s', '{}', id => repeat('é', 512))), 1024,
    'an id of 1024 bytes is stored');
SELECT is((SELECT octet_length(key) FROM rheo.append('s', '{}', key => repeat('k', 1024))), 1024,
    'a key of 1024 bytes is stored');
SELECT is((SELECT octet_length(key) FROM rheo.append('s', jsonb_build_object('key', repeat('k', 1024)))), 1024,
    'a payload key of 1024 bytes is stored');
SELECT is((SELECT key FROM rheo.append('s', jsonb_build_object('key', repeat('k', 1025)), key => 'short')), 'short',
    'a longer key field in the payload is not checked when the key argument is the effective key');
SELECT is((SELECT key FROM rheo.append_batch('s', jsonb_build_array(jsonb_build_object('key', repeat('k', 1025))), keys => '{short}')), 'short',
    'nor when keys gives the effective key of a batch input');
SELECT is((SELECT octet_length(metadata ->> 'correlation_id')
             FROM rheo.append('s', '{}', metadata => jsonb_build_object('correlation_id', repeat('m', 1024)))), 1024,
    'a correlation_id of 1024 bytes is stored');
SELECT is((SELECT octet_length(metadata ->> 'note')
             FROM rheo.append('s', '{}', metadata => jsonb_build_object('note', repeat('m', 2000)))), 2000,
    'metadata keys other than the lineage keys have no limit');
SELECT is((SELECT octet_length(consumer_id)
             FROM rheo.fetch('s', 'g', 1, consumer_id => repeat('c', 1024), partitions => '{1}', clock => '2030-01-01Z')), 1024,
    'a consumer_id of 1024 bytes is used');

-- The bounds of the clock and ts range are valid.
SELECT is((SELECT ts FROM rheo.append('s', '{}', clock => '0001-01-01 00:00:00Z')), '0001-01-01 00:00:00Z'::timestamptz,
    'a clock of 0001-01-01T00:00:00Z is valid');
SELECT is((SELECT ts FROM rheo.append('s', '{}', clock => '9999-12-31 23:59:59.999999Z')), '9999-12-31 23:59:59.999999Z'::timestamptz,
    'a clock of 9999-12-31T23:59:59.999999Z is valid');
SELECT is((SELECT ts FROM rheo.append('s', '{}', ts => '0001-01-01 00:00:00Z')), '0001-01-01 00:00:00Z'::timestamptz,
    'a ts of 0001-01-01T00:00:00Z is valid');
SELECT is((SELECT ts FROM rheo.append('s', '{}', ts => '9999-12-31 23:59:59.999999Z')), '9999-12-31 23:59:59.999999Z'::timestamptz,
    'a ts of 9999-12-31T23:59:59.999999Z is valid');
SELECT rheo.create_stream('late');
SELECT rheo.create_group('late', 'g');
SELECT rheo.append('late', '{}');
CREATE TEMP TABLE late AS
    SELECT * FROM rheo.fetch('late', 'g', 1, lease_ms => 2147483647, clock => '9999-12-31 23:59:59.999999Z');
SELECT is((SELECT expires_at FROM late), '9999-12-31 23:59:59.999999Z'::timestamptz + interval '2147483.647 seconds',
    'a lease of 2^31-1 ms from the last valid clock expires past year 9999 without overflow');
SELECT is(rheo.renew((SELECT lease_id FROM late), 2147483647, clock => '9999-12-31 23:59:59.999999Z'),
    '9999-12-31 23:59:59.999999Z'::timestamptz + interval '2147483.647 seconds', 'renew likewise');
SELECT is(rheo.retry((SELECT lease_id FROM late), delay_ms => 2147483647, clock => '9999-12-31 23:59:59.999999Z'),
    'retrying', 'retry with the longest delay from the last valid clock');

-- start_at, from_ts and the query bounds are only compared: infinity is
-- valid there and means what it says.
SELECT rheo.create_stream('inf');
SELECT rheo.append('inf', '{}', ts => '2030-01-01Z');
SELECT rheo.append('inf', '{}', ts => '2030-01-02Z');
SELECT lives_ok($$SELECT rheo.create_group('inf', 'late', start_at => 'infinity')$$, 'create_group start_at infinity');
SELECT is((SELECT frontier FROM rheo.lag('inf', 'late')), 2::bigint, 'starts after every event');
SELECT lives_ok($$SELECT rheo.create_group('inf', 'early', start_at => '-infinity')$$, 'create_group start_at -infinity');
SELECT is((SELECT frontier FROM rheo.lag('inf', 'early')), 0::bigint, 'starts at the beginning');
SELECT lives_ok($$SELECT rheo.reset_group('inf', 'early', true, start_at => 'infinity')$$, 'reset_group start_at infinity');
SELECT is((SELECT frontier FROM rheo.lag('inf', 'early')), 2::bigint, 'the reset starts after every event');
SELECT is(rheo.replay('inf', 'early', from_ts => 'infinity'), 0::bigint, 'replay from_ts infinity reopens nothing');
SELECT is(rheo.replay('inf', 'early', from_ts => '-infinity'), 2::bigint, 'replay from_ts -infinity reopens everything');
SELECT is((SELECT count(*) FROM rheo.query('inf', '{"from": "-infinity", "to": "infinity"}')), 2::bigint,
    'a query from -infinity to infinity matches everything');
SELECT is((SELECT count(*) FROM rheo.query('inf', '{"from": "infinity"}')), 0::bigint, 'a query from infinity matches nothing');
SELECT is((SELECT count(*) FROM rheo.query('inf', '{"to": "-infinity"}', descending => true)), 0::bigint,
    'a query to -infinity matches nothing');

-- Sequences at the top of the bigint range.
SELECT rheo.create_stream('top', 2);
SELECT rheo.append('top', '{}', "partition" => 0);
SELECT lives_ok($$SELECT rheo.create_group('top', 'g', start_after => 9223372036854775806)$$,
    'create_group start_after 2^63-2');
SELECT results_eq($$SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('top', 'g')$$,
    $$VALUES (0, 9223372036854775806::bigint, 1::bigint, 0::bigint), (1, 9223372036854775806::bigint, 0::bigint, 0::bigint)$$,
    'the frontier is at 2^63-2 and the lag 0');
SELECT is((SELECT count(*) FROM rheo.fetch('top', 'g', 100, clock => '2030-01-01Z')), 0::bigint, 'fetch finds nothing, without overflow');
SELECT is((SELECT count(*) FROM rheo.fetch('top', 'g', 0, clock => '2030-01-01Z')), 0::bigint, 'fetch of max_count 0 too');
SELECT results_eq($$SELECT lag, inflight, pending_retry, dead_letters FROM rheo.group_info('top', 'g')$$,
    $$VALUES (0::bigint, 0::bigint, 0::bigint, 0::bigint)$$, 'group_info reports nothing to do');
SELECT is(rheo.replay('top', 'g', from_sequence => 9223372036854775806), 0::bigint,
    'replay from_sequence 2^63-2 reopens nothing');
SELECT is(rheo.replay('top', 'g', from_sequence => 0, partitions => '{0}'), 1::bigint,
    'replay from_sequence 0 reopens the skipped event');
SELECT is((SELECT sequence FROM rheo.fetch('top', 'g', 100, clock => '2030-01-01Z')), 1::bigint, 'which fetch then claims');
SELECT lives_ok($$SELECT rheo.reset_group('top', 'g', true, start_after => 9223372036854775806)$$,
    'reset_group start_after 2^63-2');
SELECT is((SELECT sum(lag) FROM rheo.lag('top', 'g')), 0::numeric, 'the reset skips everything');
SELECT is((SELECT count(*) FROM rheo.read('top', after => 9223372036854775807)), 0::bigint, 'read after 2^63-1');

-- Query bounds at the largest bigint, both directions, short and full
-- pages, and the next page from their cursors.
CREATE TEMP TABLE bounds (filter jsonb, descending boolean, max_count int, want bigint);
INSERT INTO bounds VALUES
    ('{"after_sequence": 9223372036854775807}', true, 100, 0),
    ('{"after_sequence": 9223372036854775807}', true, 1, 0),
    ('{"after_sequence": 9223372036854775807}', false, 100, 0),
    ('{"after_sequence": 9223372036854775807}', false, 1, 0),
    ('{"after_sequence": 9223372036854775806}', true, 1, 0),
    ('{"until_sequence": 9223372036854775807}', true, 100, 1),
    ('{"until_sequence": 9223372036854775807}', true, 1, 1),
    ('{"until_sequence": 9223372036854775807}', false, 100, 1),
    ('{"until_sequence": 9223372036854775807}', false, 1, 1),
    ('{"after_sequence": 9223372036854775807, "until_sequence": 9223372036854775807}', true, 1, 0),
    ('{"after_sequence": 0, "until_sequence": 9223372036854775807}', true, 1, 1);
SELECT is((SELECT count(*) FROM rheo.query('top', b.filter, b.max_count, descending => b.descending)), b.want,
          format('query %s %s max_count %s', b.filter, CASE WHEN b.descending THEN 'descending' ELSE 'ascending' END, b.max_count))
  FROM bounds b
 ORDER BY b.filter::text, b.descending, b.max_count;
SELECT is((SELECT count(*)
             FROM rheo.query_page('top', b.filter, b.max_count, descending => b.descending) AS p,
                  rheo.query('top', b.filter, b.max_count, after => p.next_cursor, descending => b.descending) AS e), 0::bigint,
          format('the next page of query %s %s max_count %s is empty', b.filter,
                 CASE WHEN b.descending THEN 'descending' ELSE 'ascending' END, b.max_count))
  FROM bounds b
 ORDER BY b.filter::text, b.descending, b.max_count;

SELECT * FROM finish();
ROLLBACK;
