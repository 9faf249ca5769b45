BEGIN;
SELECT plan(9);

-- The signature reference §3.5 pins.
SELECT has_function('rheo', 'list_groups', ARRAY['text']::name[], 'rheo.list_groups has the reference''s argument types');
SELECT function_returns('rheo', 'list_groups', ARRAY['text']::name[], 'setof record', 'rheo.list_groups returns setof record');

SELECT rheo.create_stream('s');
SELECT rheo.create_stream('t');
SELECT is_empty($$SELECT * FROM rheo.list_groups('s')$$, 'a stream without groups lists none');

SELECT rheo.create_group('s', 'billing', max_attempts => 3, clock => '2030-01-02Z');
SELECT rheo.create_group('s', 'audit', clock => '2030-01-03Z');
SELECT rheo.create_group('s', 'mailer', max_attempts => 1, clock => '2030-01-01Z', ordering => 'key');
SELECT rheo.create_group('t', 'other', clock => '2030-01-01Z');

SELECT results_eq(
    $$SELECT group_name, max_attempts, created_at FROM rheo.list_groups('s')$$,
    $$VALUES ('audit'::text, 20, '2030-01-03Z'::timestamptz), ('billing', 3, '2030-01-02Z'), ('mailer', 1, '2030-01-01Z')$$,
    'the stream''s groups with max_attempts and creation time, ordered by name');
SELECT results_eq($$SELECT group_name, ordering FROM rheo.list_groups('s')$$,
    $$VALUES ('audit'::text, 'none'::text), ('billing', 'none'), ('mailer', 'key')$$,
    'the ordering is the last column');
SELECT results_eq($$SELECT group_name FROM rheo.list_groups('t')$$, $$VALUES ('other'::text)$$,
    'only the groups of the stream asked for');
SELECT throws_ok($$SELECT * FROM rheo.list_groups('missing')$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT * FROM rheo.list_groups('not a name')$$, 'RH001', 'stream_not_found',
    'an invalid name in a lookup is not found, not invalid');

SELECT results_eq($$SELECT group_name FROM rheo.list_groups(stream => 't')$$, $$VALUES ('other'::text)$$,
    'list_groups called with its argument by name');

SELECT * FROM finish();
ROLLBACK;
