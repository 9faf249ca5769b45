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
    v_bad       bigint;
    v_conflict  text;
    v_ids       text[];
    v_keys      text[];
    v_parts     int[];
    v_payloads  jsonb[];
    v_is_new    boolean[];
    v_new_parts int[];
    v_counts    int[];
    v_bases     bigint[];
    v_base      bigint;
    v_tries     int := 0;
    v_millis    bytea;
BEGIN
    v_count := rheo._stream(p_stream);
    IF p_payloads IS NULL OR jsonb_typeof(p_payloads) <> 'array' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'payloads must be a JSON array of objects';
    END IF;
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
    IF p_partition < 0 OR p_partition >= v_count THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = format('partition %s is outside 0..%s', p_partition, v_count - 1);
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;
    SELECT x.ord INTO v_bad
      FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
     WHERE jsonb_typeof(x.v) <> 'object'
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = CASE WHEN v_n = 1 THEN 'payload must be a JSON object'
                          ELSE format('payload %s of the batch is not a JSON object', v_bad - 1) END;
    END IF;
    IF array_position(p_ids, '') IS NOT NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'event ids must not be empty';
    END IF;

    v_now := coalesce(p_clock, now());
    v_ts := coalesce(p_ts, v_now);
    v_millis := substring(int8send(floor(extract(epoch FROM v_now) * 1000)::bigint) FROM 3);

    -- One row per input, in input order: effective id, key and partition.
    -- The expressions are written inline rather than as helper functions
    -- so that they run at expression speed for every event of a batch.
    --
    -- Generated ids are UUIDv7: 48 bits of Unix milliseconds over a random
    -- UUID, whose version nibble (bits 52..55 of the bytea, 0100 for v4)
    -- becomes 0111 by setting bits 52 and 53.
    --
    -- Routing: the first four bytes of md5(key), big-endian and unsigned
    -- (bit(32)::bigint keeps it unsigned where ::int would wrap), modulo
    -- the partition count.
    SELECT array_agg(coalesce(p_ids[x.ord::int],
                              encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                                                             PLACING v_millis FROM 1 FOR 6),
                                                     52, 1), 53, 1), 'hex')::uuid::text)
                     ORDER BY x.ord),
           array_agg(k.key ORDER BY x.ord),
           array_agg(coalesce(p_partition,
                              CASE WHEN k.key IS NULL THEN 0
                                   ELSE ((('x' || substr(md5(k.key), 1, 8))::bit(32)::bigint) % v_count)::int
                              END)
                     ORDER BY x.ord),
           array_agg(x.v ORDER BY x.ord)
      INTO v_ids, v_keys, v_parts, v_payloads
      FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
     CROSS JOIN LATERAL (SELECT coalesce(nullif(p_keys[x.ord::int], ''), nullif(x.v ->> 'key', '')) AS key) AS k;

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
                -- Lock the allocators in partition order so that concurrent
                -- batches over several partitions cannot deadlock.
                v_bases := '{}';
                FOR i IN 1 .. cardinality(v_new_parts) LOOP
                    UPDATE rheo.partitions AS pt
                       SET high_watermark = pt.high_watermark + v_counts[i]
                     WHERE pt.stream = p_stream AND pt."partition" = v_new_parts[i]
                    RETURNING pt.high_watermark - v_counts[i] INTO v_base;
                    v_bases := v_bases || v_base;
                END LOOP;

                PERFORM set_config('rheo.appending', 'on', true);
                INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
                SELECT p_stream, u.part,
                       b.base + row_number() OVER (PARTITION BY u.part ORDER BY u.ord),
                       u.id, u.key, u.payload, p_metadata, v_ts
                  FROM unnest(v_ids, v_keys, v_parts, v_payloads, v_is_new)
                       WITH ORDINALITY AS u(id, key, part, payload, is_new, ord)
                  JOIN unnest(v_new_parts, v_bases) AS b(part, base) ON b.part = u.part
                 WHERE u.is_new;
                PERFORM set_config('rheo.appending', 'off', true);
            END IF;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            -- A concurrent append stored one of these ids first and has
            -- committed: look again, now seeing it as a repeat.
            v_tries := v_tries + 1;
            IF v_tries >= 3 THEN
                RAISE;
            END IF;
        END;
    END LOOP;

    IF v_new_parts IS NOT NULL AND coalesce(current_setting('rheo.notify', true), '') <> 'off' THEN
        PERFORM pg_notify('rheo_events',
                          json_build_object('stream', p_stream, 'partition', b.part,
                                            'sequence', b.base + b.n)::text)
           FROM unnest(v_new_parts, v_bases, v_counts) AS b(part, base, n);
    END IF;

    RETURN QUERY
        SELECT ev.*
          FROM unnest(v_ids) WITH ORDINALITY AS u(id, ord)
         CROSS JOIN LATERAL (SELECT e.* FROM rheo.events e
                              WHERE e.id = u.id AND e.stream = p_stream LIMIT 1) AS ev
         ORDER BY u.ord;
END
$$;
