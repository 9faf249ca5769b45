-- rheo.fetch on a Citus cluster (docs/citus.md; docs/decisions.md,
-- "Settles on Citus"): the same claim, with the same arguments, result
-- and errors, in statements Citus routes to the node that holds the
-- stream, whether the call runs whole there (outside a transaction) or
-- on the coordinator (inside the caller's, each statement routed).
--
-- What differs from the single server's, and why:
--  * every statement names the stream of every table it reads;
--  * no inlinable helper reads a table in a statement (Citus sends the
--    call of the helper to the node, where it would read the empty
--    table the shards belong to, not the shard): their bodies are
--    written out here;
--  * no INSERT in a WITH clause, which Citus cannot route: the claim runs
--    partition by partition, partitions in order and in each the
--    deliveries due again before the new events, so the result is in
--    (partition, sequence) order;
--  * the lease ids begin with the stream's hash (hashtext), by which the
--    settles find the stream; the rest is an md5 of a nonce of this call
--    and the event's position, not random per row: Citus refuses a
--    volatile function in an UPDATE's SET;
--  * each statement is planned for the call's values (Citus routes a
--    generic plan only for the simplest statements).
-- 'key' ordering is not claimed on Citus yet: it fails feature_not_supported.
CREATE OR REPLACE FUNCTION rheo._fetch_citus(stream text, group_name text, max_count int, consumer_id text,
                                             lease_ms int, partitions int[], clock timestamptz)
