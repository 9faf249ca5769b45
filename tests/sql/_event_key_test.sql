BEGIN;
SELECT plan(6);

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

SELECT is(rheo._event_key('given', '{"key": "payload"}'), 'given', 'the key given wins over payload.key');
SELECT is(rheo._event_key(NULL, '{"key": "payload"}'), 'payload', 'without a key given, payload.key');
SELECT is(rheo._event_key('', '{"key": "payload"}'), 'payload', 'an empty key given counts as none');
SELECT is(rheo._event_key(NULL, '{"key": ""}'), NULL, 'an empty payload.key counts as none');
SELECT is(rheo._event_key(NULL, '{"type": "t"}'), NULL, 'no key anywhere: none');
SELECT ok(pg_temp.plan_of($$SELECT rheo._event_key(v.k, v.p) FROM (VALUES ('a', '{}'::jsonb), ('b', '{}')) v(k, p)$$) !~ '_event_key',
    '_event_key is inlined: the plan holds its expression, not a call');

SELECT * FROM finish();
ROLLBACK;
