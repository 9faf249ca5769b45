-- On Citus, the acks of lease_ids held in one stream's deliveries: locks
-- them in primary key order (see rheo.ack_batch), deletes them, leaves
-- the wakeups of their keys, and returns the lease ids it settled. Every
-- statement names the stream, and the tables rheo._shard_tables gives:
-- the stream's shards, on the node that holds them. distribute.sql distributes it by its
-- stream, so that rheo.ack and rheo.ack_batch, called outside a
-- transaction, hand one call to the stream's node instead of a
-- coordinated transaction of several statements (docs/decisions.md,
-- "Settles on Citus"); inside a caller's transaction it runs on the
-- coordinator, its statements routed one by one.
CREATE OR REPLACE FUNCTION rheo._ack_on(stream text, lease_ids uuid[])
RETURNS uuid[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET plan_cache_mode = force_custom_plan
SET jit = off
AS $$
DECLARE
    p_stream    ALIAS FOR $1;
    p_lease_ids ALIAS FOR $2;
    -- The deliveries and the wakeups: their shards on the stream's node
    -- (rheo._shard_tables).
    v_tables    text[] := rheo._shard_tables(p_stream, ARRAY['deliveries', 'key_wakeups']);
    -- The lock and the delete, prepared once per session
    -- (rheo._prepared), as rheo._fetch_citus does: on the shards planned
    -- once; routed by Citus planned at every call (the function's
    -- setting), as Citus routes a generic plan only for its simplest
    -- statements.
    v_lock      text := format($q$
        SELECT array_agg(h.tid)
          FROM (SELECT d.ctid AS tid FROM %1$s d
                 WHERE d.stream = $1::text AND d.lease_id = ANY ($2::uuid[]) AND d.state = 'leased'
                 ORDER BY d.group_id, d."partition", d.sequence
                   FOR UPDATE) AS h$q$, v_tables[1]);
    v_delete    text := format($q$
        WITH settled AS (
            DELETE FROM %1$s AS d
             WHERE d.stream = $1::text AND d.ctid = ANY ($2::tid[])
            RETURNING d.lease_id, d.group_id, d."partition", d.key, d.has_waiters
        )
        SELECT array_agg(s.lease_id), array_agg(s.group_id), array_agg(s."partition"), array_agg(s.key),
               array_agg(s.has_waiters)
          FROM settled s$q$, v_tables[1]);
    v_tids      tid[];
    v_ids       uuid[];
    v_parts     int[];
    v_groups    int[];
    v_keys      text[];
    v_waiters   boolean[];
BEGIN
    IF v_tables[1] <> 'rheo.deliveries' THEN
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);  -- until the function returns
    END IF;
    EXECUTE rheo._prepared(v_lock, ARRAY[quote_nullable(p_stream), quote_nullable(p_lease_ids)]) INTO v_tids;
    IF v_tids IS NULL THEN
        RETURN '{}';
    END IF;
    EXECUTE rheo._prepared(v_delete, ARRAY[quote_nullable(p_stream), quote_nullable(v_tids)])
       INTO v_ids, v_groups, v_parts, v_keys, v_waiters;
    IF true = ANY (v_waiters) THEN
        EXECUTE format($q$
            INSERT INTO %1$s (stream, group_id, "partition", key)
            SELECT $1, w.group_id, w.part, w.key
              FROM unnest($2, $3, $4, $5) AS w(group_id, part, key, has_waiters)
             WHERE w.has_waiters$q$, v_tables[2])
          USING p_stream, v_groups, v_parts, v_keys, v_waiters;
    END IF;
    RETURN coalesce(v_ids, '{}');
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._ack_on(text, uuid[])');