RETURNS SETOF rheo.lease
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET plan_cache_mode = force_custom_plan
SET jit = off
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
    v_avail       int[];
    v_quota       int[];
    v_k           int;
    v_total       int;
    v_p           int;
    v_a           int;
    v_left        int;
    v_i           int;
    v_part        boolean;
    v_tids        tid[];
    v_sequences   bigint[];
    v_attempts    int[];
    v_keys        text[];
    v_waiters     boolean[];
    v_parts       int[];
    v_leases      uuid[];
    v_mark        text;
    v_nonce       text;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    v_part := v_group.ordering = 'partition';
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('lease_ms must be >= 1, got %s', coalesce(p_lease_ms::text, 'NULL'));
    END IF;
    IF octet_length(p_consumer_id) > 1024 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('consumer_id must be at most 1024 bytes, got %s bytes', octet_length(p_consumer_id));
    END IF;
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    IF v_group.ordering = 'key' THEN
        RAISE EXCEPTION 'feature_not_supported' USING ERRCODE = '0A000',
            DETAIL = format('group %L of stream %L is ordered by key, which Rheo does not claim on Citus yet',
                            p_group_name, p_stream);
    END IF;
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    IF cardinality(v_scope) = 0 THEN
        RETURN;
    END IF;

    v_now := coalesce(p_clock, now());
    v_expires := v_now + make_interval(secs => p_lease_ms / 1000.0);
    v_consumer := coalesce(p_consumer_id, 'consumer-' || gen_random_uuid());
    v_mark := lpad(to_hex(hashtext(p_stream)), 8, '0');
    v_nonce := gen_random_uuid()::text;

    -- The cursors of the partitions with work, locked, and what each can
    -- give, as rheo.fetch reads them (rheo._has_work, rheo._fresh,
    -- rheo._due_count written out).
    SELECT array_agg(l.part ORDER BY l.part), array_agg(l.next_sequence ORDER BY l.part),
           array_agg(l.fresh ORDER BY l.part), array_agg(l.reclaim ORDER BY l.part)
      INTO v_locked, v_next, v_fresh, v_reclaim
      FROM (SELECT c."partition" AS part, greatest(c.next_sequence, pt.low_watermark) AS next_sequence,
                   rheo._fresh(greatest(c.next_sequence, pt.low_watermark), pt.high_watermark, p_max_count) AS fresh,
                   (SELECT count(*)::int
                      FROM (SELECT 1 FROM rheo.deliveries d
                             WHERE d.stream = p_stream AND d.group_id = c.group_id AND d."partition" = c."partition"
                               AND d.expires_at <= v_now
                               AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
                             ORDER BY d.expires_at
                             LIMIT p_max_count::bigint + 1) AS r) AS reclaim
              FROM rheo.cursors c
              JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
             WHERE c.stream = p_stream AND c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
               AND (c.next_sequence <= pt.high_watermark
                    OR EXISTS (SELECT 1 FROM rheo.deliveries d
                                WHERE d.stream = p_stream AND d.group_id = c.group_id AND d."partition" = c."partition"
                                  AND d.expires_at <= v_now))
             ORDER BY c."partition"
               FOR NO KEY UPDATE OF c SKIP LOCKED) AS l;
    IF v_locked IS NULL THEN
        -- Wait for one partition with work, as rheo.fetch does.
        IF txid_current_if_assigned() IS NOT NULL THEN
            RETURN;
        END IF;
        SELECT array_agg(c."partition" ORDER BY c."partition") INTO v_candidates
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         WHERE c.stream = p_stream AND c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
           AND (c.next_sequence <= pt.high_watermark
                OR EXISTS (SELECT 1 FROM rheo.deliveries d
                            WHERE d.stream = p_stream AND d.group_id = c.group_id AND d."partition" = c."partition"
                              AND d.expires_at <= v_now));
        IF v_candidates IS NULL THEN
            RETURN;
        END IF;
        v_p := v_candidates[1 + (nextval('rheo.fetch_rotation') % cardinality(v_candidates))::int];
        SELECT ARRAY[c."partition"], ARRAY[greatest(c.next_sequence, pt.low_watermark)],
               ARRAY[rheo._fresh(greatest(c.next_sequence, pt.low_watermark), pt.high_watermark, p_max_count)],
               ARRAY[(SELECT count(*)::int
                        FROM (SELECT 1 FROM rheo.deliveries d
                               WHERE d.stream = p_stream AND d.group_id = c.group_id AND d."partition" = c."partition"
                                 AND d.expires_at <= v_now
                                 AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
                               ORDER BY d.expires_at
                               LIMIT p_max_count::bigint + 1) AS r)]
          INTO v_locked, v_next, v_fresh, v_reclaim
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         WHERE c.stream = p_stream AND c.group_id = v_group.group_id AND c."partition" = v_p
           FOR NO KEY UPDATE OF c;
        IF v_locked IS NULL THEN
            RETURN;
        END IF;
    END IF;

    -- Leases expired at the attempt limit are dead-lettered, as in
    -- rheo.fetch; the dead letters and wakeups by statements of their own.
    WITH due AS MATERIALIZED (
        SELECT x.ctid AS tid FROM rheo.deliveries x
         WHERE x.stream = p_stream AND x.group_id = v_group.group_id AND x."partition" = ANY (v_locked)
           AND x.expires_at <= v_now
           AND x.state = 'leased' AND x.attempt >= v_group.max_attempts
           FOR UPDATE SKIP LOCKED
    ), expired AS (
        DELETE FROM rheo.deliveries AS d
         WHERE d.stream = p_stream AND d.ctid = ANY (ARRAY(SELECT due.tid FROM due))
        RETURNING d."partition", d.sequence, d.attempt, d.key, d.has_waiters
    )
    SELECT array_agg(x."partition"), array_agg(x.sequence), array_agg(x.attempt), array_agg(x.key),
           array_agg(x.has_waiters)
      INTO v_parts, v_sequences, v_attempts, v_keys, v_waiters
      FROM expired x;
    IF v_parts IS NOT NULL THEN
        INSERT INTO rheo.dead_letters (stream, group_id, "partition", sequence, attempt, reason, dead_lettered_at)
        SELECT p_stream, v_group.group_id, x.part, x.sequence, x.attempt, 'lease_expired', v_now
          FROM unnest(v_parts, v_sequences, v_attempts) AS x(part, sequence, attempt);
        INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
        SELECT p_stream, v_group.group_id, x.part, x.key
          FROM unnest(v_parts, v_keys, v_waiters) AS x(part, key, has_waiters)
         WHERE x.has_waiters;
    END IF;

    IF v_part THEN
        -- 'partition': the earliest delivery in progress when due, else
        -- one new event (rheo._turn written out).
        SELECT array_agg(CASE WHEN h.sequence IS NULL THEN least(1, x.f) ELSE 0 END ORDER BY x.ord),
               array_agg(CASE WHEN h.expires_at <= v_now AND (h.state = 'pending' OR h.attempt < v_group.max_attempts)
                              THEN 1 ELSE 0 END ORDER BY x.ord)
          INTO v_fresh, v_reclaim
          FROM unnest(v_locked, v_fresh) WITH ORDINALITY AS x(part, f, ord)
          LEFT JOIN LATERAL (SELECT d.sequence, d.state, d.attempt, d.expires_at FROM rheo.deliveries d
                              WHERE d.stream = p_stream AND d.group_id = v_group.group_id AND d."partition" = x.part
                              ORDER BY d.sequence
                              LIMIT 1) AS h ON true;
    END IF;
    IF p_max_count = 0 THEN
        RETURN;
    END IF;

    -- Quotas, as in rheo.fetch.
    v_k := cardinality(v_locked);
    SELECT array_agg(least(p_max_count, x.r + x.f) ORDER BY x.ord) INTO v_avail
      FROM unnest(v_reclaim, v_fresh) WITH ORDINALITY AS x(r, f, ord);
    SELECT sum(a) INTO v_total FROM unnest(v_avail) AS a;
    IF v_total <= p_max_count THEN
        v_quota := v_avail;
    ELSE
        v_quota := rheo._quota(v_avail, p_max_count, (nextval('rheo.fetch_rotation') % v_k)::int);
    END IF;

    FOR v_i IN 1 .. v_k LOOP
        CONTINUE WHEN v_quota[v_i] <= 0;
        v_p := v_locked[v_i];
        v_a := least(v_quota[v_i], v_reclaim[v_i]);
        IF v_a > 0 THEN
            -- The deliveries due again with the lowest sequences ('partition':
            -- the earliest delivery, if still due), locked with SKIP LOCKED
            -- and checked again as they are once locked.
            IF v_part THEN
                SELECT array_agg(x.ctid) INTO v_tids
                  FROM (SELECT d.ctid FROM rheo.deliveries d
                         WHERE d.stream = p_stream AND d.group_id = v_group.group_id AND d."partition" = v_p
                         ORDER BY d.sequence
                         LIMIT 1) AS t
                  JOIN LATERAL (SELECT y.ctid FROM rheo.deliveries y
                                 WHERE y.stream = p_stream AND y.ctid = t.ctid
                                   AND y.expires_at <= v_now
                                   AND (y.state = 'pending' OR y.attempt < v_group.max_attempts)
                                   FOR UPDATE SKIP LOCKED) AS x ON true;
            ELSE
                SELECT array_agg(x.ctid) INTO v_tids
                  FROM (SELECT d.ctid FROM rheo.deliveries d
                         WHERE d.stream = p_stream AND d.group_id = v_group.group_id AND d."partition" = v_p
                           AND d.expires_at <= v_now AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
                         ORDER BY d.sequence
                         LIMIT v_a
                           FOR UPDATE SKIP LOCKED) AS x;
            END IF;
            IF v_tids IS NOT NULL THEN
                WITH reclaimed AS (
                    UPDATE rheo.deliveries AS d
                       SET state = 'leased', lease_id = (v_mark || substr(md5(v_nonce || d."partition" || '/' || d.sequence), 9))::uuid,
                           consumer_id = v_consumer, attempt = d.attempt + 1, leased_at = v_now, expires_at = v_expires
                     WHERE d.stream = p_stream AND d.ctid = ANY (v_tids)
                    RETURNING d.sequence, d.lease_id, d.attempt
                )
                SELECT array_agg(r.sequence ORDER BY r.sequence), array_agg(r.lease_id ORDER BY r.sequence),
                       array_agg(r.attempt ORDER BY r.sequence)
                  INTO v_sequences, v_leases, v_attempts
                  FROM reclaimed r;
                RETURN QUERY
                SELECT x.lease_id, x.lease_id::text, p_stream, p_group_name, v_consumer, x.attempt,
                       v_now, v_expires, e.id, e."partition", e.sequence, e.key, e.type, e.payload, e.metadata, e.ts
                  FROM unnest(v_sequences, v_leases, v_attempts) WITH ORDINALITY AS x(sequence, lease_id, attempt, ord)
                  JOIN rheo.events e ON e.stream = p_stream AND e."partition" = v_p AND e.sequence = x.sequence
                 ORDER BY x.ord;
            END IF;
        END IF;
        -- Then the new events from the cursor, which moves past them.
        v_left := v_quota[v_i] - v_a;
        CONTINUE WHEN v_left <= 0;
        INSERT INTO rheo.deliveries
               (stream, group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at, ts)
        SELECT e.stream, v_group.group_id, e."partition", e.sequence, 'leased',
               (v_mark || substr(md5(v_nonce || e."partition" || '/' || e.sequence), 9))::uuid,
               v_consumer, 1, v_now, v_expires, e.ts
          FROM rheo.events e
         WHERE e.stream = p_stream AND e."partition" = v_p AND e.sequence >= v_next[v_i]
         ORDER BY e.sequence
         LIMIT v_left;
        GET DIAGNOSTICS v_left = ROW_COUNT;
        CONTINUE WHEN v_left = 0;
        UPDATE rheo.cursors AS c SET next_sequence = v_next[v_i] + v_left
         WHERE c.stream = p_stream AND c.group_id = v_group.group_id AND c."partition" = v_p;
        RETURN QUERY
        SELECT (v_mark || substr(md5(v_nonce || e."partition" || '/' || e.sequence), 9))::uuid,
               (v_mark || substr(md5(v_nonce || e."partition" || '/' || e.sequence), 9))::uuid::text,
               p_stream, p_group_name, v_consumer, 1,
               v_now, v_expires, e.id, e."partition", e.sequence, e.key, e.type, e.payload, e.metadata, e.ts
          FROM rheo.events e
         WHERE e.stream = p_stream AND e."partition" = v_p
           AND e.sequence >= v_next[v_i] AND e.sequence < v_next[v_i] + v_left
         ORDER BY e.sequence;
    END LOOP;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._fetch_citus(text, text, int, text, int, int[], timestamptz)');
