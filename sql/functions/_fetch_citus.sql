-- rheo.fetch on a Citus cluster (docs/citus.md; docs/decisions.md,
-- "Settles on Citus"): the same claim, once rheo.fetch has checked its
-- arguments and read the group, in statements Citus routes to the node that holds the
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
--  * the lease ids begin with the stream's hash, by which the settles
--    find the stream (rheo._lease_id);
--  * each statement is planned for the call's values (Citus routes a
--    generic plan only for the simplest statements), and names the
--    tables rheo._shard_tables gives: on the node that holds the stream,
--    its shards, which PostgreSQL plans alone (docs/citus.md,
--    "Statements on the shards"); elsewhere the tables, which Citus
--    routes. %1$s is events, %2$s partitions, %3$s cursors, %4$s
--    deliveries, %5$s dead_letters, %6$s key_wakeups.
--  * under 'key' ordering, the wakeups are taken key by key, and the
--    window walk of the new events is a loop of windows.
DROP FUNCTION IF EXISTS rheo._fetch_citus(text, text, int, text, int, int[], timestamptz);
CREATE OR REPLACE FUNCTION rheo._fetch_citus(stream text, group_name text, group_id int, max_attempts int,
                                             ordering text, max_count int, consumer_id text, scope int[],
                                             now timestamptz, expires_at timestamptz)
RETURNS SETOF rheo.lease
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET plan_cache_mode = force_custom_plan
SET jit = off
AS $$
DECLARE
    p_stream       ALIAS FOR $1;
    p_group_name   ALIAS FOR $2;
    p_group_id     ALIAS FOR $3;
    p_max_attempts ALIAS FOR $4;
    p_ordering     ALIAS FOR $5;
    p_max_count    ALIAS FOR $6;
    v_consumer     text := $7;
    v_scope        int[] := $8;
    v_now          timestamptz := $9;
    v_expires      timestamptz := $10;
    v_t           text[];
    v_routed      boolean;
    v_work        text;
    v_candidates  int[];
    v_first       int;
    v_rotated     boolean;
    v_had_xid     boolean;
    v_locked      int[];
    v_next        bigint[];
    v_reclaim     int[];
    v_expired     int[];
    v_fresh       int[];
    v_avail       int[];
    v_quota       int[];
    v_k           int;
    v_n           bigint;
    v_total       int;
    v_p           int;
    v_a           int;
    v_left        int;
    v_i           int;
    v_part        boolean;
    v_key         boolean;
    v_wparts      int[];
    v_wkeys       text[];
    v_wp          int;
    v_wk          text;
    v_tid         tid;
    v_state       text;
    v_has         boolean;
    v_released    int[];
    v_size        bigint;
    v_read        bigint;
    v_leasable    bigint;
    v_blocked     boolean[];
    v_wake        boolean[];
    v_ahead       tid[];
    v_wakes_p     int[];
    v_wakes_k     text[];
    v_tids        tid[];
    v_sequences   bigint[];
    v_attempts    int[];
    v_keys        text[];
    v_waiters     boolean[];
    v_parts       int[];
    v_leases      uuid[];
    v_mark        text;
    v_nonce       text;
    v_found       rheo.lease[];
    v_rows        rheo.lease[] := '{}';
    v_new_parts     int[] := '{}';
    v_new_next      bigint[] := '{}';
    v_new_counts    int[] := '{}';
