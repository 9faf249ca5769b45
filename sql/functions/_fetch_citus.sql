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
--    generic plan only for the simplest statements).
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
BEGIN
    v_part := p_ordering = 'partition';
    v_key := p_ordering = 'key';
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
                               AND (d.state = 'pending' OR d.attempt < p_max_attempts)
                             ORDER BY d.expires_at
                             LIMIT p_max_count::bigint + 1) AS r) AS reclaim
              FROM rheo.cursors c
              JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
             WHERE c.stream = p_stream AND c.group_id = p_group_id AND c."partition" = ANY (v_scope)
               AND (c.next_sequence <= pt.high_watermark
                    OR EXISTS (SELECT 1 FROM rheo.deliveries d
                                WHERE d.stream = p_stream AND d.group_id = c.group_id AND d."partition" = c."partition"
                                  AND d.expires_at <= v_now)
                    OR (v_key AND EXISTS (SELECT 1 FROM rheo.key_wakeups w
                                           WHERE w.stream = p_stream AND w.group_id = c.group_id
                                             AND w."partition" = c."partition")))
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
         WHERE c.stream = p_stream AND c.group_id = p_group_id AND c."partition" = ANY (v_scope)
           AND (c.next_sequence <= pt.high_watermark
                OR EXISTS (SELECT 1 FROM rheo.deliveries d
                            WHERE d.stream = p_stream AND d.group_id = c.group_id AND d."partition" = c."partition"
                              AND d.expires_at <= v_now)
                OR (v_key AND EXISTS (SELECT 1 FROM rheo.key_wakeups w
                                       WHERE w.stream = p_stream AND w.group_id = c.group_id
                                         AND w."partition" = c."partition")));
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
                                 AND (d.state = 'pending' OR d.attempt < p_max_attempts)
                               ORDER BY d.expires_at
                               LIMIT p_max_count::bigint + 1) AS r)]
          INTO v_locked, v_next, v_fresh, v_reclaim
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         WHERE c.stream = p_stream AND c.group_id = p_group_id AND c."partition" = v_p
           FOR NO KEY UPDATE OF c;
        IF v_locked IS NULL THEN
            RETURN;
        END IF;
    END IF;

    -- Leases expired at the attempt limit are dead-lettered, as in
    -- rheo.fetch; the dead letters and wakeups by statements of their own.
    WITH due AS MATERIALIZED (
        SELECT x.ctid AS tid FROM rheo.deliveries x
         WHERE x.stream = p_stream AND x.group_id = p_group_id AND x."partition" = ANY (v_locked)
           AND x.expires_at <= v_now
           AND x.state = 'leased' AND x.attempt >= p_max_attempts
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
        SELECT p_stream, p_group_id, x.part, x.sequence, x.attempt, 'lease_expired', v_now
          FROM unnest(v_parts, v_sequences, v_attempts) AS x(part, sequence, attempt);
        INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
        SELECT p_stream, p_group_id, x.part, x.key
          FROM unnest(v_parts, v_keys, v_waiters) AS x(part, key, has_waiters)
         WHERE x.has_waiters;
    END IF;

    IF v_key THEN
        -- 'key': the wakeups of the partitions locked, as in rheo.fetch,
        -- key by key: a blocked earliest delivery is released (pending, due
        -- now), one leased or pending without waiters is marked as having
        -- some (or, held by a settle, its wakeup kept for the next fetch).
        WITH taken AS (
            DELETE FROM rheo.key_wakeups AS w
             WHERE w.stream = p_stream AND w.group_id = p_group_id AND w."partition" = ANY (v_locked)
            RETURNING w."partition", w.key
        )
        SELECT array_agg(t.part ORDER BY t.part, t.key), array_agg(t.key ORDER BY t.part, t.key)
          INTO v_wparts, v_wkeys
          FROM (SELECT DISTINCT x."partition" AS part, x.key FROM taken x) AS t;
        v_released := array_fill(0, ARRAY[cardinality(v_locked)]);
        FOR v_i IN 1 .. coalesce(cardinality(v_wparts), 0) LOOP
            v_wp := v_wparts[v_i];
            v_wk := v_wkeys[v_i];
            SELECT x.ctid, x.state, x.has_waiters INTO v_tid, v_state, v_has
              FROM rheo.deliveries x
             WHERE x.stream = p_stream AND x.group_id::bigint = p_group_id::bigint
               AND x."partition"::bigint = v_wp::bigint AND x.key = v_wk
             ORDER BY x.sequence
             LIMIT 1;
            CONTINUE WHEN NOT FOUND;
            IF v_state = 'blocked' THEN
                SELECT EXISTS (SELECT 1 FROM rheo.deliveries y
                                WHERE y.stream = p_stream AND y.group_id::bigint = p_group_id::bigint
                                  AND y."partition"::bigint = v_wp::bigint AND y.key = v_wk
                                  AND y.sequence > (SELECT z.sequence FROM rheo.deliveries z
                                                     WHERE z.stream = p_stream AND z.ctid = v_tid))
                  INTO v_has;
                UPDATE rheo.deliveries AS d
                   SET state = 'pending', expires_at = v_now, has_waiters = v_has
                 WHERE d.stream = p_stream AND d.ctid = v_tid;
                IF FOUND THEN
                    v_k := array_position(v_locked, v_wp);
                    v_released[v_k] := v_released[v_k] + 1;
                END IF;
            ELSIF NOT v_has THEN
                PERFORM FROM rheo.deliveries x WHERE x.stream = p_stream AND x.ctid = v_tid FOR UPDATE SKIP LOCKED;
                IF FOUND THEN
                    UPDATE rheo.deliveries AS d SET has_waiters = true WHERE d.stream = p_stream AND d.ctid = v_tid;
                ELSE
                    INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
                    VALUES (p_stream, p_group_id, v_wp, v_wk);
                END IF;
            END IF;
        END LOOP;
        SELECT array_agg(least(p_max_count::bigint + 1, x.r + x.n)::int ORDER BY x.ord) INTO v_reclaim
          FROM unnest(v_reclaim, v_released) WITH ORDINALITY AS x(r, n, ord);
    ELSIF v_part THEN
        -- 'partition': the earliest delivery in progress when due, else
        -- one new event (rheo._turn written out).
        SELECT array_agg(CASE WHEN h.sequence IS NULL THEN least(1, x.f) ELSE 0 END ORDER BY x.ord),
               array_agg(CASE WHEN h.expires_at <= v_now AND (h.state = 'pending' OR h.attempt < p_max_attempts)
                              THEN 1 ELSE 0 END ORDER BY x.ord)
          INTO v_fresh, v_reclaim
          FROM unnest(v_locked, v_fresh) WITH ORDINALITY AS x(part, f, ord)
          LEFT JOIN LATERAL (SELECT d.sequence, d.state, d.attempt, d.expires_at FROM rheo.deliveries d
                              WHERE d.stream = p_stream AND d.group_id = p_group_id AND d."partition" = x.part
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
                         WHERE d.stream = p_stream AND d.group_id = p_group_id AND d."partition" = v_p
                         ORDER BY d.sequence
                         LIMIT 1) AS t
                  JOIN LATERAL (SELECT y.ctid FROM rheo.deliveries y
                                 WHERE y.stream = p_stream AND y.ctid = t.ctid
                                   AND y.expires_at <= v_now
                                   AND (y.state = 'pending' OR y.attempt < p_max_attempts)
                                   FOR UPDATE SKIP LOCKED) AS x ON true;
            ELSE
                SELECT array_agg(x.ctid) INTO v_tids
                  FROM (SELECT d.ctid FROM rheo.deliveries d
                         WHERE d.stream = p_stream AND d.group_id = p_group_id AND d."partition" = v_p
                           AND d.expires_at <= v_now AND (d.state = 'pending' OR d.attempt < p_max_attempts)
                         ORDER BY d.sequence
                         LIMIT v_a
                           FOR UPDATE SKIP LOCKED) AS x;
            END IF;
            IF v_tids IS NOT NULL AND v_key THEN
                -- 'key': a delivery due behind an earlier one of its key not
                -- terminal is blocked again instead of leased; one behind a
                -- delivery not marked as having waiters wakes the key.
                SELECT array_agg(x.tid) FILTER (WHERE b.state IS NOT NULL),
                       array_agg(x.key) FILTER (WHERE b.state <> 'blocked' AND NOT b.has_waiters)
                  INTO v_ahead, v_keys
                  FROM (SELECT d.ctid AS tid, d.sequence, d.key FROM rheo.deliveries d
                         WHERE d.stream = p_stream AND d.ctid = ANY (v_tids)) AS x
                 CROSS JOIN LATERAL (SELECT y.state, y.has_waiters FROM rheo.deliveries y
                                      WHERE y.stream = p_stream AND y.group_id::bigint = p_group_id::bigint
                                        AND y."partition"::bigint = v_p::bigint
                                        AND y.key = x.key AND y.sequence < x.sequence
                                      ORDER BY y.sequence DESC
                                      LIMIT 1) AS b;
                IF v_ahead IS NOT NULL THEN
                    UPDATE rheo.deliveries AS d
                       SET state = 'blocked', lease_id = NULL, consumer_id = NULL, expires_at = 'infinity'
                     WHERE d.stream = p_stream AND d.ctid = ANY (v_ahead);
                    v_tids := ARRAY(SELECT t FROM unnest(v_tids) AS t WHERE t <> ALL (v_ahead));
                    IF cardinality(v_tids) = 0 THEN
                        v_tids := NULL;
                    END IF;
                    v_wakes_p := coalesce(v_wakes_p, '{}') || array_fill(v_p, ARRAY[coalesce(cardinality(v_keys), 0)]);
                    v_wakes_k := coalesce(v_wakes_k, '{}') || coalesce(v_keys, '{}');
                END IF;
            END IF;
            IF v_tids IS NOT NULL THEN
                WITH reclaimed AS (
                    UPDATE rheo.deliveries AS d
                       SET state = 'leased', lease_id = rheo._lease_id(v_mark, v_nonce, d."partition", d.sequence),
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
        IF v_key THEN
            -- 'key': the events past the cursor, leased or blocked, read in
            -- a window of twice the quota from the cursor, and again in one
            -- twice the last while a window read whole leases fewer than
            -- the quota, as in rheo.fetch; cut after the quota's last lease.
            v_size := 2 * v_left::bigint;
            LOOP
                SELECT array_agg(z.sequence ORDER BY z.sequence), array_agg(z.blocked ORDER BY z.sequence),
                       array_agg(z.has_waiters ORDER BY z.sequence), array_agg(z.wake ORDER BY z.sequence),
                       array_agg(z.key ORDER BY z.sequence), max(z.n_read), max(z.n_leasable)
                  INTO v_sequences, v_blocked, v_waiters, v_wake, v_keys, v_read, v_leasable
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
                                          FROM (SELECT ev.sequence, ev.key FROM rheo.events ev
                                                 WHERE ev.stream = p_stream AND ev."partition" = v_p
                                                   AND ev.sequence >= v_next[v_i]
                                                 ORDER BY ev.sequence
                                                 LIMIT v_size) AS r) AS e
                                  LEFT JOIN LATERAL (SELECT x.state, x.has_waiters FROM rheo.deliveries x
                                                      WHERE x.stream = p_stream
                                                        AND x.group_id::bigint = p_group_id::bigint
                                                        AND x."partition"::bigint = v_p::bigint
                                                        AND x.key = e.key AND x.sequence < e.sequence
                                                        AND e.rn = 1
                                                      ORDER BY x.sequence DESC
                                                      LIMIT 1) AS b ON true) AS y) AS z
                 WHERE z.n_leased < v_left OR (z.n_leased = v_left AND NOT z.blocked);
                EXIT WHEN v_sequences IS NULL OR NOT (v_read = v_size AND v_leasable < v_left);
                v_size := 2 * v_size;
            END LOOP;
            CONTINUE WHEN v_sequences IS NULL;
            -- The cursor passes the leased and the blocked events alike.
            INSERT INTO rheo.deliveries
                   (stream, group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at,
                    ts, key, has_waiters)
            SELECT e.stream, p_group_id, e."partition", e.sequence,
                   CASE WHEN x.blocked THEN 'blocked' ELSE 'leased' END,
                   CASE WHEN x.blocked THEN NULL
                        ELSE rheo._lease_id(v_mark, v_nonce, e."partition", e.sequence) END,
                   CASE WHEN x.blocked THEN NULL ELSE v_consumer END,
                   CASE WHEN x.blocked THEN 0 ELSE 1 END,
                   CASE WHEN x.blocked THEN NULL ELSE v_now END,
                   CASE WHEN x.blocked THEN 'infinity' ELSE v_expires END,
                   e.ts, e.key, x.has_waiters
              FROM unnest(v_sequences, v_blocked, v_waiters) AS x(sequence, blocked, has_waiters)
              JOIN rheo.events e ON e.stream = p_stream AND e."partition" = v_p AND e.sequence = x.sequence;
            UPDATE rheo.cursors AS c SET next_sequence = v_sequences[cardinality(v_sequences)] + 1
             WHERE c.stream = p_stream AND c.group_id = p_group_id AND c."partition" = v_p;
            SELECT coalesce(v_wakes_p, '{}') || array_agg(v_p), coalesce(v_wakes_k, '{}') || array_agg(x.key)
              INTO v_wakes_p, v_wakes_k
              FROM unnest(v_keys, v_wake) AS x(key, wake)
             WHERE x.wake
            HAVING count(*) > 0;
            RETURN QUERY
            SELECT rheo._lease_id(v_mark, v_nonce, e."partition", e.sequence),
                   rheo._lease_id(v_mark, v_nonce, e."partition", e.sequence)::text,
                   p_stream, p_group_name, v_consumer, 1,
                   v_now, v_expires, e.id, e."partition", e.sequence, e.key, e.type, e.payload, e.metadata, e.ts
              FROM unnest(v_sequences, v_blocked) AS x(sequence, blocked)
              JOIN rheo.events e ON e.stream = p_stream AND e."partition" = v_p AND e.sequence = x.sequence
             WHERE NOT x.blocked
             ORDER BY e.sequence;
            CONTINUE;
        END IF;
        INSERT INTO rheo.deliveries
               (stream, group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at, ts)
        SELECT e.stream, p_group_id, e."partition", e.sequence, 'leased',
               rheo._lease_id(v_mark, v_nonce, e."partition", e.sequence),
               v_consumer, 1, v_now, v_expires, e.ts
          FROM rheo.events e
         WHERE e.stream = p_stream AND e."partition" = v_p AND e.sequence >= v_next[v_i]
         ORDER BY e.sequence
         LIMIT v_left;
        GET DIAGNOSTICS v_left = ROW_COUNT;
        CONTINUE WHEN v_left = 0;
        UPDATE rheo.cursors AS c SET next_sequence = v_next[v_i] + v_left
         WHERE c.stream = p_stream AND c.group_id = p_group_id AND c."partition" = v_p;
        RETURN QUERY
        SELECT rheo._lease_id(v_mark, v_nonce, e."partition", e.sequence),
               rheo._lease_id(v_mark, v_nonce, e."partition", e.sequence)::text,
               p_stream, p_group_name, v_consumer, 1,
               v_now, v_expires, e.id, e."partition", e.sequence, e.key, e.type, e.payload, e.metadata, e.ts
          FROM rheo.events e
         WHERE e.stream = p_stream AND e."partition" = v_p
           AND e.sequence >= v_next[v_i] AND e.sequence < v_next[v_i] + v_left
         ORDER BY e.sequence;
    END LOOP;
    IF v_wakes_p IS NOT NULL THEN
        INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
        SELECT DISTINCT p_stream, p_group_id, w.part, w.key
          FROM unnest(v_wakes_p, v_wakes_k) AS w(part, key);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._fetch_citus(text, text, int, int, text, int, text, int[], timestamptz, timestamptz)');
