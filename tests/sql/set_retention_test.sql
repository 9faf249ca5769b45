BEGIN;
SELECT plan(11);

SELECT rheo.create_stream('s', clock => '2030-01-01Z');
SELECT throws_ok($$SELECT rheo.set_retention('missing', '1 day')$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT rheo.set_retention('s', '0 seconds')$$, 'RH011', 'invalid_argument', 'a zero max_age');
SELECT throws_ok($$SELECT rheo.set_retention('s', '-1 day')$$, 'RH011', 'invalid_argument', 'a negative max_age');
SELECT throws_ok($$SELECT rheo.set_retention('s', '1 day -25 hours')$$, 'RH011', 'invalid_argument',
    'a max_age that adds up to a negative one');
SELECT throws_ok($$SELECT rheo.set_retention('s', '-2 months +61 days')$$, 'RH011', 'invalid_argument',
    'months and days of opposite signs whose cutoff lies in the future, although the interval compares as positive');
SELECT throws_ok($$SELECT rheo.set_retention('s', '20000 years -7000000 days')$$, 'RH011', 'invalid_argument',
    'a max_age whose cutoff is no timestamp');
SELECT throws_ok($$SELECT rheo.set_retention('s', '10001 years')$$, 'RH011', 'invalid_argument', 'a max_age beyond 10000 years');
SELECT is((SELECT DISTINCT max_age FROM rheo.stream_info('s')), NULL, 'a refused retention changes nothing');
SELECT lives_ok($$SELECT rheo.set_retention('s', '1 month -1 day')$$, 'a month less a day, positive at every clock');
SELECT rheo.set_retention('s', '30 days');
SELECT is((SELECT DISTINCT max_age FROM rheo.stream_info('s')), '30 days'::interval, 'set');
SELECT rheo.set_retention('s', NULL);
SELECT is((SELECT DISTINCT max_age FROM rheo.stream_info('s')), NULL, 'NULL removes it: kept forever');

SELECT * FROM finish();
ROLLBACK;
