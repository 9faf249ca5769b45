BEGIN;
SELECT plan(6);

-- The plan of a statement, as text.
CREATE FUNCTION pg_temp.plan_of(statement text) RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
    v_line text;
    v_plan text := '';
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || statement LOOP
        v_plan := v_plan || v_line || E'\n';
    END LOOP;
    RETURN v_plan;
END
$fn$;

SELECT results_eq(
    $$SELECT v.key, v.n, rheo._route(v.key, v.n)
        FROM (VALUES ('user-1', 4), ('user-1', 7), ('order-42', 3), ('order-42', 16),
                     ('ünïcode', 8), ('emoji-🎉', 16), ('The quick brown fox', 8)) v(key, n)$$,
    $$VALUES ('user-1', 4, 3), ('user-1', 7, 6), ('order-42', 3, 2), ('order-42', 16, 12),
             ('ünïcode', 8, 5), ('emoji-🎉', 16, 11), ('The quick brown fox', 8, 7)$$,
    '_route puts known keys where Go''s PartitionForKey puts them');
SELECT is(
    (SELECT count(*) FROM generate_series(1, 500) i
      WHERE rheo._route('key-' || i, 7)
            <> (('x' || substr(md5('key-' || i), 1, 8))::bit(32)::bigint % 7)::int),
    0::bigint, '_route is the md5 rule of reference §4.1 for 500 keys');
SELECT ok(
    (SELECT bool_and(rheo._route('key-' || i, 16) BETWEEN 0 AND 15) FROM generate_series(1, 500) i),
    '_route reads the md5 prefix unsigned: never a negative partition');
SELECT is(rheo._route(NULL, 16), 0, '_route of no key is partition 0');
SELECT is(rheo._route('any', 1), 0, '_route of a one-partition stream is partition 0');
SELECT ok(pg_temp.plan_of($$SELECT rheo._route(v.k, 4) FROM (VALUES ('a'), ('b')) v(k)$$) !~ '_route',
    '_route is inlined: the plan holds its expression, not a call');

SELECT * FROM finish();
ROLLBACK;
