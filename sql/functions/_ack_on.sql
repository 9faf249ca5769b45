-- On Citus, the acks of lease_ids held in one stream's deliveries: locks
-- them in primary key order (see rheo.ack_batch), deletes them, leaves
-- the wakeups of their keys, and returns the lease ids it settled. Every
-- statement names the stream. distribute.sql distributes it by its
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
SET jit = off
AS $$
DECLARE
    p_stream    ALIAS FOR $1;
    p_lease_ids ALIAS FOR $2;
    v_tids      tid[];
    v_ids       uuid[];
    v_parts     int[];
    v_groups    int[];
    v_keys      text[];
    v_waiters   boolean[];
BEGIN
    SELECT array_agg(h.tid) INTO v_tids
      FROM (SELECT d.ctid AS tid FROM rheo.deliveries d
             WHERE d.stream = p_stream AND d.lease_id = ANY (p_lease_ids) AND d.state = 'leased'
             ORDER BY d.group_id, d."partition", d.sequence
               FOR UPDATE) AS h;
    IF v_tids IS NULL THEN
        RETURN '{}';
    END IF;
    WITH settled AS (
        DELETE FROM rheo.deliveries AS d
         WHERE d.stream = p_stream AND d.ctid = ANY (v_tids)
        RETURNING d.lease_id, d.group_id, d."partition", d.key, d.has_waiters
    )
    SELECT array_agg(s.lease_id), array_agg(s.group_id), array_agg(s."partition"), array_agg(s.key),
           array_agg(s.has_waiters)
      INTO v_ids, v_groups, v_parts, v_keys, v_waiters
      FROM settled s;
    INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
    SELECT p_stream, w.group_id, w.part, w.key
      FROM unnest(v_groups, v_parts, v_keys, v_waiters) AS w(group_id, part, key, has_waiters)
     WHERE w.has_waiters;
    RETURN coalesce(v_ids, '{}');
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._ack_on(text, uuid[])');
