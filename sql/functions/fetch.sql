-- Claims up to max_count events of a group for one consumer.
--
-- Claimable in a partition: deliveries whose retry delay has passed or
-- whose lease expired (below the attempt limit), then events past the
-- cursor. The cost is O(leases returned + deliveries due now), never
-- O(history) nor O(leases in flight): new events come from an index range
-- scan from the cursor, deliveries due from the index of their due time.
--
-- Concurrent fetchers of one group lock the cursor rows of the partitions
-- they claim from with SKIP LOCKED, so they spread over partitions instead
-- of queueing; only a fetcher that could lock no partition with work waits
-- for one, holding no other lock. The locks are FOR NO KEY UPDATE, so
-- that a prune, which holds a partition's cursors FOR KEY SHARE, does not
-- keep fetches out of it; replay, reset_group and drop lock them FOR
-- UPDATE and do. The locks last until the calling transaction ends.
--
-- The group's ordering (reference §3.3) changes what is claimable: under 'key'
-- an event waits, stored once as a blocked delivery, while an earlier
-- one of its key is not terminal, and settles leave wakeups that release
-- it; under 'partition' a partition offers its earliest delivery in
-- progress, or else one new event. Neither reads the events blocked, so
-- the cost stays as above (docs/design.md, "Ordering").
CREATE OR REPLACE FUNCTION rheo.fetch(stream text, group_name text, max_count int DEFAULT 10,
                                      consumer_id text DEFAULT NULL, lease_ms int DEFAULT 30000,
                                      partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS SETOF rheo.lease
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Every statement probes an index. A table scan of deliveries would read
-- every deleted row not yet vacuumed, and the planner picks one when
-- statistics are missing or stale (a new table has none); generic plans
-- are planned once per session and do not depend on the values. A generic
-- plan estimates its LIMITs at a tenth of the table, so on a large log its
-- cost passes jit_above_cost, and JIT compilation, redone at every call,
-- took 29 ms of a 32 ms fetch on a 10M-event stream: no JIT.
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
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
    v_total       int;
    v_key         boolean;
    v_part        boolean;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    v_key := v_group.ordering = 'key';
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
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    IF cardinality(v_scope) = 0 THEN
        RETURN;
    END IF;

    v_now := coalesce(p_clock, now());
    v_expires := v_now + make_interval(secs => p_lease_ms / 1000.0);
    v_consumer := coalesce(p_consumer_id, 'consumer-' || gen_random_uuid());
    -- On Citus, the claim in statements Citus can route (rheo._fetch_citus).
    -- A constant false here: the single server pays nothing for it.
    IF rheo._distributed() THEN
        RETURN QUERY SELECT * FROM rheo._fetch_citus(p_stream, p_group_name, v_group.group_id, v_group.max_attempts,
                                                     v_group.ordering, p_max_count, v_consumer, v_scope, v_now,
                                                     v_expires);
        RETURN;
    END IF;

    -- Lock the cursor rows of the partitions this fetch claims from, and
    -- read what each can give: events past the cursor (rheo._fresh), and
    -- deliveries due again (rheo._due_count), each capped at max_count.
    --
    -- The candidates are the partitions in scope with work
    -- (rheo._has_work; under 'partition' ordering, not those whose
    -- delivery in progress is not due: they have nothing to give). When
    -- they are more than max_count, they are taken in rotation order,
    -- from a rotating candidate (rheo.fetch_rotation), and the locking
    -- read stops once it has locked max_count of them: one round of the
    -- deal below needs no more, and competing fetchers, which start from
    -- different candidates and skip what another holds (SKIP LOCKED),
    -- claim side by side from different partitions instead of taking
    -- turns. A partition with a lease expired at the attempt limit is
    -- locked whatever its place, so that this fetch dead-letters it
    -- (below); it is looked for only among the partitions the fetch
    -- might not lock otherwise. After a wait (below), the rotation starts
    -- at the partition waited for, and goes past it only when its events
    -- cannot fill max_count: a fetch that found every partition held
    -- deals over the one it then holds, so that competing fetchers that
    -- waited keep to different partitions rather than each taking all
    -- (docs/decisions.md, "Claims").
    --
    -- A row changed by a fetch that committed meanwhile is read again
    -- after it is locked. A cursor is read as at least the low watermark:
    -- pruned events are terminal for every group, and new events are
    -- read from there. In 'key' mode, keys with a wakeup are work too
    -- (below). The helpers are inlined: the plan is that of the
    -- expressions they name. When nothing could be locked, the statement
    -- also gives the candidates, for the wait below.
    v_had_xid := txid_current_if_assigned() IS NOT NULL;
    LOOP
        WITH work AS MATERIALIZED (
            -- spent: a lease expired at the attempt limit, looked for only
            -- when the fetch might not lock the partition otherwise (more
            -- candidates than max_count, or no candidate). Spent
            -- partitions are locked first and beyond max_count, so one
            -- whose only work that lease is takes no place of the others.
            SELECT r.part, r.claim, r.k, r.ord, r.next_sequence, r.low_watermark, r.high_watermark,
                   (NOT r.claim OR r.k > p_max_count) AND r.expiry_mark <= v_now
                   AND EXISTS (SELECT 1 FROM rheo.deliveries x
                                WHERE x.group_id = v_group.group_id AND x."partition" = r.part
                                  AND x.expires_at <= v_now
                                  AND x.state = 'leased' AND x.attempt >= v_group.max_attempts) AS spent
              FROM (SELECT w.part, w.claim, w.k, w.next_sequence, w.low_watermark, w.high_watermark, w.expiry_mark,
                           CASE WHEN NOT w.claim THEN w.k + w.rn  -- after the candidates, in partition order
                                WHEN v_first IS NULL AND w.k <= p_max_count THEN w.rn
                                ELSE (w.rn + w.k - coalesce(w.before_first, (SELECT nextval('rheo.fetch_rotation'))) % w.k)
                                     % w.k
                           END AS ord
                      FROM (SELECT v.part, v.claim, v.next_sequence, v.low_watermark, v.high_watermark, v.expiry_mark,
                                   row_number() OVER (PARTITION BY v.claim ORDER BY v.part) - 1 AS rn,
                                   count(*) FILTER (WHERE v.claim) OVER () AS k,
                                   CASE WHEN v_first IS NOT NULL
                                        THEN count(*) FILTER (WHERE v.claim AND v.part < v_first) OVER () END
                                       AS before_first
                              FROM (SELECT c."partition" AS part, greatest(c.next_sequence, pt.low_watermark) AS next_sequence,
                                           pt.low_watermark, pt.high_watermark, c.expiry_mark,
                                           NOT (v_part AND EXISTS (SELECT 1 FROM rheo._turn(c.group_id, c."partition") AS t
                                                                    WHERE t.expires_at > v_now)) AS claim
                                      FROM rheo.cursors c
                                      JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
                                     CROSS JOIN LATERAL rheo._has_work(c.group_id, c."partition", c.next_sequence,
                                                                       pt.high_watermark, v_now, v_key, c.expiry_mark) AS h
                                     WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
                                    OFFSET 0) AS v) AS w) AS r  -- OFFSET 0: claim computed once a row, not once a window
        )
        SELECT array_agg(l.part ORDER BY l.ord), array_agg(l.next_sequence ORDER BY l.ord),
               array_agg(rheo._fresh(l.next_sequence, l.high_watermark, p_max_count) ORDER BY l.ord),
               array_agg((SELECT n FROM rheo._due_count(v_group.group_id, l.part, v_now, v_group.max_attempts,
                                                        p_max_count::bigint + 1, l.expiry_mark <= v_now) AS n)
                         ORDER BY l.ord),
               array_agg(l.part ORDER BY l.ord) FILTER (WHERE l.expiry_mark <= v_now),
               bool_or(l.k > p_max_count OR v_first IS NOT NULL),
               CASE WHEN count(*) = 0 THEN (SELECT array_agg(x.part ORDER BY x.part) FROM work x WHERE x.claim) END
          INTO v_locked, v_next, v_fresh, v_reclaim, v_expired, v_rotated, v_candidates
          FROM (SELECT c."partition" AS part, w.ord, w.k, greatest(c.next_sequence, w.low_watermark) AS next_sequence,
                       w.high_watermark, c.expiry_mark
                  FROM work w
                  JOIN rheo.cursors c ON c.group_id = v_group.group_id AND c."partition" = w.part
                 WHERE w.claim OR w.spent
                 ORDER BY w.spent DESC, w.ord
                 LIMIT (SELECT CASE WHEN bool_or(x.part = v_first AND x.claim
                                                 AND x.high_watermark - x.next_sequence + 1 >= p_max_count)
                                    THEN 1 ELSE p_max_count END
                               + count(*) FILTER (WHERE x.spent)
                          FROM work x)
                   FOR NO KEY UPDATE OF c SKIP LOCKED) AS l;
        EXIT WHEN v_locked IS NOT NULL OR v_first IS NOT NULL OR p_max_count = 0;
        -- Every candidate, if any, is being claimed by another fetcher (or
        -- replayed or reset): wait for one rather than report nothing,
        -- then lock it, and what else is free when it cannot fill
        -- max_count, as above, so that the wait ends in a full fetch.
        -- This is the only wait of a fetch, and it waits only while its
        -- transaction holds no row lock, so it cannot close a cycle of
        -- waits (docs/design.md, "Locks"); after
        -- it, the locking read skips what it cannot lock at once. A
        -- transaction that had an id before the locking read may hold
        -- row locks (its caller's): it reports nothing instead, as when
        -- there is no work. The read itself locked nothing: it returns
        -- every row it locks, as a row changed meanwhile is checked again
        -- only on its partition, which no update changes. (Its id is not
        -- asked after the read: nextval, above, can assign one.)
        IF v_candidates IS NULL OR v_had_xid THEN
            RETURN;
        END IF;
        v_first := v_candidates[1 + (nextval('rheo.fetch_rotation') % cardinality(v_candidates))::int];
        PERFORM FROM rheo.cursors c
          WHERE c.group_id = v_group.group_id AND c."partition" = v_first
            FOR NO KEY UPDATE OF c;
        IF NOT FOUND THEN  -- the group was dropped while this fetch waited
            RETURN;
        END IF;
    END LOOP;
    IF v_locked IS NULL THEN
        RETURN;
    END IF;

    -- A lease that expired at the attempt limit is dead-lettered rather
    -- than leased again, so a handler that always crashes cannot loop.
    -- Only in the partitions locked above whose expiry mark has passed
    -- (below it, no lease has expired): one whose cursor another
    -- fetcher holds is that fetcher's to clear, and one that a replay or
    -- reset holds, theirs. Delivery rows are taken with SKIP LOCKED here
    -- and below: a row locked by a settle in progress is that settle's to
    -- finish, and a fetch never waits for one. The rows found are then
    -- deleted by their physical address (ctid), so that they are looked
    -- up once, not once per row by a join. A dead letter is terminal: one
    -- with later events of its key blocked behind it leaves a wakeup of
    -- the key, which the 'key' mode takes below, within this fetch.
    -- Skipped whole when no mark has passed: the index scan would walk
    -- the group's entries due by now, whatever the partitions.
    IF v_expired IS NOT NULL THEN
        WITH due AS MATERIALIZED (
            SELECT x.ctid AS tid FROM rheo.deliveries x
             WHERE x.group_id = v_group.group_id AND x."partition" = ANY (v_expired)
               AND x.expires_at <= v_now
               AND x.state = 'leased' AND x.attempt >= v_group.max_attempts
               FOR UPDATE SKIP LOCKED
        ), expired AS (
            DELETE FROM rheo.deliveries AS d
             WHERE d.ctid = ANY (ARRAY(SELECT due.tid FROM due))
            RETURNING d."partition", d.sequence, d.attempt, d.key, d.has_waiters
        ), woken AS (
            INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
            SELECT p_stream, v_group.group_id, x."partition", x.key FROM expired x WHERE x.has_waiters
        )
        INSERT INTO rheo.dead_letters (stream, group_id, "partition", sequence, attempt, reason, dead_lettered_at)
        SELECT p_stream, v_group.group_id, x."partition", x.sequence, x.attempt, 'lease_expired', v_now
          FROM expired x;
    END IF;

    IF v_key THEN
        -- Every probe of a key's deliveries names the group and the
        -- partition as group_id::bigint and "partition"::bigint, the
        -- expressions of deliveries_key_idx, which the primary key cannot
        -- match: so the plan, generic and maybe made on an empty table,
        -- cannot take the primary key and filter on the key, which would
        -- read the events blocked behind a key.
        --
        -- 'key': take the wakeups of the partitions locked, and look at
        -- each key's earliest delivery not terminal. Blocked: its turn has
        -- come; it becomes pending, due now, and is claimed below like a
        -- retry (it keeps waiters when later ones of its key remain).
        -- Leased or pending without waiters: it is marked as having some,
        -- so that its settle wakes the key; when a settle holds it (SKIP
        -- LOCKED), the wakeup is kept for the next fetch, which sees how
        -- that settle ended. With waiters already, or no delivery left,
        -- the wakeup has done its work. The cost follows the wakeups (one
        -- per settle of a key's earliest delivery, at most), not the
        -- events blocked.
        WITH taken AS (
            DELETE FROM rheo.key_wakeups AS w
             WHERE w.group_id = v_group.group_id AND w."partition" = ANY (v_locked)
            RETURNING w."partition", w.key
        ), earliest AS MATERIALIZED (
            SELECT k.part, k.key, f.tid, f.state, f.has_waiters
              FROM (SELECT DISTINCT t."partition" AS part, t.key FROM taken t) AS k
             CROSS JOIN LATERAL (SELECT x.ctid AS tid, x.state, x.has_waiters FROM rheo.deliveries x
                                  WHERE x.group_id::bigint = v_group.group_id::bigint AND x."partition"::bigint = k.part::bigint
                                    AND x.key = k.key
                                  ORDER BY x.sequence
                                  LIMIT 1) AS f
        ), marking AS MATERIALIZED (
            SELECT x.ctid AS tid FROM rheo.deliveries x
             WHERE x.ctid = ANY (ARRAY(SELECT f.tid FROM earliest f
                                        WHERE f.state <> 'blocked' AND NOT f.has_waiters))
               FOR UPDATE SKIP LOCKED
        ), marked AS (
            UPDATE rheo.deliveries AS d SET has_waiters = true
             WHERE d.ctid = ANY (ARRAY(SELECT m.tid FROM marking m))
        ), kept AS (
            INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
            SELECT p_stream, v_group.group_id, f.part, f.key FROM earliest f
             WHERE f.state <> 'blocked' AND NOT f.has_waiters
               AND f.tid <> ALL (ARRAY(SELECT m.tid FROM marking m))
        ), released AS (
            UPDATE rheo.deliveries AS d
               SET state = 'pending', expires_at = v_now,
                   has_waiters = EXISTS (SELECT 1 FROM rheo.deliveries y
                                          WHERE y.group_id::bigint = d.group_id::bigint AND y."partition"::bigint = d."partition"::bigint
                                            AND y.key = d.key AND y.sequence > d.sequence)
             WHERE d.ctid = ANY (ARRAY(SELECT f.tid FROM earliest f WHERE f.state = 'blocked'))
            RETURNING d."partition"
        )
        -- The released deliveries are due now: count them with the others.
        SELECT array_agg(least(p_max_count::bigint + 1, x.r + coalesce(n.released, 0))::int ORDER BY x.ord)
          INTO v_reclaim
          FROM unnest(v_locked, v_reclaim) WITH ORDINALITY AS x(part, r, ord)
          LEFT JOIN (SELECT r."partition" AS part, count(*) AS released
                       FROM released r GROUP BY r."partition") AS n ON n.part = x.part;
    ELSIF v_part THEN
        -- 'partition': a partition offers its earliest delivery not
        -- terminal, when it is due, and else, when it has none, the next
        -- event. Counted after the dead letters above, so that one made
        -- on expiry lets the next in within this fetch.
        SELECT array_agg(CASE WHEN h.sequence IS NULL THEN least(1, x.f) ELSE 0 END ORDER BY x.ord),
               array_agg(CASE WHEN h.expires_at <= v_now AND (h.state = 'pending' OR h.attempt < v_group.max_attempts)
                              THEN 1 ELSE 0 END ORDER BY x.ord)
          INTO v_fresh, v_reclaim
          FROM unnest(v_locked, v_fresh) WITH ORDINALITY AS x(part, f, ord)
          LEFT JOIN LATERAL rheo._turn(v_group.group_id, x.part) AS h ON true;
    END IF;
    -- The expiry marks of the partitions locked (docs/design.md, "Due
    -- times"): where the mark has passed (v_expired), it is moved up to
    -- the earliest expiry of the leases in flight, found by the index of
    -- due times (an expired one left behind keeps it passed, so that the
    -- next fetch looks again), or to 'infinity' when there is none; and it
    -- is brought down to the expiry of the leases this fetch makes, in the
    -- partitions it may lease from, where it is later. After the dead
    -- letters and the ordering's steps above, which change what each
    -- partition gives. Only a fetch holding the cursor row writes it, or a
    -- renew that holds it (rheo.renew), so no write is lost; most fetches
    -- write nothing here.
    UPDATE rheo.cursors AS c
       SET expiry_mark = least(CASE WHEN x.r + x.f > 0 THEN v_expires ELSE 'infinity' END,
                               CASE WHEN c.expiry_mark <= v_now
                                    THEN coalesce((SELECT d.expires_at FROM rheo.deliveries d
                                                    WHERE d.group_id = c.group_id AND d."partition" = c."partition"
                                                      AND d.state = 'leased' AND d.expires_at < 'infinity'
                                                    ORDER BY d.expires_at
                                                    LIMIT 1), 'infinity')
                                    ELSE c.expiry_mark END)
      FROM unnest(v_locked, v_reclaim, v_fresh) AS x(part, r, f)
     WHERE c.group_id = v_group.group_id AND c."partition" = x.part
       AND (c.expiry_mark <= v_now OR (x.r + x.f > 0 AND c.expiry_mark > v_expires));
    IF p_max_count = 0 THEN
        RETURN;
    END IF;

    -- Quotas, as if dealt round-robin, one lease per partition per round
    -- from a rotating starting partition, until max_count or no work is
    -- left (rheo._quota). The partitions are in the rotation's order when
    -- the locking read rotated them, from its start; else in partition
    -- order, and the start moves only when there is more work than
    -- max_count. The helper is called only then.
    v_k := cardinality(v_locked);
    SELECT array_agg(least(p_max_count, x.r + x.f) ORDER BY x.ord) INTO v_avail
      FROM unnest(v_reclaim, v_fresh) WITH ORDINALITY AS x(r, f, ord);
    SELECT sum(a) INTO v_total FROM unnest(v_avail) AS a;
    IF v_total <= p_max_count THEN
        v_quota := v_avail;
    ELSE
        v_quota := rheo._quota(v_avail, p_max_count,
                               CASE WHEN v_rotated THEN 0 ELSE (nextval('rheo.fetch_rotation') % v_k)::int END);
    END IF;

    -- Claim every partition's quota in one statement: deliveries due
    -- again first (attempt + 1, a new lease id), then new events by an
    -- index range scan from the cursor, which moves past them. Within a
    -- partition the deliveries due again all precede the cursor, so the
    -- result is in (partition, sequence) order. A delivery row locked by
    -- a settle in progress is that settle's to finish (SKIP LOCKED), so
    -- the claim may return fewer leases than planned. The deliveries due
    -- again are updated by ctid, as above.
    IF v_key THEN
        -- The same claim under 'key' (docs/design.md, "Ordering"): a due
        -- delivery behind an earlier one of its key in progress is
        -- blocked again instead of leased, and new events past the cursor
        -- are leased or stored as blocked. A statement of its own, so
        -- that the claims of the other orderings run the plan they ran
        -- before orderings existed: one statement for all, with these
        -- steps gated off, still initialises their plan nodes at every
        -- fetch, which cost about 0.5M instructions a fetch (9% of a
        -- fetch of 100 leases, 35% of a fetch of one).
        RETURN QUERY
        WITH RECURSIVE plan AS (
            SELECT * FROM rheo._plan(v_locked, v_next, v_quota, v_reclaim, p_max_count)
        ), picked AS MATERIALIZED (
            -- The deliveries due again with the lowest sequences (rheo._due),
            -- locked with SKIP LOCKED, and the conditions checked again on
            -- the row as it is once locked (by a TID scan: see below).
            SELECT d.ctid AS tid, d."partition" AS part, d.sequence, d.key FROM rheo.deliveries d
             WHERE d.ctid = ANY (ARRAY(SELECT due.tid FROM plan p
                                        CROSS JOIN LATERAL rheo._due(v_group.group_id, p.part, v_now,
                                                                     v_group.max_attempts, p_max_count,
                                                                     p.reclaim, p.due_known,
                                                                     coalesce(p.part = ANY (v_expired), false)) AS due(tid)
                                        WHERE p.reclaim > 0))
               AND (d.expires_at <= v_now) IS TRUE
               AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
               FOR UPDATE SKIP LOCKED
        ), ahead AS MATERIALIZED (
            -- 'key': the picked deliveries with an earlier delivery of their
            -- key not terminal (a replay, or leases from before the ordering
            -- was set, can leave such), and the nearest such one. They are
            -- blocked instead of leased.
            SELECT pk.tid, pk.part, pk.key, b.state, b.has_waiters
              FROM picked pk
             CROSS JOIN LATERAL (SELECT x.state, x.has_waiters FROM rheo.deliveries x
                                  WHERE x.group_id::bigint = v_group.group_id::bigint AND x."partition"::bigint = pk.part::bigint
                                    AND x.key = pk.key AND x.sequence < pk.sequence
                                  ORDER BY x.sequence DESC
                                  LIMIT 1) AS b
        ), reclaimed AS (
            UPDATE rheo.deliveries AS d
               SET state = 'leased', lease_id = gen_random_uuid(), consumer_id = v_consumer,
                   attempt = d.attempt + 1, leased_at = v_now, expires_at = v_expires
             WHERE d.ctid = ANY (ARRAY(SELECT pk.tid FROM picked pk
                                        WHERE NOT EXISTS (SELECT 1 FROM ahead a WHERE a.tid = pk.tid)))
            RETURNING d."partition", d.sequence, d.lease_id, d.attempt
        ), reblocked AS (
            UPDATE rheo.deliveries AS d
               SET state = 'blocked', lease_id = NULL, consumer_id = NULL, expires_at = 'infinity'
             WHERE d.ctid = ANY (ARRAY(SELECT a.tid FROM ahead a))
        ), key_walk AS (
            -- 'key': the events past the cursor, leased or blocked, read
            -- in a window of twice the quota from the cursor, and again in
            -- a window twice the last while one read whole leases fewer
            -- than the quota: so a fetch reads about what it leases when
            -- few events are blocked, walks past a long backlog in a few
            -- windows, and returns nothing only when nothing is claimable.
            -- Each blocked event is stored and passed once.
            --
            -- In a window, an event is blocked when an earlier event of
            -- its key is not terminal: an earlier one in the window
            -- (row_number), or a delivery found by the key's index (probed
            -- once per key, as of this statement). It is cut after the
            -- quota's last lease. has_waiters: later events of its key are
            -- in the window. wake: blocked behind a delivery not marked as
            -- having waiters, which the next fetch marks (or finds settled).
            -- more: the window was read whole and leases too few, so the
            -- next one is read; only the rows of a partition's last window
            -- are kept. A seed row per partition starts the walk.
            SELECT p.part, p.next_sequence AS next, p.fresh, 2 * p.fresh::bigint AS size,
                   true AS seed, true AS more, true AS driver,
                   NULL::bigint AS sequence, NULL::text AS id, NULL::text AS key, NULL::text AS type,
                   NULL::jsonb AS payload, NULL::jsonb AS metadata, NULL::timestamptz AS ts,
                   false AS blocked, false AS has_waiters, false AS wake
              FROM plan p
             WHERE p.fresh > 0
            UNION ALL
            SELECT k.part, k.next, k.fresh, s.size, false, w.more, w.sequence = k.next + s.size - 1,
                   w.sequence, w.id, w.key, w.type, w.payload, w.metadata, w.ts, w.blocked, w.has_waiters, w.wake
              FROM key_walk k
             CROSS JOIN LATERAL (SELECT CASE WHEN k.seed THEN k.size ELSE 2 * k.size END AS size) AS s
             CROSS JOIN LATERAL (
                    SELECT z.sequence, z.id, z.key, z.type, z.payload, z.metadata, z.ts, z.blocked, z.has_waiters,
                           z.wake, z.n_read = s.size AND z.n_leasable < k.fresh AS more
                      FROM (SELECT y.*,
                                   count(*) FILTER (WHERE NOT y.blocked) OVER (ORDER BY y.sequence) AS n_leased,
                                   count(*) FILTER (WHERE NOT y.blocked) OVER () AS n_leasable,
                                   count(*) OVER () AS n_read
                              FROM (SELECT e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts,
                                           e.key IS NOT NULL AND (e.rn > 1 OR b.state IS NOT NULL) AS blocked,
                                           e.key IS NOT NULL AND e.rn < e.cnt AS has_waiters,
                                           coalesce(b.state <> 'blocked' AND NOT b.has_waiters, false) AS wake
                                      FROM (SELECT r.*,
                                                   row_number() OVER (PARTITION BY r.key ORDER BY r.sequence) AS rn,
                                                   count(*) OVER (PARTITION BY r.key) AS cnt
                                              FROM (SELECT ev.sequence, ev.id, ev.key, ev.type, ev.payload,
                                                           ev.metadata, ev.ts
                                                      FROM rheo.events ev
                                                     WHERE ev.stream = p_stream AND ev."partition" = k.part
                                                       AND ev.sequence >= k.next
                                                     ORDER BY ev.sequence
                                                     LIMIT s.size) AS r) AS e
                                      LEFT JOIN LATERAL (SELECT x.state, x.has_waiters FROM rheo.deliveries x
                                                          WHERE x.group_id::bigint = v_group.group_id::bigint
                                                            AND x."partition"::bigint = k.part::bigint
                                                            AND x.key = e.key AND x.sequence < e.sequence
                                                            AND e.rn = 1
                                                          ORDER BY x.sequence DESC
                                                          LIMIT 1) AS b ON true) AS y) AS z
                     WHERE z.n_leased < k.fresh OR (z.n_leased = k.fresh AND NOT z.blocked)) AS w
             WHERE k.driver AND k.more
        ), fresh AS (
            -- The lease ids are made here, so that the result can be read from
            -- this CTE rather than joined back to the INSERT's RETURNING.
            SELECT k.part, k.sequence, gen_random_uuid() AS lease_id, k.id, k.key, k.type, k.payload, k.metadata, k.ts,
                   k.blocked, k.has_waiters, k.wake
              FROM key_walk k
             WHERE NOT k.seed AND NOT k.more
        ), passed AS (
            -- The cursor passes the leased and the blocked events alike,
            -- a run from the cursor up (see advanced, below).
            UPDATE rheo.cursors AS c SET next_sequence = n.last + 1
              FROM (SELECT f.part, max(f.sequence) AS last FROM fresh f GROUP BY f.part) AS n
             WHERE c.group_id = v_group.group_id AND c."partition" = n.part
        ), inserted AS (
            INSERT INTO rheo.deliveries
                   (stream, group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at,
                    ts, key, has_waiters)
            SELECT p_stream, v_group.group_id, f.part, f.sequence,
                   CASE WHEN f.blocked THEN 'blocked' ELSE 'leased' END,
                   CASE WHEN f.blocked THEN NULL ELSE f.lease_id END,
                   CASE WHEN f.blocked THEN NULL ELSE v_consumer END,
                   CASE WHEN f.blocked THEN 0 ELSE 1 END,
                   CASE WHEN f.blocked THEN NULL ELSE v_now END,
                   CASE WHEN f.blocked THEN 'infinity' ELSE v_expires END,
                   f.ts, f.key, f.has_waiters
              FROM fresh f
        ), woken AS (
            INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
            SELECT DISTINCT p_stream, v_group.group_id, w.part, w.key
              FROM (SELECT f.part, f.key FROM fresh f WHERE f.wake
                    UNION ALL
                    SELECT a.part, a.key FROM ahead a WHERE a.state <> 'blocked' AND NOT a.has_waiters) AS w
        )
        SELECT f.lease_id, f.lease_id::text, p_stream, p_group_name, v_consumer, 1,
               v_now, v_expires, f.id, f.part, f.sequence, f.key, f.type, f.payload, f.metadata, f.ts
          FROM fresh f
         WHERE NOT f.blocked
        UNION ALL
        SELECT r.lease_id, r.lease_id::text, p_stream, p_group_name, v_consumer, r.attempt,
               v_now, v_expires, e.id, r."partition", r.sequence, e.key, e.type, e.payload, e.metadata, e.ts
          FROM reclaimed r CROSS JOIN LATERAL rheo._event(p_stream, r."partition", r.sequence) AS e
         ORDER BY 10, 11;  -- partition, sequence
        RETURN;
    END IF;
    RETURN QUERY
    WITH plan AS (
        SELECT * FROM rheo._plan(v_locked, v_next, v_quota, v_reclaim, p_max_count)
    ), candidates AS (
        -- The deliveries due again with the lowest sequences (rheo._due);
        -- under 'partition', the earliest delivery, whatever its state
        -- (rheo._turn), picked below only if it is still due.
        SELECT d.tid
          FROM plan p
         CROSS JOIN LATERAL rheo._due(v_group.group_id, p.part, v_now, v_group.max_attempts, p_max_count,
                                      p.reclaim, p.due_known, coalesce(p.part = ANY (v_expired), false)) AS d(tid)
         WHERE p.reclaim > 0 AND NOT v_part
        UNION ALL
        SELECT d.tid
          FROM plan p
         CROSS JOIN LATERAL rheo._turn(v_group.group_id, p.part) AS d
         WHERE p.reclaim > 0 AND v_part
    ), picked AS MATERIALIZED (
        -- Locked with SKIP LOCKED, and the conditions checked again on the
        -- row as it is once locked. The due time's condition is written so
        -- that no index can take it (IS TRUE): found by their addresses,
        -- the rows are read by a TID scan, not by a walk of the due-time
        -- index up to now, which passes every settled delivery a held
        -- snapshot keeps (docs/design.md, "Due times and the expiry mark").
        SELECT d.ctid AS tid FROM rheo.deliveries d
         WHERE d.ctid = ANY (ARRAY(SELECT c.tid FROM candidates c))
           AND (d.expires_at <= v_now) IS TRUE
           AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
           FOR UPDATE SKIP LOCKED
    ), reclaimed AS (
        UPDATE rheo.deliveries AS d
           SET state = 'leased', lease_id = gen_random_uuid(), consumer_id = v_consumer,
               attempt = d.attempt + 1, leased_at = v_now, expires_at = v_expires
         WHERE d.ctid = ANY (ARRAY(SELECT picked.tid FROM picked))
        RETURNING d."partition", d.sequence, d.lease_id, d.attempt
    ), fresh AS (
        -- The lease ids are made here, so that the result can be read from
        -- this CTE rather than joined back to the INSERT's RETURNING.
        SELECT p.part, e.sequence, gen_random_uuid() AS lease_id,
               e.id, e.key, e.type, e.payload, e.metadata, e.ts
          FROM plan p
         CROSS JOIN LATERAL (SELECT e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts
                               FROM rheo.events e
                              WHERE e.stream = p_stream AND e."partition" = p.part
                                AND e.sequence >= p.next_sequence
                              ORDER BY e.sequence
                              LIMIT p.fresh) AS e
         WHERE p.fresh > 0
    ), inserted AS (
        -- No key: only 'key' fetches read it (set_ordering copies it into
        -- the deliveries in progress when a group turns to 'key'), and
        -- without it the delivery skips deliveries_key_idx.
        INSERT INTO rheo.deliveries
               (stream, group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at, ts)
        SELECT p_stream, v_group.group_id, f.part, f.sequence, 'leased', f.lease_id, v_consumer, 1, v_now, v_expires, f.ts
          FROM fresh f
    ), advanced AS (
        -- Sequences are contiguous and visible in order, so the events
        -- taken are a run from the cursor: it moves past the last one.
        UPDATE rheo.cursors AS c SET next_sequence = n.last + 1
          FROM (SELECT f.part, max(f.sequence) AS last FROM fresh f GROUP BY f.part) AS n
         WHERE c.group_id = v_group.group_id AND c."partition" = n.part
    )
    SELECT r.lease_id, r.lease_id::text, p_stream, p_group_name, v_consumer, r.attempt,
           v_now, v_expires, e.id, r."partition", r.sequence, e.key, e.type, e.payload, e.metadata, e.ts
      FROM reclaimed r CROSS JOIN LATERAL rheo._event(p_stream, r."partition", r.sequence) AS e
    UNION ALL
    SELECT f.lease_id, f.lease_id::text, p_stream, p_group_name, v_consumer, 1,
           v_now, v_expires, f.id, f.part, f.sequence, f.key, f.type, f.payload, f.metadata, f.ts
      FROM fresh f
     ORDER BY 10, 11;  -- partition, sequence
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.fetch(text, text, int, text, int, int[], timestamptz)', 'rheo_consumer');
