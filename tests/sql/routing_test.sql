BEGIN;
SELECT plan(8);

-- Partition counts under test, one stream each.
CREATE TEMP TABLE counts AS SELECT unnest(ARRAY[1, 2, 3, 4, 7, 8, 16]) AS n;
SELECT rheo.create_stream('r' || n, n) FROM counts;

-- Keys: plain ASCII, multi-byte UTF-8, and enough others to reach every
-- partition; the md5 of several of them has its top bit set, which a
-- signed 32-bit reading would turn negative.
CREATE TEMP TABLE keys AS
    SELECT k AS key FROM unnest(ARRAY['user-1', 'order-42', 'a', 'z', 'ünïcode', 'emoji-🎉', 'The quick brown fox']) k
    UNION ALL
    SELECT 'key-' || i FROM generate_series(1, 200) i;

-- The expected partition, by the expression reference §4.1 gives.
CREATE TEMP TABLE expected AS
    SELECT c.n, k.key, (('x' || substr(md5(k.key), 1, 8))::bit(32)::bigint % c.n)::int AS "partition"
      FROM counts c CROSS JOIN keys k;

SELECT ok((SELECT count(*) FROM keys WHERE ('x' || substr(md5(key), 1, 8))::bit(32)::bigint >= 2147483648) > 0,
    'some keys have the top bit of their md5 prefix set');
SELECT is((SELECT count(DISTINCT "partition") FROM expected WHERE n = 16), 16::bigint,
    'the keys reach every partition of the widest stream');

SELECT set_eq(
    $$SELECT c.n, k.key, e."partition"
        FROM counts c CROSS JOIN keys k
       CROSS JOIN LATERAL rheo.append('r' || c.n, '{}', key => k.key) e$$,
    $$SELECT n, key, "partition" FROM expected$$,
    'append routes the key argument by the md5 rule');
SELECT set_eq(
    $$SELECT c.n, k.key, e."partition"
        FROM counts c CROSS JOIN keys k
       CROSS JOIN LATERAL rheo.append('r' || c.n, jsonb_build_object('key', k.key)) e$$,
    $$SELECT n, key, "partition" FROM expected$$,
    'append routes payload.key by the md5 rule');
SELECT set_eq(
    $$SELECT c.n, e.key, e."partition"
        FROM counts c
       CROSS JOIN LATERAL rheo.append_batch('r' || c.n,
                                            (SELECT jsonb_agg('{}'::jsonb) FROM keys),
                                            keys => (SELECT array_agg(key) FROM keys)) e$$,
    $$SELECT n, key, "partition" FROM expected$$,
    'append_batch routes each key by the md5 rule');

-- Known values, computed independently with Go's rheo.PartitionForKey.
SELECT results_eq(
    $$SELECT v.key, v.n, e."partition"
        FROM (VALUES ('user-1', 4), ('user-1', 7), ('order-42', 3), ('order-42', 16),
                     ('ünïcode', 8), ('emoji-🎉', 16), ('The quick brown fox', 8)) v(key, n)
       CROSS JOIN LATERAL rheo.append('r' || v.n, '{}', key => v.key) e$$,
    $$VALUES ('user-1', 4, 3), ('user-1', 7, 6), ('order-42', 3, 2), ('order-42', 16, 12),
             ('ünïcode', 8, 5), ('emoji-🎉', 16, 11), ('The quick brown fox', 8, 7)$$,
    'known keys land where Go''s PartitionForKey puts them');

SELECT results_eq(
    $$SELECT "partition", key FROM rheo.append('r16', '{}', key => '')$$,
    $$VALUES (0, NULL::text)$$,
    'an empty key is no key: partition 0');
SELECT results_eq(
    $$SELECT "partition" FROM rheo.append('r16', '{"type": "no-key"}')$$,
    $$VALUES (0)$$,
    'no key at all: partition 0');

SELECT * FROM finish();
ROLLBACK;
