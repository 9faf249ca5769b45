BEGIN;
SELECT plan(24);

-- The signature reference §3.1 pins.
SELECT has_function('rheo', 'create_stream', ARRAY['text', 'integer', 'timestamp with time zone']::name[], 'rheo.create_stream has the reference''s argument types');
SELECT function_returns('rheo', 'create_stream', ARRAY['text', 'integer', 'timestamp with time zone']::name[], 'void', 'rheo.create_stream returns void');

-- The DETAIL of the error a statement raises, or NULL when it succeeds.
CREATE FUNCTION pg_temp.error_detail(statement text) RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
    v_detail text;
BEGIN
    EXECUTE statement;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
    RETURN v_detail;
END
$fn$;

SELECT lives_ok($$SELECT rheo.create_stream('orders', clock => '2030-01-01 00:00:00Z')$$,
    'create_stream with the default partition count');
SELECT results_eq(
    $$SELECT stream, partition_count, created_at FROM rheo.list_streams() WHERE stream = 'orders'$$,
    $$VALUES ('orders'::text, 1, '2030-01-01 00:00:00Z'::timestamptz)$$,
    'one partition by default, created_at is the clock');

SELECT lives_ok($$SELECT rheo.create_stream('clicks', 4, clock => '2030-01-02 00:00:00Z')$$,
    'create_stream with 4 partitions');
SELECT is((SELECT partition_count FROM rheo.list_streams() WHERE stream = 'clicks'), 4,
    'partition_count is stored');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 'clicks'), 0::bigint,
    'a new stream is empty');

SELECT rheo.create_stream('now-clock');
SELECT is((SELECT created_at FROM rheo.list_streams() WHERE stream = 'now-clock'), now(),
    'without a clock, created_at is now()');

SELECT throws_ok($$SELECT rheo.create_stream('orders')$$,
    'RH003', 'already_exists', 'a duplicate stream is already_exists');
SELECT throws_ok($$SELECT rheo.create_stream('orders', 3)$$,
    'RH003', 'already_exists', 'a duplicate with another partition count is already_exists');
SELECT isnt(pg_temp.error_detail($$SELECT rheo.create_stream('orders')$$), NULL,
    'already_exists says what was wrong in its DETAIL');

SELECT throws_ok($$SELECT rheo.create_stream('zero', 0)$$,
    'RH006', 'invalid_partition_count', 'partition_count 0');
SELECT throws_ok($$SELECT rheo.create_stream('negative', -3)$$,
    'RH006', 'invalid_partition_count', 'negative partition_count');
SELECT throws_ok($$SELECT rheo.create_stream('null-count', NULL)$$,
    'RH011', 'invalid_argument', 'an explicit NULL partition_count');

SELECT throws_ok($$SELECT rheo.create_stream(NULL)$$,
    'RH011', 'invalid_argument', 'a NULL name');
SELECT throws_ok($$SELECT rheo.create_stream('')$$,
    'RH011', 'invalid_argument', 'an empty name');
SELECT throws_ok($$SELECT rheo.create_stream('-starts-with-dash')$$,
    'RH011', 'invalid_argument', 'a name must start with a letter or digit');
SELECT throws_ok($$SELECT rheo.create_stream('has space')$$,
    'RH011', 'invalid_argument', 'a name with a space');
SELECT throws_ok($$SELECT rheo.create_stream('café')$$,
    'RH011', 'invalid_argument', 'a name with a non-ASCII letter');
SELECT throws_ok(format('SELECT rheo.create_stream(%L)', repeat('a', 129)),
    'RH011', 'invalid_argument', 'a name of 129 characters');
SELECT lives_ok(format('SELECT rheo.create_stream(%L)', repeat('a', 128)),
    'a name of 128 characters');
SELECT lives_ok($$SELECT rheo.create_stream('A0.b_c:d/e-f')$$,
    'a name with every allowed punctuation');

SELECT lives_ok($$SELECT rheo.create_stream(stream => 'by-name', partition_count => 2, clock => '2030-01-01Z')$$,
    'create_stream called with every argument by name');
SELECT results_eq(
    $$SELECT stream FROM rheo.list_streams()$$,
    format($$VALUES ('A0.b_c:d/e-f'::text), (%L), ('by-name'), ('clicks'), ('now-clock'), ('orders')$$, repeat('a', 128)),
    'only the valid streams were created');

SELECT * FROM finish();
ROLLBACK;
