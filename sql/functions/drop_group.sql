-- Removes a group with its deliveries, dead letters and cursors: its
-- leases become stale. The log is untouched.
CREATE OR REPLACE FUNCTION rheo.drop_group(stream text, group_name text, confirm boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_confirm    ALIAS FOR $3;
    v_group      record;
BEGIN
    IF p_confirm IS NOT TRUE THEN
        RAISE EXCEPTION 'confirm_required' USING ERRCODE = 'RH008',
            DETAIL = 'drop_group removes the group with its leases, retries and dead letters: call it with confirm => true';
    END IF;
    v_group := rheo._group(p_stream, p_group_name);
    PERFORM rheo._check_read_committed('drop_group');

    -- Cursors, then deliveries in primary key order, as replay takes them
    -- (docs/design.md, "Locks"): fetches in progress finish first, and
    -- settles in progress then find their lease gone.
    PERFORM 1 FROM rheo.cursors c
      WHERE c.stream = p_stream AND c.group_id = v_group.group_id
      ORDER BY c."partition"
        FOR UPDATE;
    PERFORM 1 FROM rheo.deliveries d
      WHERE d.stream = p_stream AND d.group_id = v_group.group_id
      ORDER BY d."partition", d.sequence
        FOR UPDATE;
    DELETE FROM rheo.deliveries AS d WHERE d.stream = p_stream AND d.group_id = v_group.group_id;
    DELETE FROM rheo.dead_letters AS dl WHERE dl.stream = p_stream AND dl.group_id = v_group.group_id;
    DELETE FROM rheo.key_wakeups AS w WHERE w.stream = p_stream AND w.group_id = v_group.group_id;
    DELETE FROM rheo.cursors AS c WHERE c.stream = p_stream AND c.group_id = v_group.group_id;
    DELETE FROM rheo.groups AS g WHERE g.stream = p_stream AND g.group_id = v_group.group_id;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.drop_group(text, text, boolean)', 'rheo_admin');
