BEGIN;
SELECT plan(11);

-- rheo._fetch_citus and the settles' Citus statements, run here on a
-- single server by turning rheo._distributed() true in this transaction:
-- the same scenario, under each ordering, gives what the single server's
-- statements give (leases, attempts, dead letters, deliveries, cursors),
-- lease ids apart, which begin with the stream's hash.

-- Runs the scenario on a stream of its own and returns what it saw, one
-- line per lease, settle and row left.
CREATE FUNCTION pg_temp.scenario(p_stream text, p_ordering text) RETURNS SETOF text
LANGUAGE plpgsql AS $fn$
DECLARE
    v_t0     timestamptz := '2030-01-01Z';
    v_ids    uuid[];
    v_first  uuid;
BEGIN
    PERFORM rheo.create_stream(p_stream, 2, clock => v_t0);
    PERFORM rheo.create_group(p_stream, 'g', max_attempts => 2, ordering => p_ordering, clock => v_t0);
    PERFORM rheo.append(p_stream, jsonb_build_object('n', n), key => (ARRAY['a', 'b', 'a', 'c', NULL, 'a', 'b', 'c'])[n],
                        clock => v_t0)
       FROM generate_series(1, 8) n;
    FOR round IN 1 .. 5 LOOP
        SELECT array_agg(f.lease_id ORDER BY f."partition", f.sequence) INTO v_ids
          FROM rheo.fetch(p_stream, 'g', 3, lease_ms => 1000, clock => v_t0 + make_interval(secs => round)) f;
        RETURN QUERY
        SELECT format('round %s: lease %s/%s attempt %s key %s', round, d."partition", d.sequence, d.attempt, d.key)
          FROM rheo.deliveries d
         WHERE d.stream = p_stream AND d.lease_id = ANY (v_ids)
         ORDER BY d."partition", d.sequence;
        CONTINUE WHEN v_ids IS NULL;
        v_first := v_ids[1];
        -- First retried, second rejected, third renewed then left to expire,
        -- in odd rounds; all acked by a batch (with a repeat) in even ones.
        IF round % 2 = 1 THEN
            RETURN NEXT 'retry ' || rheo.retry(v_ids[1], 'r', clock => v_t0 + make_interval(secs => round));
            IF cardinality(v_ids) >= 2 THEN
                PERFORM rheo.reject(v_ids[2], clock => v_t0 + make_interval(secs => round));
            END IF;
            IF cardinality(v_ids) >= 3 THEN
                RETURN NEXT 'renew ' || rheo.renew(v_ids[3], 500, clock => v_t0 + make_interval(secs => round));
            END IF;
        ELSE
            RETURN QUERY SELECT 'ack ' || b.ok FROM rheo.ack_batch(v_ids || v_ids[1] || NULL::uuid, clock => v_t0) b;
        END IF;
    END LOOP;
    BEGIN
        PERFORM rheo.ack(v_first);
        RETURN NEXT 'ack held';
    EXCEPTION WHEN SQLSTATE 'RH004' THEN
        RETURN NEXT 'ack stale';
    END;
    RETURN QUERY
    SELECT format('delivery %s/%s %s attempt %s waiters %s', d."partition", d.sequence, d.state, d.attempt, d.has_waiters)
      FROM rheo.deliveries d WHERE d.stream = p_stream ORDER BY d."partition", d.sequence;
    RETURN QUERY
    SELECT format('dead %s/%s attempt %s %s', x."partition", x.sequence, x.attempt, x.reason)
      FROM rheo.dead_letters x WHERE x.stream = p_stream ORDER BY x."partition", x.sequence;
    RETURN QUERY
    SELECT format('cursor %s at %s', c."partition", c.next_sequence)
      FROM rheo.cursors c WHERE c.stream = p_stream ORDER BY c."partition";
    RETURN QUERY
    SELECT format('wakeup %s %s', w."partition", w.key)
      FROM rheo.key_wakeups w WHERE w.stream = p_stream ORDER BY w."partition", w.key;
END
$fn$;

CREATE TEMP TABLE single AS
    SELECT o.ordering, s.line, s.n
      FROM unnest(ARRAY['none', 'partition', 'key']) AS o(ordering)
     CROSS JOIN LATERAL pg_temp.scenario('single-' || o.ordering, o.ordering) WITH ORDINALITY AS s(line, n);

CREATE OR REPLACE FUNCTION rheo._distributed() RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT true $$;

CREATE TEMP TABLE citus AS
    SELECT o.ordering, s.line, s.n
      FROM unnest(ARRAY['none', 'partition', 'key']) AS o(ordering)
     CROSS JOIN LATERAL pg_temp.scenario('citus-' || o.ordering, o.ordering) WITH ORDINALITY AS s(line, n);

SELECT ok((SELECT count(*) FROM single WHERE line LIKE 'round%') > 10, 'the scenario leases events');
SELECT ok((SELECT count(*) FROM single WHERE line LIKE 'dead%') > 0 AND (SELECT count(*) FROM single WHERE line = 'ack true') > 0,
    'the scenario dead-letters and acks');
SELECT results_eq($$SELECT line FROM citus WHERE ordering = 'none' ORDER BY n$$,
                  $$SELECT line FROM single WHERE ordering = 'none' ORDER BY n$$,
    'Citus statements: what the single server''s give, under none');
SELECT results_eq($$SELECT line FROM citus WHERE ordering = 'partition' ORDER BY n$$,
                  $$SELECT line FROM single WHERE ordering = 'partition' ORDER BY n$$,
    'Citus statements: what the single server''s give, under partition');
