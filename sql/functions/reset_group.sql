-- Drops a group's leases, pending retries, blocked events and dead
-- letters in the listed partitions and places its cursors as
-- create_group would. The log is untouched.
CREATE OR REPLACE FUNCTION rheo.reset_group(stream text, group_name text, confirm boolean DEFAULT false,
                                            start_after bigint DEFAULT NULL, start_at timestamptz DEFAULT NULL,
                                            partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream      ALIAS FOR $1;
    p_group_name  ALIAS FOR $2;
    p_confirm     ALIAS FOR $3;
    p_start_after ALIAS FOR $4;
    p_start_at    ALIAS FOR $5;
    p_partitions  ALIAS FOR $6;
    p_clock       ALIAS FOR $7;
    v_group       record;
    v_scope       int[];
BEGIN
    IF p_confirm IS NOT TRUE THEN
        RAISE EXCEPTION 'confirm_required' USING ERRCODE = 'RH008',
            DETAIL = 'reset_group drops leases, retries and dead letters: call it with confirm => true';
    END IF;
    v_group := rheo._group(p_stream, p_group_name);
    PERFORM rheo._check_start(p_start_after, p_start_at);
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    PERFORM rheo._check_time('clock', p_clock);
    PERFORM rheo._check_read_committed('reset_group');

    PERFORM 1 FROM rheo.cursors c
      WHERE c.stream = p_stream AND c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
      ORDER BY c."partition"
        FOR UPDATE;
    -- Deliveries are locked in primary key order before they are
    -- deleted, as every multi-row settle does (docs/design.md, "Locks").
    PERFORM 1 FROM rheo.deliveries d
      WHERE d.stream = p_stream AND d.group_id = v_group.group_id AND d."partition" = ANY (v_scope)
      ORDER BY d."partition", d.sequence
        FOR UPDATE;
    DELETE FROM rheo.deliveries AS d
     WHERE d.stream = p_stream AND d.group_id = v_group.group_id AND d."partition" = ANY (v_scope);
    DELETE FROM rheo.dead_letters AS dl
     WHERE dl.stream = p_stream AND dl.group_id = v_group.group_id AND dl."partition" = ANY (v_scope);
    DELETE FROM rheo.key_wakeups AS w
     WHERE w.stream = p_stream AND w.group_id = v_group.group_id AND w."partition" = ANY (v_scope);
    PERFORM rheo._place_cursors(v_group.group_id, p_stream, v_scope, p_start_after, p_start_at);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.reset_group(text, text, boolean, bigint, timestamptz, int[], timestamptz)', 'rheo_admin');
