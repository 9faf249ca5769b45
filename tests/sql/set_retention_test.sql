BEGIN;
SELECT plan(8);

SELECT rheo.create_stream('s', clock => '2030-01-01Z');
SELECT throws_ok($$SELECT rheo.set_retention('missing', '1 day')$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT rheo.set_retention('s', '0 seconds')$$, 'RH011', 'invalid_argument', 'a zero max_age');
SELECT throws_ok($$SELECT rheo.set_retention('s', '-1 day')$$, 'RH011', 'invalid_argument', 'a negative max_age');
SELECT throws_ok($$SELECT rheo.set_retention('s', '1 day -25 hours')$$, 'RH011', 'invalid_argument',
    'a max_age that adds up to a negative one');
SELECT throws_ok($$SELECT rheo.set_retention('s', '10001 years')$$, 'RH011', 'invalid_argument', 'a max_age beyond 10000 years');
SELECT is((SELECT DISTINCT max_age FROM rheo.stream_info('s')), NULL, 'a refused retention changes nothing');
SELECT rheo.set_retention('s', '30 days');
SELECT is((SELECT DISTINCT max_age FROM rheo.stream_info('s')), '30 days'::interval, 'set');
SELECT rheo.set_retention('s', NULL);
SELECT is((SELECT DISTINCT max_age FROM rheo.stream_info('s')), NULL, 'NULL removes it: kept forever');

SELECT * FROM finish();
ROLLBACK;
