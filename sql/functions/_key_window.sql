-- The events a 'key' fetch takes from a partition's cursor: at most
-- window_size of them, each marked blocked when an earlier event of its
-- key is not terminal for the group (an earlier one among these, or a
-- delivery found by the key's index, probed once per key here), cut
-- after the quota-th one that is not blocked. The blocked ones are stored
-- and passed, so one key's backlog does not stall the partition.
--
-- has_waiters: later events of its key are among these. wake: blocked
-- behind a delivery not marked as having waiters, which the next fetch
-- must then mark (or find settled). stuck: window_size events were read
-- and every one is blocked, so the caller reads on past them.
--
-- STABLE: it reads with the snapshot of the fetch that calls it.
CREATE OR REPLACE FUNCTION rheo._key_window(group_id int, stream text, "partition" int, next_sequence bigint,
                                            quota int, window_size bigint)
RETURNS TABLE (sequence bigint, id text, key text, type text, payload jsonb, metadata jsonb, ts timestamptz,
               blocked boolean, has_waiters boolean, wake boolean, stuck boolean)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- Called from rheo.fetch, whose settings these repeat (see there).
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
    SELECT z.sequence, z.id, z.key, z.type, z.payload, z.metadata, z.ts, z.blocked, z.has_waiters, z.wake,
           z.n_read = $6 AND z.all_blocked
      FROM (SELECT y.*, count(*) FILTER (WHERE NOT y.blocked) OVER (ORDER BY y.sequence) AS n_leased,
                   count(*) OVER () AS n_read, bool_and(y.blocked) OVER () AS all_blocked
              FROM (SELECT e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts,
                           e.key IS NOT NULL AND (e.rn > 1 OR b.state IS NOT NULL) AS blocked,
                           e.key IS NOT NULL AND e.rn < e.cnt AS has_waiters,
                           coalesce(b.state <> 'blocked' AND NOT b.has_waiters, false) AS wake
                      FROM (SELECT r.*,
                                   row_number() OVER (PARTITION BY r.key ORDER BY r.sequence) AS rn,
                                   count(*) OVER (PARTITION BY r.key) AS cnt
                              FROM (SELECT ev.sequence, ev.id, ev.key, ev.type, ev.payload, ev.metadata, ev.ts
                                      FROM rheo.events ev
                                     WHERE ev.stream = $2 AND ev."partition" = $3 AND ev.sequence >= $4
                                     ORDER BY ev.sequence
                                     LIMIT $6) AS r) AS e
                      LEFT JOIN LATERAL (SELECT x.state, x.has_waiters FROM rheo.deliveries x
                                          WHERE x.group_id = $1 AND x."partition" = $3
                                            AND x.key = e.key AND x.sequence < e.sequence AND e.rn = 1
                                          ORDER BY x.sequence DESC
                                          LIMIT 1) AS b ON true) AS y) AS z
     WHERE z.n_leased < $5 OR (z.n_leased = $5 AND NOT z.blocked)
     ORDER BY z.sequence
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._key_window(int, text, int, bigint, int, bigint)');
