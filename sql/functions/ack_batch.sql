-- Acks each lease independently: stale ones (and repeats within the
-- array) report ok = false instead of failing the call.
CREATE OR REPLACE FUNCTION rheo.ack_batch(lease_ids uuid[], clock timestamptz DEFAULT NULL)
RETURNS TABLE (lease_id uuid, ok boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Settles find their delivery through the lease_id index only: a table
-- scan would read every deleted row not yet vacuumed, and the planner
-- picks one when statistics are missing or stale (a new table has none).
SET enable_seqscan = off
-- And by it alone, as a bitmap scan: a plain index scan may walk a whole
-- index instead (the primary key, for the order it gives), which the
-- planner prices as cheap when the table's statistics are those of the
-- few rows in progress, and which reads every settled row not yet
-- vacuumed: under a held snapshot 50-100 ms an ack_batch of 64
-- (docs/decisions.md, "Due times and settles").
SET enable_indexscan = off
SET plan_cache_mode = force_generic_plan
-- A hot path: JIT compilation, redone at every call, would cost more than
-- the statement (see rheo.fetch).
SET jit = off
AS $$
DECLARE
    p_lease_ids ALIAS FOR $1;
    p_clock     ALIAS FOR $2;
    v_tids      tid[];
    v_stream    text;
    v_settled   uuid[] := '{}';
    v_ids       uuid[];
BEGIN
    IF p_lease_ids IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_ids must not be NULL';
    END IF;
    PERFORM rheo._check_array('lease_ids', p_lease_ids);
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    -- The deliveries are locked in primary key order, the order in which
    -- replay, reset_group and prune lock them too, so that a batch
    -- settling while a group is replayed or its stream pruned waits for
    -- the other, or the other for it, but the two never deadlock.
    --
    -- Locked in a statement of their own: when a row is locked by a write
    -- in progress (a renew, a 'key' fetch marking its waiters), the lock
    -- waits for it and returns the row's new version, which a delete in
    -- the same statement could not see (its snapshot predates that
    -- write), so the lease would be reported stale while still held. The
    -- next statement sees what it locked. They are then deleted by their
    -- physical address. Those with later events of their key blocked
    -- behind them leave a wakeup of the key ('key' ordering).
    IF rheo._distributed() THEN
        -- On Citus, stream by stream, each named as its lease ids name it
        -- (see rheo.ack and rheo._lease_streams; the ids a fetch made on
        -- Citus, version digit 8, by one read of the stream catalog for
        -- all), by rheo._ack_on, which Citus runs whole on the stream's
        -- node.
        FOR v_stream IN SELECT s.stream FROM rheo.streams s
                         WHERE hashtext(s.stream) = ANY (ARRAY(SELECT DISTINCT rheo._lease_hash(u.id)
                                                                 FROM unnest(p_lease_ids) AS u(id)
                                                                WHERE substr(u.id::text, 15, 1) = '8'))
                        UNION
                        SELECT l FROM unnest(p_lease_ids) AS u(id), unnest(rheo._lease_streams(u.id)) AS l
                         WHERE substr(u.id::text, 15, 1) <> '8'
                         ORDER BY 1 LOOP
            SELECT a INTO v_ids FROM rheo._ack_on(v_stream, p_lease_ids) AS a;
            v_settled := v_settled || v_ids;
        END LOOP;
        RETURN QUERY
        SELECT u.id, coalesce(u.id = ANY (v_settled), false) AND row_number() OVER (PARTITION BY u.id ORDER BY u.ord) = 1
          FROM unnest(p_lease_ids) WITH ORDINALITY AS u(id, ord)
         ORDER BY u.ord;
        RETURN;
    END IF;
    SELECT array_agg(h.tid) INTO v_tids
      FROM (SELECT d.ctid AS tid FROM rheo.deliveries d
             WHERE d.lease_id = ANY (p_lease_ids) AND d.state = 'leased'
             ORDER BY d.group_id, d."partition", d.sequence
               FOR UPDATE) AS h;
    RETURN QUERY
    WITH settled AS (
        DELETE FROM rheo.deliveries AS d
         WHERE d.ctid = ANY (v_tids)
        RETURNING d.lease_id, d.stream, d.group_id, d."partition", d.key, d.has_waiters
    ), woken AS (
        INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
        SELECT s.stream, s.group_id, s."partition", s.key FROM settled s WHERE s.has_waiters
    )
    SELECT u.id,
           s.lease_id IS NOT NULL AND row_number() OVER (PARTITION BY u.id ORDER BY u.ord) = 1
      FROM unnest(p_lease_ids) WITH ORDINALITY AS u(id, ord)
      LEFT JOIN settled s ON s.lease_id = u.id
     ORDER BY u.ord;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.ack_batch(uuid[], timestamptz)', 'rheo_consumer');
