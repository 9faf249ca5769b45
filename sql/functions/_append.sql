-- Shared body of rheo.append and rheo.append_batch.
--
-- Sequences are allocated by updating the partitions' rows, whose locks are
-- held until the transaction commits: appends to one partition serialize
-- there, and a sequence can never become visible before a lower one.
-- Ids already stored (or repeated in the batch) with the same content are
-- returned as stored and allocate nothing; with other content the whole
-- call fails already_exists.
CREATE OR REPLACE FUNCTION rheo._append(stream text, payloads jsonb, keys text[], ids text[],
                                        "partition" int, metadata jsonb, ts timestamptz,
                                        clock timestamptz)
RETURNS SETOF rheo.events
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- A hot path: JIT compilation, redone at every call, would cost more than
-- the statements (see rheo.fetch).
SET jit = off
AS $$
DECLARE
    p_stream    ALIAS FOR $1;
    p_payloads  ALIAS FOR $2;
    p_keys      ALIAS FOR $3;
    p_ids       ALIAS FOR $4;
    p_partition ALIAS FOR $5;
    p_metadata  ALIAS FOR $6;
    p_ts        ALIAS FOR $7;
    p_clock     ALIAS FOR $8;
    v_count     int;
    v_n         int;
    v_now       timestamptz;
    v_ts        timestamptz;
    v_bytes     int;
    v_field     text;
    v_conflict  text;
    v_random    text;
    v_hex_ms    text;
    v_id_prefix text;
    v_id_base   bigint;
    v_ids       text[];
    v_keys      text[];
    v_parts     int[];
    v_payloads  jsonb[];
    v_is_new    boolean[];
    v_new_parts int[];
    v_counts    int[];
    v_bases     bigint[];
    v_tries     int := 0;
    v_generated boolean;
