-- Settles a held lease as done. The delivery row is deleted: the frontier
-- is derived from what remains, so an ack writes nothing else, but for a
-- wakeup of its key when later events of the key are blocked behind it
-- ('key' ordering, docs/design.md).
CREATE OR REPLACE FUNCTION rheo.ack(lease_id uuid, clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Settles find their delivery through the lease_id index only: a table
-- scan would read every deleted row not yet vacuumed, and the planner
-- picks one when statistics are missing or stale (a new table has none).
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
-- A hot path: JIT compilation, redone at every call, would cost more than
-- the statement (see rheo.fetch).
SET jit = off
AS $$
DECLARE
    p_lease_id ALIAS FOR $1;
    p_clock    ALIAS FOR $2;
    v_stream    text;
    v_group_id  int;
    v_partition int;
    v_key       text;
    v_waiters   boolean;
    v_held      boolean;
BEGIN
    IF p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_id must not be NULL';
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    IF rheo._distributed() THEN
        -- On Citus, by the stream the lease id names (rheo._lease_streams),
        -- with rheo._ack_on, which Citus runs whole on the node that holds
        -- the lease and which leaves the wakeup itself.
        v_held := false;
        FOREACH v_stream IN ARRAY rheo._lease_streams(p_lease_id) LOOP
            SELECT cardinality(a) > 0 INTO v_held FROM rheo._ack_on(v_stream, ARRAY[p_lease_id]) AS a;
            EXIT WHEN v_held;
        END LOOP;
    ELSE
        DELETE FROM rheo.deliveries AS d WHERE d.lease_id = p_lease_id AND d.state = 'leased'
        RETURNING d.stream, d.group_id, d."partition", d.key, d.has_waiters
             INTO v_stream, v_group_id, v_partition, v_key, v_waiters;
        v_held := FOUND;
    END IF;
    IF NOT v_held THEN
        RAISE EXCEPTION 'stale_lease' USING ERRCODE = 'RH004',
            DETAIL = format('lease %s is no longer held', p_lease_id);
    END IF;
    IF v_waiters THEN
        INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
        VALUES (v_stream, v_group_id, v_partition, v_key);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.ack(uuid, timestamptz)', 'rheo_consumer');
