BEGIN;
SELECT plan(15);

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

SELECT rheo.create_stream('s', 2, clock => '2030-01-01Z');
SELECT rheo.append_batch('s', '[{"n": 1}, {"n": 2}, {"n": 3}]', clock => '2030-01-01Z');
SELECT rheo.append('s', '{"n": 4}', "partition" => 1, clock => '2030-01-01Z');
CREATE TEMP TABLE snapshot AS SELECT * FROM rheo.events;

SELECT throws_ok(
    $$INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
      VALUES ('s', 0, 4, 'forged', NULL, '{}', '{}', '2030-01-01Z')$$,
    'RH012', 'immutable_event', 'INSERT outside rheo.append');
SELECT throws_ok(
    $$INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
      SELECT stream, "partition", sequence + 100, id || '-copy', key, payload, metadata, ts FROM rheo.events$$,
    'RH012', 'immutable_event', 'INSERT … SELECT outside rheo.append');
SELECT throws_ok($$UPDATE rheo.events SET payload = '{"n": 0}' WHERE sequence = 1$$,
    'RH012', 'immutable_event', 'UPDATE of an event');
SELECT throws_ok($$UPDATE rheo.events SET ts = ts$$,
    'RH012', 'immutable_event', 'UPDATE that would change nothing');
SELECT throws_ok($$DELETE FROM rheo.events WHERE sequence = 3$$,
    'RH012', 'immutable_event', 'DELETE of an event');
SELECT throws_ok($$DELETE FROM rheo.events$$,
    'RH012', 'immutable_event', 'DELETE of every event');
SELECT throws_ok($$TRUNCATE rheo.events$$,
    'RH012', 'immutable_event', 'TRUNCATE');
SELECT isnt(pg_temp.error_detail($$DELETE FROM rheo.events$$), NULL,
    'immutable_event says what was refused in its DETAIL');
SELECT results_eq(
    $$SELECT * FROM rheo.events ORDER BY stream, "partition", sequence$$,
    $$SELECT * FROM snapshot ORDER BY stream, "partition", sequence$$,
    'the events are unchanged');

SELECT lives_ok($$SELECT rheo.append('s', '{"n": 5}', clock => '2030-01-01Z')$$,
    'append still works after refused writes');
SELECT throws_ok(
    $$INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
      VALUES ('s', 0, 99, 'forged-after', NULL, '{}', '{}', '2030-01-01Z')$$,
    'RH012', 'immutable_event', 'INSERT outside rheo.append is still refused after an append in the same transaction');
SELECT is((SELECT count(*) FROM rheo.events WHERE stream = 's'), 5::bigint,
    'only the appended events are stored');

-- Consumption neither deletes nor changes events.
DELETE FROM snapshot;
INSERT INTO snapshot SELECT * FROM rheo.events;
SELECT rheo.create_group('s', 'g', max_attempts => 1);
CREATE TEMP TABLE leases AS SELECT * FROM rheo.fetch('s', 'g', max_count => 10, clock => '2030-01-01Z');
SELECT is((SELECT count(*) FROM leases), 5::bigint, 'every event was leased');
SELECT rheo.ack(lease_id, clock => '2030-01-01Z') FROM leases WHERE "partition" = 0 AND sequence = 1;
SELECT rheo.reject(lease_id, clock => '2030-01-01Z') FROM leases WHERE "partition" = 0 AND sequence = 2;
SELECT rheo.retry(lease_id, clock => '2030-01-01Z') FROM leases WHERE "partition" = 0 AND sequence = 3;
SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM leases WHERE "partition" = 1), clock => '2030-01-01Z');
SELECT rheo.replay('s', 'g', from_sequence => 0, clock => '2030-01-01Z');
SELECT rheo.reset_group('s', 'g', confirm => true, clock => '2030-01-01Z');
SELECT is((SELECT count(*) FROM rheo.fetch('s', 'g', max_count => 10, clock => '2030-01-01Z')), 5::bigint,
    'after settling, replaying and resetting, every event is offered again');
SELECT results_eq(
    $$SELECT * FROM rheo.events ORDER BY stream, "partition", sequence$$,
    $$SELECT * FROM snapshot ORDER BY stream, "partition", sequence$$,
    'consumption left the events as they were');

SELECT * FROM finish();
ROLLBACK;
