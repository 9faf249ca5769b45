BEGIN;
SELECT plan(2);

SELECT results_eq(
    $$SELECT rheo._fresh(v.next, v.high, v.max_count)
        FROM (VALUES (1::bigint, 10::bigint, 5), (8, 10, 5), (11, 10, 5), (40, 10, 5), (1, 0, 5),
                     (1, 9223372036854775806, 2147483647), (3, 3, 0)) AS v(next, high, max_count)$$,
    $$VALUES (5), (3), (0), (0), (0), (2147483647), (0)$$,
    '_fresh counts the events past the cursor up to the high watermark, capped at max_count, never below 0');

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
SELECT ok(pg_temp.plan_of($$SELECT rheo._fresh(v.n, v.h, 5) FROM (VALUES (1::bigint, 2::bigint), (3, 4)) v(n, h)$$) !~ '_fresh',
    '_fresh is inlined: the plan holds its expression, not a call');

SELECT * FROM finish();
ROLLBACK;