SELECT results_eq($$SELECT line FROM citus WHERE ordering = 'key' ORDER BY n$$,
                  $$SELECT line FROM single WHERE ordering = 'key' ORDER BY n$$,
    'Citus statements: what the single server''s give, under key');
SELECT rheo.append('citus-none', '{}', clock => '2030-01-01Z');
SELECT results_eq(
    $$SELECT substr(f.lease_id::text, 1, 8) FROM rheo.fetch('citus-none', 'g', clock => '2030-01-02Z') f LIMIT 1$$,
    $$VALUES (lpad(to_hex(hashtext('citus-none')), 8, '0'))$$,
    'Citus lease ids begin with the hash of their stream');
SELECT throws_ok($$SELECT rheo.ack('00000000-0000-4000-8000-000000000000')$$, 'RH004', 'stale_lease',
    'Citus statements: a lease id no fetch made is stale');

-- 'key': a wakeup gathered in one partition's window is kept when a
-- later partition's window gathers none. Key k1 lives in partition 0,
-- k2 in partition 1: the second fetch blocks the second k1 event behind
-- the first, still leased, and wakes the key; the ack of the first then
-- lets a fetch lease the second.
CREATE FUNCTION pg_temp.key_unblocks(p_stream text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_t0    timestamptz := '2030-01-01Z';
    v_k1    text := (SELECT 'k' || n FROM generate_series(1, 100) n WHERE rheo._route('k' || n, 2) = 0 LIMIT 1);
    v_k2    text := (SELECT 'k' || n FROM generate_series(1, 100) n WHERE rheo._route('k' || n, 2) = 1 LIMIT 1);
    v_first uuid;
BEGIN
    PERFORM rheo.create_stream(p_stream, 2, clock => v_t0);
    PERFORM rheo.create_group(p_stream, 'g', ordering => 'key', clock => v_t0);
    PERFORM rheo.append(p_stream, '{"n": 1}', key => v_k1, clock => v_t0);
    SELECT f.lease_id INTO v_first FROM rheo.fetch(p_stream, 'g', 1, clock => v_t0) f;
    PERFORM rheo.append(p_stream, '{"n": 2}', key => v_k1, clock => v_t0);
    PERFORM rheo.append(p_stream, '{"n": 3}', key => v_k2, clock => v_t0);
    PERFORM FROM rheo.fetch(p_stream, 'g', 10, clock => v_t0);
    PERFORM rheo.ack(v_first);
    RETURN EXISTS (SELECT FROM rheo.fetch(p_stream, 'g', 10, clock => v_t0) f WHERE f.key = v_k1);
END
$fn$;
SELECT ok(pg_temp.key_unblocks('citus-wake'),
    'Citus statements: a key woken in one partition stays woken when a later partition wakes none');

-- What a fetch locks, as on the single server (fetch_test.sql): at most
-- max_count partitions with work, consecutive in rotation order, and a
-- partition with a lease expired at the attempt limit whatever its place.
CREATE EXTENSION IF NOT EXISTS pgrowlocks;
SELECT rheo.create_stream('citus-ov', 8, clock => '2030-01-01Z');
SELECT count(rheo.append('citus-ov', jsonb_build_object('n', n), "partition" => p, clock => '2030-01-01Z'))
  FROM generate_series(0, 7) p CROSS JOIN generate_series(1, 4) n;
SELECT rheo.create_group('citus-ov', 'g', max_attempts => 1, clock => '2030-01-01Z');
SELECT count(*) FROM rheo.fetch('citus-ov', 'g', max_count => 1, lease_ms => 1000, partitions => '{4}',
                                clock => '2030-01-01Z');
CREATE TEMP TABLE ov2 AS SELECT * FROM rheo.fetch('citus-ov', 'g', max_count => 2, partitions => '{0,1,2,3,5,6,7}',
                                                  clock => '2030-01-01Z');
SELECT ok((SELECT count(DISTINCT "partition") = 2
                  AND max(array_position('{0,1,2,3,5,6,7}'::int[], "partition"))
                      - min(array_position('{0,1,2,3,5,6,7}'::int[], "partition")) IN (1, 6)
             FROM ov2),
    'Citus statements: max_count 2 of seven partitions with work, one lease from each of two consecutive ones');
CREATE TEMP TABLE ov3 AS SELECT * FROM rheo.fetch('citus-ov', 'g', max_count => 1, clock => '2030-01-01 00:00:05Z');
SELECT results_eq(
    $$SELECT c."partition" FROM pgrowlocks('rheo.cursors') r JOIN rheo.cursors c ON c.ctid = r.locked_row
       WHERE c.stream = 'citus-ov' ORDER BY 1$$,
    $$SELECT DISTINCT p FROM (SELECT "partition" FROM ov2 UNION ALL SELECT "partition" FROM ov3 UNION ALL SELECT 4) x(p) ORDER BY 1$$,
    'Citus statements: the fetches lock the partitions they claim from, and the one with a lease expired at the attempt limit');
SELECT results_eq($$SELECT "partition", sequence, dead_lettered_at FROM rheo.dead_letters('citus-ov', 'g')$$,
    $$VALUES (4, 1::bigint, '2030-01-01 00:00:05Z'::timestamptz)$$,
    'Citus statements: a fetch of one dead-letters the lease expired in another partition');

SELECT * FROM finish();
ROLLBACK;
