-- Claims up to max_count events of a group for one consumer.
--
-- Claimable in a partition: deliveries whose retry delay has passed or
-- whose lease expired (below the attempt limit), then events past the
-- cursor. The cost is O(leases returned + deliveries in progress), never
-- O(history): new events come from an index range scan from the cursor.
--
-- Concurrent fetchers of one group lock the cursor rows of the partitions
-- they claim from with SKIP LOCKED, so they spread over partitions instead
-- of queueing; only a fetcher that could lock no partition with work waits
-- for one. The locks last until the calling transaction ends.
CREATE OR REPLACE FUNCTION rheo.fetch(stream text, group_name text, max_count int DEFAULT 10,
                                      consumer_id text DEFAULT NULL, lease_ms int DEFAULT 30000,
                                      partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS SETOF rheo.lease
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream      ALIAS FOR $1;
    p_group_name  ALIAS FOR $2;
    p_max_count   ALIAS FOR $3;
    p_consumer_id ALIAS FOR $4;
    p_lease_ms    ALIAS FOR $5;
    p_partitions  ALIAS FOR $6;
    p_clock       ALIAS FOR $7;
    v_group       record;
    v_scope       int[];
    v_now         timestamptz;
    v_expires     timestamptz;
    v_consumer    text;
    v_candidates  int[];
    v_locked      int[];
    v_next        bigint[];
    v_reclaim     int[];
    v_fresh       int[];
    v_quota       int[];
    v_k           int;
    v_start       int;
    v_left        int;
    v_progress    boolean;
    v_took        int;
    v_p           int;
    v_q           int;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('lease_ms must be >= 1, got %s', coalesce(p_lease_ms::text, 'NULL'));
    END IF;
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    IF cardinality(v_scope) = 0 THEN
        RETURN;
    END IF;

    v_now := coalesce(p_clock, now());
    v_expires := v_now + make_interval(secs => p_lease_ms / 1000.0);
    v_consumer := coalesce(p_consumer_id, 'consumer-' || gen_random_uuid());

    -- A lease that expired at the attempt limit is dead-lettered rather
    -- than leased again, so a handler that always crashes cannot loop.
    -- Delivery rows are taken with SKIP LOCKED here and below: a row
    -- locked by a settle in progress is that settle's to finish, and a
    -- fetch that never waits for delivery rows cannot deadlock with
    -- settles that lock them in another order.
    WITH expired AS (
        DELETE FROM rheo.deliveries AS d
         USING (SELECT x."partition", x.sequence FROM rheo.deliveries x
                 WHERE x.group_id = v_group.group_id AND x."partition" = ANY (v_scope)
                   AND x.state = 'leased' AND x.expires_at <= v_now
                   AND x.attempt >= v_group.max_attempts
                   FOR UPDATE SKIP LOCKED) AS due
         WHERE d.group_id = v_group.group_id AND d."partition" = due."partition"
           AND d.sequence = due.sequence
        RETURNING d."partition", d.sequence, d.attempt
    )
    INSERT INTO rheo.dead_letters (group_id, "partition", sequence, attempt, reason, dead_lettered_at)
    SELECT v_group.group_id, x."partition", x.sequence, x.attempt, 'lease_expired', v_now
      FROM expired x;
    IF p_max_count = 0 THEN
        RETURN;
    END IF;

    -- Partitions that look like they have work, read without locks.
    SELECT array_agg(c."partition" ORDER BY c."partition") INTO v_candidates
      FROM rheo.cursors c
      JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
     WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
       AND (c.next_sequence <= pt.high_watermark
            OR EXISTS (SELECT 1 FROM rheo.deliveries d
                        WHERE d.group_id = c.group_id AND d."partition" = c."partition"
                          AND d.expires_at <= v_now
                          AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)));
    IF v_candidates IS NULL THEN
        RETURN;
    END IF;

    SELECT array_agg(l."partition" ORDER BY l."partition"), array_agg(l.next_sequence ORDER BY l."partition")
      INTO v_locked, v_next
      FROM (SELECT c."partition", c.next_sequence FROM rheo.cursors c
             WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_candidates)
             ORDER BY c."partition"
               FOR UPDATE SKIP LOCKED) AS l;
    IF v_locked IS NULL THEN
        -- Every partition with work is being claimed by another fetcher:
        -- wait for one rather than report nothing. Holding no other cursor
        -- lock while waiting keeps this free of deadlocks.
        v_p := v_candidates[1 + (nextval('rheo.fetch_rotation') % cardinality(v_candidates))::int];
        SELECT ARRAY[c."partition"], ARRAY[c.next_sequence] INTO v_locked, v_next
          FROM rheo.cursors c
         WHERE c.group_id = v_group.group_id AND c."partition" = v_p
           FOR UPDATE;
    END IF;

    -- What each locked partition can give, capped at max_count.
    v_k := cardinality(v_locked);
    v_reclaim := array_fill(0, ARRAY[v_k]);
    v_fresh := array_fill(0, ARRAY[v_k]);
    FOR i IN 1 .. v_k LOOP
        SELECT count(*) INTO v_took
          FROM (SELECT 1 FROM rheo.deliveries d
                 WHERE d.group_id = v_group.group_id AND d."partition" = v_locked[i]
                   AND d.expires_at <= v_now
                   AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
                 LIMIT p_max_count) AS r;
        v_reclaim[i] := v_took;
        SELECT greatest(0, least(p_max_count::bigint, pt.high_watermark - v_next[i] + 1))
          INTO v_took
          FROM rheo.partitions pt
         WHERE pt.stream = p_stream AND pt."partition" = v_locked[i];
        v_fresh[i] := v_took;
    END LOOP;

    -- Round-robin, one lease per partition per round, from a rotating
    -- starting partition, until max_count or no work is left.
    v_quota := array_fill(0, ARRAY[v_k]);
    v_start := (nextval('rheo.fetch_rotation') % v_k)::int;
    v_left := p_max_count;
    LOOP
        v_progress := false;
        FOR i IN 0 .. v_k - 1 LOOP
            EXIT WHEN v_left = 0;
            v_p := 1 + (v_start + i) % v_k;  -- +1: arrays start at 1
            IF v_quota[v_p] < v_reclaim[v_p] + v_fresh[v_p] THEN
                v_quota[v_p] := v_quota[v_p] + 1;
                v_left := v_left - 1;
                v_progress := true;
            END IF;
        END LOOP;
        EXIT WHEN v_left = 0 OR NOT v_progress;
    END LOOP;

    -- Claim in (partition, sequence) order: within a partition the
    -- deliveries to claim again all precede the cursor.
    FOR i IN 1 .. v_k LOOP
        CONTINUE WHEN v_quota[i] = 0;
        v_p := v_locked[i];
        v_q := v_quota[i];

        IF v_reclaim[i] > 0 THEN
            RETURN QUERY
            WITH picked AS (
                SELECT d.sequence FROM rheo.deliveries d
                 WHERE d.group_id = v_group.group_id AND d."partition" = v_p
                   AND d.expires_at <= v_now
                   AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
                 ORDER BY d.sequence
                 LIMIT v_q
                   FOR UPDATE SKIP LOCKED
            ), claimed AS (
                UPDATE rheo.deliveries AS d
                   SET state = 'leased', lease_id = gen_random_uuid(), consumer_id = v_consumer,
                       attempt = d.attempt + 1, leased_at = v_now, expires_at = v_expires
                  FROM picked
                 WHERE d.group_id = v_group.group_id AND d."partition" = v_p
                   AND d.sequence = picked.sequence
                   AND d.expires_at <= v_now
                   AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
                RETURNING d.sequence, d.lease_id, d.attempt
            )
            SELECT c.lease_id, c.lease_id::text, p_stream, p_group_name, v_consumer, c.attempt,
                   v_now, v_expires, e.id, v_p, e.sequence, e.key, e.type, e.payload, e.metadata, e.ts
              FROM claimed c
             CROSS JOIN LATERAL (SELECT ev.* FROM rheo.events ev
                                  WHERE ev.stream = p_stream AND ev."partition" = v_p
                                    AND ev.sequence = c.sequence LIMIT 1) AS e
             ORDER BY c.sequence;
            GET DIAGNOSTICS v_took = ROW_COUNT;
            v_q := v_q - v_took;
        END IF;

        IF v_q > 0 AND v_fresh[i] > 0 THEN
            RETURN QUERY
            WITH fresh AS (
                SELECT e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts
                  FROM rheo.events e
                 WHERE e.stream = p_stream AND e."partition" = v_p AND e.sequence >= v_next[i]
                 ORDER BY e.sequence
                 LIMIT v_q
            ), claimed AS (
                INSERT INTO rheo.deliveries AS d
                       (group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at)
                SELECT v_group.group_id, v_p, f.sequence, 'leased', gen_random_uuid(), v_consumer, 1, v_now, v_expires
                  FROM fresh f
                RETURNING d.sequence, d.lease_id
            )
            SELECT c.lease_id, c.lease_id::text, p_stream, p_group_name, v_consumer, 1,
                   v_now, v_expires, f.id, v_p, f.sequence, f.key, f.type, f.payload, f.metadata, f.ts
              FROM claimed c
              JOIN fresh f ON f.sequence = c.sequence
             ORDER BY c.sequence;
            GET DIAGNOSTICS v_took = ROW_COUNT;
            -- Sequences are contiguous and visible in order, so the claimed
            -- ones are exactly next .. next + took - 1.
            UPDATE rheo.cursors AS c
               SET next_sequence = v_next[i] + v_took
             WHERE c.group_id = v_group.group_id AND c."partition" = v_p;
        END IF;
    END LOOP;
END
$$;