BEGIN
    v_count := rheo._stream(p_stream);
    IF p_payloads IS NULL OR jsonb_typeof(p_payloads) <> 'array' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'payloads must be a JSON array of objects';
    END IF;
    PERFORM rheo._check_array('keys', p_keys);
    PERFORM rheo._check_array('ids', p_ids);
    v_n := jsonb_array_length(p_payloads);
    IF p_keys IS NOT NULL AND coalesce(cardinality(p_keys), 0) <> v_n THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('keys has %s entries for %s payloads', coalesce(cardinality(p_keys), 0), v_n);
    END IF;
    IF p_ids IS NOT NULL AND coalesce(cardinality(p_ids), 0) <> v_n THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('ids has %s entries for %s payloads', coalesce(cardinality(p_ids), 0), v_n);
    END IF;
    IF p_metadata IS NULL OR jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'metadata must be a JSON object';
    END IF;
    -- Lineage values are indexed (sql/schema/002_query_indexes.sql) and
    -- looked up: at most 1024 bytes, like ids and keys.
    SELECT k.field, octet_length(p_metadata ->> k.field) INTO v_field, v_bytes
      FROM unnest(ARRAY['correlation_id', 'causation_id', 'producer', 'schema', 'schema_version']) AS k(field)
     WHERE octet_length(p_metadata ->> k.field) > 1024
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('metadata %s must be at most 1024 bytes, got %s bytes', v_field, v_bytes);
    END IF;
    IF p_partition < 0 OR p_partition >= v_count THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = format('partition %s is outside 0..%s', p_partition, v_count - 1);
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us.
    IF p_ts IS NOT NULL THEN
        PERFORM rheo._check_time('ts', p_ts);
    END IF;
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;
    -- The ids and keys given are checked here; each payload (an object,
    -- its key at most 1024 bytes) is tested where the statement below
    -- reads it. Any failure calls rheo._check_batch, which reports the
    -- first one in the order of its checks.
    IF array_position(p_ids, '') IS NOT NULL
       OR EXISTS (SELECT FROM unnest(p_ids) AS u(id) WHERE octet_length(u.id) > 1024)
       OR EXISTS (SELECT FROM unnest(p_keys) AS u(key) WHERE octet_length(u.key) > 1024) THEN
        PERFORM rheo._check_batch(p_payloads, p_keys, p_ids);
    END IF;

    v_now := coalesce(p_clock, now());
    v_ts := coalesce(p_ts, v_now);

    -- Generated ids are UUIDv7 in text form: 48 bits of Unix milliseconds,
    -- the version digit 7, then random bits whose last 48 count up through
    -- the call from a random start (RFC 9562, section 6.2, method 1). One
    -- gen_random_uuid() per call gives the random digits; its 17th hex
    -- digit already carries the variant bits (10xx). The counter starts
    -- between 2^44 and 2^45, so start + ordinality always has exactly 12
    -- hex digits: the id of input i is v_id_prefix || to_hex(v_id_base + i),
    -- cheap enough for every event of a large batch, and the ids of a call
    -- sort (in the C collation) in input order.
    v_random := replace(gen_random_uuid()::text, '-', '');
    v_hex_ms := lpad(to_hex(floor(extract(epoch FROM v_now) * 1000)::bigint), 12, '0');
    v_id_prefix := substr(v_hex_ms, 1, 8) || '-' || substr(v_hex_ms, 9, 4) || '-7' || substr(v_random, 1, 3)
                   || '-' || substr(v_random, 17, 4) || '-';
    v_id_base := (1::bigint << 44) + ('x' || substr(v_random, 21, 11))::bit(44)::bigint;

    v_generated := p_ids IS NULL OR array_remove(p_ids, NULL) = '{}';
    IF v_generated THEN
        -- Every id is generated, so none can repeat a stored one: no probe
        -- of the id index, no subtransaction, and the events come back from
        -- the INSERT itself. The effective key and the partition of each
        -- input are computed inline, at expression speed, rather than
        -- gathered into arrays first.
        -- The routing rule is rheo._route, inlined like the expression it
        -- names.
        IF p_partition IS NOT NULL OR v_count = 1 THEN
            v_new_parts := ARRAY[coalesce(p_partition, 0)];
            v_counts := ARRAY[v_n];
        ELSE
            SELECT array_agg(c.part ORDER BY c.part), array_agg(c.n ORDER BY c.part)
              INTO v_new_parts, v_counts
              FROM (SELECT r.part, count(*)::int AS n
                      FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
                     CROSS JOIN LATERAL (SELECT rheo._event_key(p_keys[x.ord::int], x.v) AS key) AS k
                     CROSS JOIN LATERAL (SELECT rheo._route(k.key, v_count) AS part) AS r
                     WHERE (jsonb_typeof(x.v) = 'object' AND coalesce(octet_length(k.key), 0) <= 1024)
                        OR rheo._check_batch(p_payloads, p_keys, p_ids)
                     GROUP BY r.part) AS c;
        END IF;
        v_bases := rheo._allocate(p_stream, v_new_parts, v_counts, v_ts);

        IF cardinality(v_new_parts) = 1 THEN
            -- One partition: the sequences follow the input order, and the
            -- INSERT returns its rows in the order its SELECT makes them.
            RETURN QUERY
            INSERT INTO rheo.events AS e (stream, "partition", sequence, id, key, payload, metadata, ts)
            SELECT p_stream, v_new_parts[1], v_bases[1] + x.ord,
                   v_id_prefix || to_hex(v_id_base + x.ord), k.key, x.v, p_metadata, v_ts
              FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
             CROSS JOIN LATERAL (SELECT rheo._event_key(p_keys[x.ord::int], x.v) AS key) AS k
             WHERE (jsonb_typeof(x.v) = 'object' AND coalesce(octet_length(k.key), 0) <= 1024)
                OR rheo._check_batch(p_payloads, p_keys, p_ids)
            RETURNING e.*;
        ELSE
            -- The ids grow with the input order, so ordering by them returns
            -- the events in input order.
            RETURN QUERY
            WITH inserted AS (
                INSERT INTO rheo.events AS e (stream, "partition", sequence, id, key, payload, metadata, ts)
                SELECT p_stream, r.part,
                       v_bases[array_position(v_new_parts, r.part)]
                       + row_number() OVER (PARTITION BY r.part ORDER BY x.ord),
                       v_id_prefix || to_hex(v_id_base + x.ord), k.key, x.v, p_metadata, v_ts
                  FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
                 CROSS JOIN LATERAL (SELECT rheo._event_key(p_keys[x.ord::int], x.v) AS key) AS k
                 CROSS JOIN LATERAL (SELECT rheo._route(k.key, v_count) AS part) AS r
                RETURNING e.*
            )
            SELECT * FROM inserted i ORDER BY i.id COLLATE "C";
        END IF;
    ELSE
        -- Some ids were given: each may repeat a stored event or an earlier
        -- input of the batch. One row per input, in input order: effective
        -- id, key and partition (routed as above).
        SELECT array_agg(coalesce(p_ids[x.ord::int], v_id_prefix || to_hex(v_id_base + x.ord)) ORDER BY x.ord),
               array_agg(k.key ORDER BY x.ord),
               array_agg(coalesce(p_partition, rheo._route(k.key, v_count)) ORDER BY x.ord),
               array_agg(x.v ORDER BY x.ord)
          INTO v_ids, v_keys, v_parts, v_payloads
          FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
         CROSS JOIN LATERAL (SELECT rheo._event_key(p_keys[x.ord::int], x.v) AS key) AS k
         WHERE (jsonb_typeof(x.v) = 'object' AND coalesce(octet_length(k.key), 0) <= 1024)
                OR rheo._check_batch(p_payloads, p_keys, p_ids);

        SELECT u.id INTO v_conflict
          FROM unnest(v_ids, v_keys, v_payloads) AS u(id, key, payload)
         GROUP BY u.id
        HAVING count(DISTINCT (u.key, u.payload)) > 1
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
                DETAIL = format('event id %L appears twice in the batch with different content', v_conflict);
        END IF;

        LOOP
            BEGIN
                -- Probe the id index once per input. LATERAL ... LIMIT 1 keeps
                -- the planner from choosing a scan of the stream when its
                -- statistics are missing or stale (a new stream has none).
                -- New: the first occurrence of an id not stored yet.
                SELECT array_agg(t.is_new ORDER BY t.ord), min(t.id) FILTER (WHERE t.conflict)
                  INTO v_is_new, v_conflict
                  FROM (SELECT u.ord, u.id,
                               ex.id IS NOT NULL
                               AND (ex.payload <> u.payload OR ex.key IS DISTINCT FROM u.key
                                    OR ex.metadata <> p_metadata) AS conflict,
                               ex.id IS NULL
                               AND row_number() OVER (PARTITION BY u.id ORDER BY u.ord) = 1 AS is_new
                          FROM unnest(v_ids, v_keys, v_payloads) WITH ORDINALITY AS u(id, key, payload, ord)
                          LEFT JOIN LATERAL (SELECT e.id, e.key, e.payload, e.metadata
                                               FROM rheo.events e
                                              WHERE e.id = u.id AND e.stream = p_stream
                                              LIMIT 1) AS ex ON true) AS t;
                IF v_conflict IS NOT NULL THEN
                    RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
                        DETAIL = format('event id %L already exists on stream %L with other content', v_conflict, p_stream);
                END IF;

                SELECT array_agg(c.part ORDER BY c.part), array_agg(c.n ORDER BY c.part)
                  INTO v_new_parts, v_counts
                  FROM (SELECT u.part, count(*)::int AS n
                          FROM unnest(v_parts, v_is_new) AS u(part, is_new)
                         WHERE u.is_new
                         GROUP BY u.part) AS c;

                IF v_new_parts IS NOT NULL THEN
                    v_bases := rheo._allocate(p_stream, v_new_parts, v_counts, v_ts);
                    INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
                    SELECT p_stream, u.part,
                           b.base + row_number() OVER (PARTITION BY u.part ORDER BY u.ord),
                           u.id, u.key, u.payload, p_metadata, v_ts
                      FROM unnest(v_ids, v_keys, v_parts, v_payloads, v_is_new)
                           WITH ORDINALITY AS u(id, key, part, payload, is_new, ord)
                      JOIN unnest(v_new_parts, v_bases) AS b(part, base) ON b.part = u.part
                     WHERE u.is_new;
                END IF;
                EXIT;
            EXCEPTION WHEN unique_violation OR internal_error THEN
                -- On Citus, a routed INSERT … SELECT passes the shard's
                -- unique violation on as internal_error, message and all.
                IF SQLSTATE = 'XX000'
                   AND SQLERRM NOT LIKE 'duplicate key value violates unique constraint "events\_id\_stream\_key%' THEN
                    RAISE;
                END IF;
                -- A concurrent append stored one of these ids first and has
                -- committed. Read committed: the next statement sees it,
                -- so look again, now seeing it as a repeat. Every turn
                -- finds at least one more id stored, so the loop ends
                -- within one turn per id. Repeatable read or serializable:
                -- the winner's event is not in this transaction's snapshot
                -- and cannot be returned, so the transaction must be
                -- retried, as for any write conflict at those levels; its
                -- retry sees the event and repeats it.
                v_tries := v_tries + 1;
                IF current_setting('transaction_isolation') <> 'read committed' OR v_tries > cardinality(v_ids) THEN
                    RAISE EXCEPTION 'could not serialize access due to a concurrent append of the same event id'
                        USING ERRCODE = 'serialization_failure',
                              DETAIL = format('a transaction that committed after this one began appended one of these ids to stream %L', p_stream),
                              HINT = 'Retry the transaction: the append then returns the stored event.';
                END IF;
            END;
        END LOOP;
    END IF;

    IF v_new_parts IS NOT NULL AND coalesce(current_setting('rheo.notify', true), '') <> 'off' THEN
        PERFORM pg_notify('rheo_events',
                          json_build_object('stream', p_stream, 'partition', b.part,
                                            'sequence', b.base + b.n)::text)
           FROM unnest(v_new_parts, v_bases, v_counts) AS b(part, base, n);
    END IF;
    IF v_generated THEN
        RETURN;
    END IF;

    RETURN QUERY
        SELECT ev.*
          FROM unnest(v_ids) WITH ORDINALITY AS u(id, ord)
         CROSS JOIN LATERAL (SELECT e.* FROM rheo.events e
                              WHERE e.id = u.id AND e.stream = p_stream LIMIT 1) AS ev
         ORDER BY u.ord;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._append(text, jsonb, text[], text[], int, jsonb, timestamptz, timestamptz)');
