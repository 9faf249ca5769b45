BEGIN;
SELECT plan(6);

-- The signature reference §3.4 pins.
SELECT has_function('rheo', 'list_streams', ARRAY[]::name[], 'rheo.list_streams has the reference''s argument types');
SELECT function_returns('rheo', 'list_streams', ARRAY[]::name[], 'setof record', 'rheo.list_streams returns setof record');

SELECT is_empty($$SELECT * FROM rheo.list_streams()$$, 'no streams in a new installation');

SELECT rheo.create_stream('beta', 3, clock => '2030-01-02Z');
SELECT rheo.create_stream('alpha', clock => '2030-01-03Z');
SELECT rheo.create_stream('gamma', 2, clock => '2030-01-01Z');

SELECT results_eq(
    $$SELECT stream, partition_count, created_at FROM rheo.list_streams()$$,
    $$VALUES ('alpha'::text, 1, '2030-01-03Z'::timestamptz), ('beta', 3, '2030-01-02Z'), ('gamma', 2, '2030-01-01Z')$$,
    'every stream with its partition count and creation time, ordered by name');

SELECT rheo.append('beta', '{}');
SELECT rheo.create_group('beta', 'g');
SELECT is((SELECT count(*) FROM rheo.list_streams()), 3::bigint, 'events and groups add no rows');
SELECT throws_ok($$SELECT rheo.create_stream('alpha')$$, 'RH003', 'already_exists', 'a listed stream exists');

SELECT * FROM finish();
ROLLBACK;