BEGIN
    v_part := p_ordering = 'partition';
    v_key := p_ordering = 'key';
    v_mark := lpad(to_hex(hashtext(p_stream)), 8, '0');
    v_nonce := gen_random_uuid()::text;
    v_t := rheo._shard_tables(p_stream, ARRAY['events', 'partitions', 'cursors', 'deliveries', 'dead_letters',
                                              'key_wakeups']);
    -- Routed: the tables themselves, whose statements Citus sends to the
    -- stream's node (rheo._shard_tables).
    v_routed := v_t[1] = 'rheo.events';
    IF NOT v_routed THEN
        -- On the shards, the prepared statements (rheo._prepared) keep
        -- their plans; routed by Citus they are planned at every call
        -- (the function's setting: Citus routes a generic plan only for
        -- its simplest statements). Until the function returns.
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
    END IF;

    -- Whether the cursor c (of partition pt) has work (rheo._has_work
    -- written out): events past it, a pending delivery due, a lease
    -- expired once its expiry mark is passed, or under 'key' a wakeup. Its parameters are those of
    -- the two statements below: $1 the stream, $5 now, $7 whether the
    -- ordering is 'key'.
    v_work := format($q$(c.next_sequence <= pt.high_watermark
                         OR (c.expiry_mark <= $5
                             AND EXISTS (SELECT 1 FROM %1$s d
                                          WHERE d.stream = $1 AND d.group_id = c.group_id
                                            AND d."partition" = c."partition"
                                            AND d.state = 'leased' AND d.expires_at <= $5))
                         OR EXISTS (SELECT 1 FROM %1$s d
                                     WHERE d.stream = $1 AND d.group_id = c.group_id AND d."partition" = c."partition"
                                       AND d.state = 'pending' AND d.expires_at <= $5)
                         OR ($7 AND EXISTS (SELECT 1 FROM %2$s w
                                             WHERE w.stream = $1 AND w.group_id = c.group_id
                                               AND w."partition" = c."partition")))$q$, v_t[4], v_t[6]);

    -- The cursors this fetch claims from, locked, and what each can give,
    -- as rheo.fetch chooses and reads them (rheo._has_work, rheo._turn,
    -- rheo._fresh, rheo._due_count written out): at most max_count
    -- candidates in rotation order from a rotating one, skipping
    -- what another holds, and those with a lease expired at the attempt
    -- limit; after a wait, the rotation starts at the partition waited
    -- for ($9), and goes past it only when its events cannot fill
    -- max_count. When nothing could be locked, the candidates too.
    v_had_xid := txid_current_if_assigned() IS NOT NULL;
    LOOP
        EXECUTE rheo._prepared(format($q$
            WITH work AS MATERIALIZED (
                SELECT r.part, r.claim, r.k, r.ord, r.next_sequence, r.low_watermark, r.high_watermark,
                       (NOT r.claim OR r.k > $4::int) AND r.expiry_mark <= $5
                       AND EXISTS (SELECT 1 FROM %4$s x
                                    WHERE x.stream = $1 AND x.group_id = $2 AND x."partition" = r.part
                                      AND x.expires_at <= $5
                                      AND x.state = 'leased' AND x.attempt >= $6) AS spent
                  FROM (SELECT w.part, w.claim, w.k, w.next_sequence, w.low_watermark, w.high_watermark, w.expiry_mark,
                               CASE WHEN NOT w.claim THEN w.k + w.rn
                                    WHEN $9::int IS NULL AND w.k <= $4::int THEN w.rn
                                    ELSE (w.rn + w.k - coalesce(w.before_first, (SELECT nextval('rheo.fetch_rotation'))) %% w.k)
                                         %% w.k
                               END AS ord
                          FROM (SELECT v.part, v.claim, v.next_sequence, v.low_watermark, v.high_watermark, v.expiry_mark,
                                       row_number() OVER (PARTITION BY v.claim ORDER BY v.part) - 1 AS rn,
                                       count(*) FILTER (WHERE v.claim) OVER () AS k,
                                       CASE WHEN $9::int IS NOT NULL
                                            THEN count(*) FILTER (WHERE v.claim AND v.part < $9::int) OVER () END
                                           AS before_first
                                  FROM (SELECT c."partition" AS part, greatest(c.next_sequence, pt.low_watermark) AS next_sequence,
                                               pt.low_watermark, pt.high_watermark, c.expiry_mark,
                                               NOT ($8::boolean
                                                    AND EXISTS (SELECT 1 FROM (SELECT t.expires_at FROM %4$s t
                                                                                WHERE t.stream = $1 AND t.group_id = c.group_id
                                                                                  AND t."partition" = c."partition"
                                                                                ORDER BY t.sequence
                                                                                LIMIT 1) AS t
                                                                 WHERE t.expires_at > $5)) AS claim
                                          FROM %3$s c
                                          JOIN %2$s pt ON pt.stream = $1 AND pt."partition" = c."partition"
                                         WHERE c.stream = $1 AND c.group_id = $2 AND c."partition" = ANY ($3) AND %7$s
                                        OFFSET 0) AS v) AS w) AS r
            )
            SELECT array_agg(l.part ORDER BY l.ord), array_agg(l.next_sequence ORDER BY l.ord),
                   array_agg(rheo._fresh(l.next_sequence, l.high_watermark, $4) ORDER BY l.ord),
                   array_agg((SELECT count(*)::int
                                FROM ((SELECT 1 FROM %4$s d
                                        WHERE d.stream = $1 AND d.group_id = $2 AND d."partition" = l.part
                                          AND d.state = 'pending' AND d.expires_at <= $5
                                        ORDER BY d.expires_at
                                        LIMIT $4::bigint + 1)
                                      UNION ALL
                                      (SELECT 1 FROM %4$s d
                                        WHERE l.expiry_mark <= $5
                                          AND d.stream = $1 AND d.group_id = $2 AND d."partition" = l.part
                                          AND d.expires_at <= $5
                                          AND d.state = 'leased' AND d.attempt < $6
                                        ORDER BY d.expires_at
                                        LIMIT $4::bigint + 1)
                                      LIMIT $4::bigint + 1) AS r) ORDER BY l.ord),
                   array_agg(l.part ORDER BY l.ord) FILTER (WHERE l.expiry_mark <= $5),
                   bool_or(l.k > $4 OR $9::int IS NOT NULL),
                   CASE WHEN count(*) = 0 THEN (SELECT array_agg(x.part ORDER BY x.part) FROM work x WHERE x.claim) END
              FROM (SELECT c."partition" AS part, w.ord, w.k, greatest(c.next_sequence, w.low_watermark) AS next_sequence,
                           w.high_watermark, c.expiry_mark
                      FROM work w
                      JOIN %3$s c ON c.stream = $1 AND c.group_id = $2 AND c."partition" = w.part
                     WHERE w.claim OR w.spent
                     ORDER BY w.spent DESC, w.ord
                     LIMIT (SELECT CASE WHEN bool_or(x.part = $9::int AND x.claim
                                                     AND x.high_watermark - x.next_sequence + 1 >= $4::int)
                                        THEN 1 ELSE $4::int END
                                   + count(*) FILTER (WHERE x.spent)
                              FROM work x)
                       FOR NO KEY UPDATE OF c SKIP LOCKED) AS l$q$, VARIADIC v_t || v_work),
                    ARRAY[quote_nullable(p_stream), quote_nullable(p_group_id), quote_nullable(v_scope),
                          quote_nullable(p_max_count), quote_nullable(v_now), quote_nullable(p_max_attempts),
                          quote_nullable(v_key), quote_nullable(v_part), quote_nullable(v_first)])
           INTO v_locked, v_next, v_fresh, v_reclaim, v_expired, v_rotated, v_candidates;
        EXIT WHEN v_locked IS NOT NULL OR v_first IS NOT NULL OR p_max_count = 0;
        -- Wait for one candidate, as rheo.fetch does, only while the
        -- transaction holds no row lock, then lock what else is free, as
        -- above. Here on the stream's shards a row lock assigns this
        -- transaction an id. Routed by Citus (a call in the caller's
        -- transaction, from the coordinator), the locks are taken on the
        -- worker, where the coordinator's transaction id is not assigned:
        -- a transaction that began before this statement may hold some,
        -- and the fetch returns nothing rather than wait. The id as before
        -- the locking read, as in rheo.fetch (nextval can assign one).
        IF v_candidates IS NULL OR v_had_xid
           OR (v_routed AND transaction_timestamp() <> statement_timestamp()) THEN
            RETURN;
        END IF;
        v_first := v_candidates[1 + (nextval('rheo.fetch_rotation') % cardinality(v_candidates))::int];
        EXECUTE format($q$
            SELECT c."partition" FROM %3$s c
             WHERE c.stream = $1 AND c.group_id = $2 AND c."partition" = $3
               FOR NO KEY UPDATE OF c$q$, VARIADIC v_t)
          USING p_stream, p_group_id, v_first;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n = 0 THEN  -- the group was dropped while this fetch waited
            RETURN;
        END IF;
    END LOOP;
    IF v_locked IS NULL THEN
        RETURN;
    END IF;

    IF v_expired IS NOT NULL THEN
        -- Leases expired at the attempt limit are dead-lettered, as in
        -- rheo.fetch (where the expiry mark has passed); the dead letters and
        -- wakeups by statements of their own.
        EXECUTE rheo._prepared(format($q$
            WITH due AS MATERIALIZED (
                SELECT x.ctid AS tid FROM %4$s x
                 WHERE x.stream = $1 AND x.group_id = $2 AND x."partition" = ANY ($3)
                   AND x.expires_at <= $4
                   AND x.state = 'leased' AND x.attempt >= $5
                   FOR UPDATE SKIP LOCKED
            ), expired AS (
                DELETE FROM %4$s AS d
                 WHERE d.stream = $1 AND d.ctid = ANY (ARRAY(SELECT due.tid FROM due))
                RETURNING d."partition", d.sequence, d.attempt, d.key, d.has_waiters
            )
            SELECT array_agg(x."partition"), array_agg(x.sequence), array_agg(x.attempt), array_agg(x.key),
                   array_agg(x.has_waiters)
              FROM expired x$q$, VARIADIC v_t),
                    ARRAY[quote_nullable(p_stream), quote_nullable(p_group_id), quote_nullable(coalesce(v_expired, '{}')),
                          quote_nullable(v_now), quote_nullable(p_max_attempts)])
           INTO v_parts, v_sequences, v_attempts, v_keys, v_waiters;
        IF v_parts IS NOT NULL THEN
            EXECUTE format($q$
                INSERT INTO %5$s (stream, group_id, "partition", sequence, attempt, reason, dead_lettered_at)
                SELECT $1, $2, x.part, x.sequence, x.attempt, 'lease_expired', $3
                  FROM unnest($4, $5, $6) AS x(part, sequence, attempt)$q$, VARIADIC v_t)
              USING p_stream, p_group_id, v_now, v_parts, v_sequences, v_attempts;
            IF true = ANY (v_waiters) THEN
                EXECUTE format($q$
                    INSERT INTO %6$s (stream, group_id, "partition", key)
                    SELECT $1, $2, x.part, x.key
                      FROM unnest($3, $4, $5) AS x(part, key, has_waiters)
                     WHERE x.has_waiters$q$, VARIADIC v_t)
                  USING p_stream, p_group_id, v_parts, v_keys, v_waiters;
            END IF;
        END IF;
    END IF;

    IF v_key THEN
        -- 'key': the wakeups of the partitions locked, as in rheo.fetch,
        -- key by key: a blocked earliest delivery is released (pending, due
        -- now), one leased or pending without waiters is marked as having
        -- some (or, held by a settle, its wakeup kept for the next fetch).
        EXECUTE format($q$
            WITH taken AS (
                DELETE FROM %6$s AS w
                 WHERE w.stream = $1 AND w.group_id = $2 AND w."partition" = ANY ($3)
                RETURNING w."partition", w.key
            )
            SELECT array_agg(t.part ORDER BY t.part, t.key), array_agg(t.key ORDER BY t.part, t.key)
              FROM (SELECT DISTINCT x."partition" AS part, x.key FROM taken x) AS t$q$, VARIADIC v_t)
           INTO v_wparts, v_wkeys
          USING p_stream, p_group_id, v_locked;
        v_released := array_fill(0, ARRAY[cardinality(v_locked)]);
        FOR v_i IN 1 .. coalesce(cardinality(v_wparts), 0) LOOP
            v_wp := v_wparts[v_i];
            v_wk := v_wkeys[v_i];
            EXECUTE format($q$
                SELECT x.ctid, x.state, x.has_waiters
                  FROM %4$s x
                 WHERE x.stream = $1 AND x.group_id::bigint = $2::bigint
                   AND x."partition"::bigint = $3::bigint AND x.key = $4
                 ORDER BY x.sequence
                 LIMIT 1$q$, VARIADIC v_t)
               INTO v_tid, v_state, v_has
              USING p_stream, p_group_id, v_wp, v_wk;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            CONTINUE WHEN v_n = 0;
            IF v_state = 'blocked' THEN
                EXECUTE format($q$
                    SELECT EXISTS (SELECT 1 FROM %4$s y
                                    WHERE y.stream = $1 AND y.group_id::bigint = $2::bigint
                                      AND y."partition"::bigint = $3::bigint AND y.key = $4
                                      AND y.sequence > (SELECT z.sequence FROM %4$s z
                                                         WHERE z.stream = $1 AND z.ctid = $5))$q$, VARIADIC v_t)
                   INTO v_has
                  USING p_stream, p_group_id, v_wp, v_wk, v_tid;
                EXECUTE format($q$
                    UPDATE %4$s AS d
                       SET state = 'pending', expires_at = $3, has_waiters = $4
                     WHERE d.stream = $1 AND d.ctid = $2$q$, VARIADIC v_t)
                  USING p_stream, v_tid, v_now, v_has;
                GET DIAGNOSTICS v_n = ROW_COUNT;
                IF v_n > 0 THEN
                    v_k := array_position(v_locked, v_wp);
                    v_released[v_k] := v_released[v_k] + 1;
                END IF;
            ELSIF NOT v_has THEN
                EXECUTE format($q$
                    SELECT 1 FROM %4$s x WHERE x.stream = $1 AND x.ctid = $2 FOR UPDATE SKIP LOCKED$q$, VARIADIC v_t)
                  USING p_stream, v_tid;
                GET DIAGNOSTICS v_n = ROW_COUNT;
                IF v_n > 0 THEN
                    EXECUTE format($q$
                        UPDATE %4$s AS d SET has_waiters = true WHERE d.stream = $1 AND d.ctid = $2$q$, VARIADIC v_t)
                      USING p_stream, v_tid;
                ELSE
                    EXECUTE format($q$
                        INSERT INTO %6$s (stream, group_id, "partition", key) VALUES ($1, $2, $3, $4)$q$, VARIADIC v_t)
                      USING p_stream, p_group_id, v_wp, v_wk;
                END IF;
            END IF;
        END LOOP;
        SELECT array_agg(least(p_max_count::bigint + 1, x.r + x.n)::int ORDER BY x.ord) INTO v_reclaim
          FROM unnest(v_reclaim, v_released) WITH ORDINALITY AS x(r, n, ord);
    ELSIF v_part THEN
        -- 'partition': the earliest delivery in progress when due, else
        -- one new event (rheo._turn written out).
        EXECUTE format($q$
            SELECT array_agg(CASE WHEN h.sequence IS NULL THEN least(1, x.f) ELSE 0 END ORDER BY x.ord),
                   array_agg(CASE WHEN h.expires_at <= $5 AND (h.state = 'pending' OR h.attempt < $6)
                                  THEN 1 ELSE 0 END ORDER BY x.ord)
              FROM unnest($3, $4) WITH ORDINALITY AS x(part, f, ord)
              LEFT JOIN LATERAL (SELECT d.sequence, d.state, d.attempt, d.expires_at FROM %4$s d
                                  WHERE d.stream = $1 AND d.group_id = $2 AND d."partition" = x.part
                                  ORDER BY d.sequence
                                  LIMIT 1) AS h ON true$q$, VARIADIC v_t)
           INTO v_fresh, v_reclaim
          USING p_stream, p_group_id, v_locked, v_fresh, v_now, p_max_attempts;
    END IF;
    -- The expiry marks, as in rheo.fetch.
    EXECUTE rheo._prepared(format($q$
        UPDATE %3$s AS c
           SET expiry_mark = least(CASE WHEN x.r + x.f > 0 THEN $5::timestamptz ELSE 'infinity' END,
                                   CASE WHEN c.expiry_mark <= $4
                                        THEN coalesce((SELECT d.expires_at FROM %4$s d
                                                        WHERE d.stream = $1 AND d.group_id = c.group_id
                                                          AND d."partition" = c."partition" AND d.state = 'leased'
                                                          AND d.expires_at < 'infinity'
                                                        ORDER BY d.expires_at
                                                        LIMIT 1), 'infinity')
                                        ELSE c.expiry_mark END)
          FROM unnest($3::int[], $6::int[], $7::int[]) AS x(part, r, f)
         WHERE c.stream = $1 AND c.group_id = $2 AND c."partition" = x.part
           AND (c.expiry_mark <= $4 OR (x.r + x.f > 0 AND c.expiry_mark > $5))$q$, VARIADIC v_t),
                ARRAY[quote_nullable(p_stream), quote_nullable(p_group_id), quote_nullable(v_locked),
                      quote_nullable(v_now), quote_nullable(v_expires), quote_nullable(v_reclaim),
                      quote_nullable(v_fresh)]);
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
        v_quota := rheo._quota(v_avail, p_max_count, CASE WHEN v_rotated THEN 0 ELSE (nextval('rheo.fetch_rotation') % v_k)::int END);
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
                EXECUTE format($q$
                    SELECT array_agg(x.ctid)
                      FROM (SELECT d.ctid FROM %4$s d
                             WHERE d.stream = $1 AND d.group_id = $2 AND d."partition" = $3
                             ORDER BY d.sequence
                             LIMIT 1) AS t
                      JOIN LATERAL (SELECT y.ctid FROM %4$s y
                                     WHERE y.stream = $1 AND y.ctid = t.ctid
                                       AND y.expires_at <= $4
                                       AND (y.state = 'pending' OR y.attempt < $5)
                                       FOR UPDATE SKIP LOCKED) AS x ON true$q$, VARIADIC v_t)
                   INTO v_tids
                  USING p_stream, p_group_id, v_p, v_now, p_max_attempts;
            ELSE
                EXECUTE format($q$
                    SELECT array_agg(x.ctid)
                      FROM (SELECT d.ctid FROM %4$s d
                             WHERE d.stream = $1 AND d.group_id = $2 AND d."partition" = $3
                               AND d.expires_at <= $4 AND (d.state = 'pending' OR ($7 AND d.attempt < $5))
                             ORDER BY d.sequence
                             LIMIT $6
                               FOR UPDATE SKIP LOCKED) AS x$q$, VARIADIC v_t)
                   INTO v_tids
                  USING p_stream, p_group_id, v_p, v_now, p_max_attempts, v_a, coalesce(v_p = ANY (v_expired), false);
            END IF;
            IF v_tids IS NOT NULL AND v_key THEN
                -- 'key': a delivery due behind an earlier one of its key not
                -- terminal is blocked again instead of leased; one behind a
                -- delivery not marked as having waiters wakes the key.
                EXECUTE format($q$
                    SELECT array_agg(x.tid) FILTER (WHERE b.state IS NOT NULL),
                           array_agg(x.key) FILTER (WHERE b.state <> 'blocked' AND NOT b.has_waiters)
                      FROM (SELECT d.ctid AS tid, d.sequence, d.key FROM %4$s d
                             WHERE d.stream = $1 AND d.ctid = ANY ($4)) AS x
                     CROSS JOIN LATERAL (SELECT y.state, y.has_waiters FROM %4$s y
                                          WHERE y.stream = $1 AND y.group_id::bigint = $2::bigint
                                            AND y."partition"::bigint = $3::bigint
                                            AND y.key = x.key AND y.sequence < x.sequence
                                          ORDER BY y.sequence DESC
                                          LIMIT 1) AS b$q$, VARIADIC v_t)
                   INTO v_ahead, v_keys
                  USING p_stream, p_group_id, v_p, v_tids;
                IF v_ahead IS NOT NULL THEN
                    EXECUTE format($q$
                        UPDATE %4$s AS d
                           SET state = 'blocked', lease_id = NULL, consumer_id = NULL, expires_at = 'infinity'
                         WHERE d.stream = $1 AND d.ctid = ANY ($2)$q$, VARIADIC v_t)
                      USING p_stream, v_ahead;
                    v_tids := ARRAY(SELECT t FROM unnest(v_tids) AS t WHERE t <> ALL (v_ahead));
                    IF cardinality(v_tids) = 0 THEN
                        v_tids := NULL;
                    END IF;
                    v_wakes_p := coalesce(v_wakes_p, '{}') || array_fill(v_p, ARRAY[coalesce(cardinality(v_keys), 0)]);
                    v_wakes_k := coalesce(v_wakes_k, '{}') || coalesce(v_keys, '{}');
                END IF;
            END IF;
            IF v_tids IS NOT NULL THEN
                EXECUTE format($q$
                    WITH reclaimed AS (
                        UPDATE %4$s AS d
                           SET state = 'leased', lease_id = rheo._lease_id($3, $4, d."partition", d.sequence),
                               consumer_id = $5, attempt = d.attempt + 1, leased_at = $6, expires_at = $7
                         WHERE d.stream = $1 AND d.ctid = ANY ($2)
                        RETURNING d.sequence, d.lease_id, d.attempt
                    )
                    SELECT array_agg(r.sequence ORDER BY r.sequence), array_agg(r.lease_id ORDER BY r.sequence),
                           array_agg(r.attempt ORDER BY r.sequence)
                      FROM reclaimed r$q$, VARIADIC v_t)
                   INTO v_sequences, v_leases, v_attempts
                  USING p_stream, v_tids, v_mark, v_nonce, v_consumer, v_now, v_expires;
                EXECUTE format($q$
                    SELECT array_agg(ROW(x.lease_id, x.lease_id::text, $1, $2, $3, x.attempt, $4, $5, e.id,
                                         e."partition", e.sequence, e.key, e.type, e.payload, e.metadata,
                                         e.ts)::rheo.lease)
                      FROM unnest($7, $8, $9) AS x(sequence, lease_id, attempt)
                     CROSS JOIN LATERAL (SELECT e.* FROM %1$s e
                                          WHERE e.stream = $1 AND e."partition" = $6 AND e.sequence = x.sequence) AS e$q$,
                               VARIADIC v_t)
                   INTO v_found
                  USING p_stream, p_group_name, v_consumer, v_now, v_expires, v_p, v_sequences, v_leases, v_attempts;
                v_rows := v_rows || coalesce(v_found, '{}');
            END IF;
        END IF;
        -- Then the new events from the cursor, which moves past them.
        v_left := v_quota[v_i] - v_a;
        CONTINUE WHEN v_left <= 0;
        IF v_key THEN
            -- 'key': the events past the cursor, leased or blocked, read in
            -- a window of twice the quota from the cursor, and again in one
            -- twice the last while a window read whole leases fewer than
            -- the quota, as in rheo.fetch; cut after the quota's last lease.
            v_size := 2 * v_left::bigint;
            LOOP
                EXECUTE format($q$
                    SELECT array_agg(z.sequence ORDER BY z.sequence), array_agg(z.blocked ORDER BY z.sequence),
                           array_agg(z.has_waiters ORDER BY z.sequence), array_agg(z.wake ORDER BY z.sequence),
                           array_agg(z.key ORDER BY z.sequence), max(z.n_read), max(z.n_leasable)
                      FROM (SELECT y.*,
                                   count(*) FILTER (WHERE NOT y.blocked) OVER (ORDER BY y.sequence) AS n_leased,
                                   count(*) FILTER (WHERE NOT y.blocked) OVER () AS n_leasable,
                                   count(*) OVER () AS n_read
                              FROM (SELECT e.sequence, e.key,
                                           e.key IS NOT NULL AND (e.rn > 1 OR b.state IS NOT NULL) AS blocked,
                                           e.key IS NOT NULL AND e.rn < e.cnt AS has_waiters,
                                           coalesce(b.state <> 'blocked' AND NOT b.has_waiters, false) AS wake
                                      FROM (SELECT r.*,
                                                   row_number() OVER (PARTITION BY r.key ORDER BY r.sequence) AS rn,
                                                   count(*) OVER (PARTITION BY r.key) AS cnt
                                              FROM (SELECT ev.sequence, ev.key FROM %1$s ev
                                                     WHERE ev.stream = $1 AND ev."partition" = $3
                                                       AND ev.sequence >= $4
                                                     ORDER BY ev.sequence
                                                     LIMIT $5) AS r) AS e
                                      LEFT JOIN LATERAL (SELECT x.state, x.has_waiters FROM %4$s x
                                                          WHERE x.stream = $1
                                                            AND x.group_id::bigint = $2::bigint
                                                            AND x."partition"::bigint = $3::bigint
                                                            AND x.key = e.key AND x.sequence < e.sequence
                                                            AND e.rn = 1
                                                          ORDER BY x.sequence DESC
                                                          LIMIT 1) AS b ON true) AS y) AS z
                     WHERE z.n_leased < $6 OR (z.n_leased = $6 AND NOT z.blocked)$q$, VARIADIC v_t)
                   INTO v_sequences, v_blocked, v_waiters, v_wake, v_keys, v_read, v_leasable
                  USING p_stream, p_group_id, v_p, v_next[v_i], v_size, v_left;
                EXIT WHEN v_sequences IS NULL OR NOT (v_read = v_size AND v_leasable < v_left);
                v_size := 2 * v_size;
            END LOOP;
            CONTINUE WHEN v_sequences IS NULL;
            -- The cursor passes the leased and the blocked events alike.
            EXECUTE format($q$
                INSERT INTO %4$s
                       (stream, group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at,
                        expires_at, ts, key, has_waiters)
                SELECT e.stream, $2, e."partition", e.sequence,
                       CASE WHEN x.blocked THEN 'blocked' ELSE 'leased' END,
                       CASE WHEN x.blocked THEN NULL
                            ELSE rheo._lease_id($4, $5, e."partition", e.sequence) END,
                       CASE WHEN x.blocked THEN NULL ELSE $6 END,
                       CASE WHEN x.blocked THEN 0 ELSE 1 END,
                       CASE WHEN x.blocked THEN NULL ELSE $7 END,
                       CASE WHEN x.blocked THEN 'infinity' ELSE $8 END,
                       e.ts, e.key, x.has_waiters
                  FROM unnest($9, $10, $11) AS x(sequence, blocked, has_waiters)
                  JOIN %1$s e ON e.stream = $1 AND e."partition" = $3 AND e.sequence = x.sequence$q$, VARIADIC v_t)
              USING p_stream, p_group_id, v_p, v_mark, v_nonce, v_consumer, v_now, v_expires,
                    v_sequences, v_blocked, v_waiters;
            EXECUTE format($q$
                UPDATE %3$s AS c SET next_sequence = $4
                 WHERE c.stream = $1 AND c.group_id = $2 AND c."partition" = $3$q$, VARIADIC v_t)
              USING p_stream, p_group_id, v_p, v_sequences[cardinality(v_sequences)] + 1;
            -- (An aggregate without rows is NULL: what was gathered stays.)
            SELECT coalesce(v_wakes_p, '{}') || coalesce(array_agg(v_p), '{}'),
                   coalesce(v_wakes_k, '{}') || coalesce(array_agg(x.key), '{}')
              INTO v_wakes_p, v_wakes_k
              FROM unnest(v_keys, v_wake) AS x(key, wake)
             WHERE x.wake;
            EXECUTE format($q$
                SELECT array_agg(ROW(rheo._lease_id($4, $5, e."partition", e.sequence),
                                     rheo._lease_id($4, $5, e."partition", e.sequence)::text,
                                     $1, $2, $6, 1, $7, $8, e.id, e."partition", e.sequence, e.key, e.type, e.payload,
                                     e.metadata, e.ts)::rheo.lease)
                  FROM unnest($9, $10) AS x(sequence, blocked)
                 CROSS JOIN LATERAL (SELECT e.* FROM %1$s e
                                      WHERE e.stream = $1 AND e."partition" = $3 AND e.sequence = x.sequence) AS e
                 WHERE NOT x.blocked$q$, VARIADIC v_t)
               INTO v_found
              USING p_stream, p_group_name, v_p, v_mark, v_nonce, v_consumer, v_now, v_expires, v_sequences, v_blocked;
            v_rows := v_rows || coalesce(v_found, '{}');
            CONTINUE;
        END IF;
        -- The events past the cursor are contiguous: the quota's are those
        -- from it, claimed for every partition at once after the loop.
        v_new_parts := v_new_parts || v_p;
        v_new_next := v_new_next || v_next[v_i];
        v_new_counts := v_new_counts || v_left;
    END LOOP;
    IF cardinality(v_new_parts) > 0 THEN
        EXECUTE rheo._prepared(format($q$
            INSERT INTO %4$s
                   (stream, group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at,
                    expires_at, ts)
            SELECT e.stream, $2::int, e."partition", e.sequence, 'leased',
                   rheo._lease_id($6::text, $7::text, e."partition", e.sequence),
                   $8::text, 1, $9::timestamptz, $10::timestamptz, e.ts
              FROM unnest($3::int[], $4::bigint[], $5::int[]) AS x(part, next_sequence, n)
             CROSS JOIN LATERAL (SELECT e.stream, e."partition", e.sequence, e.ts FROM %1$s e
                                  WHERE e.stream = $1 AND e."partition" = x.part AND e.sequence >= x.next_sequence
                                  ORDER BY e.sequence
                                  LIMIT x.n) AS e$q$, VARIADIC v_t),
                ARRAY[quote_nullable(p_stream), quote_nullable(p_group_id), quote_nullable(v_new_parts),
                      quote_nullable(v_new_next), quote_nullable(v_new_counts), quote_nullable(v_mark),
                      quote_nullable(v_nonce), quote_nullable(v_consumer), quote_nullable(v_now),
                      quote_nullable(v_expires)]);
        EXECUTE rheo._prepared(format($q$
            UPDATE %3$s AS c SET next_sequence = x.next_sequence + x.n
              FROM unnest($3::int[], $4::bigint[], $5::int[]) AS x(part, next_sequence, n)
             WHERE c.stream = $1 AND c.group_id = $2 AND c."partition" = x.part$q$, VARIADIC v_t),
                ARRAY[quote_nullable(p_stream), quote_nullable(p_group_id), quote_nullable(v_new_parts),
                      quote_nullable(v_new_next), quote_nullable(v_new_counts)]);
        EXECUTE rheo._prepared(format($q$
            SELECT array_agg(ROW(rheo._lease_id($4::text, $5::text, e."partition", e.sequence),
                                 rheo._lease_id($4::text, $5::text, e."partition", e.sequence)::text,
                                 $1::text, $2::text, $3::text, 1, $6::timestamptz, $7::timestamptz, e.id, e."partition",
                                 e.sequence, e.key, e.type, e.payload, e.metadata, e.ts)::rheo.lease)
              FROM unnest($8::int[], $9::bigint[], $10::int[]) AS x(part, next_sequence, n)
             CROSS JOIN LATERAL (SELECT e.* FROM %1$s e
                                  WHERE e.stream = $1 AND e."partition" = x.part AND e.sequence >= x.next_sequence
                                  ORDER BY e.sequence
                                  LIMIT x.n) AS e$q$, VARIADIC v_t),
                ARRAY[quote_nullable(p_stream), quote_nullable(p_group_name), quote_nullable(v_consumer),
                      quote_nullable(v_mark), quote_nullable(v_nonce), quote_nullable(v_now),
                      quote_nullable(v_expires), quote_nullable(v_new_parts), quote_nullable(v_new_next),
                      quote_nullable(v_new_counts)])
           INTO v_found;
        v_rows := v_rows || coalesce(v_found, '{}');
    END IF;
    -- The leases, in (partition, sequence) order: the deliveries due again
    -- of a partition come before its new events.
    RETURN QUERY SELECT r.* FROM unnest(v_rows) AS r ORDER BY r."partition", r.sequence;
    IF cardinality(v_wakes_p) > 0 THEN
        EXECUTE format($q$
            INSERT INTO %6$s (stream, group_id, "partition", key)
            SELECT DISTINCT $1, $2, w.part, w.key
              FROM unnest($3, $4) AS w(part, key)$q$, VARIADIC v_t)
          USING p_stream, p_group_id, v_wakes_p, v_wakes_k;
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._fetch_citus(text, text, int, int, text, int, text, int[], timestamptz, timestamptz)');
