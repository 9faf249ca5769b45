-- Sets a group's ordering (reference §3.3): 'none', 'key' or 'partition'. It
-- takes effect from the group's next fetch; leases already handed out are
-- not taken back.
--
-- Leaving 'key', the events blocked behind their keys become pending and
-- due as of now() (the signature has no clock), attempt unchanged: that
-- is what the other modes would have made of them, and it keeps their
-- claim path free of blocked rows. Their wakeups go with them. Entering
-- 'key' copies the events' keys into the group's deliveries in progress
-- (the other orderings do not store them); the next fetch blocks what
-- must wait behind them.
--
-- Locks, in the order every function takes them (docs/design.md,
-- "Locks"): the group's cursors in partition order, so that fetches in
-- progress finish first and none sees half of the change, then the
-- deliveries it changes in primary key order.
CREATE OR REPLACE FUNCTION rheo.set_ordering(stream text, group_name text, ordering text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_ordering   ALIAS FOR $3;
    v_group      record;
    v_now        timestamptz := now();
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    PERFORM rheo._check_ordering(p_ordering);
    PERFORM rheo._check_read_committed('set_ordering');

    PERFORM 1 FROM rheo.cursors c
      WHERE c.stream = p_stream AND c.group_id = v_group.group_id
      ORDER BY c."partition"
        FOR UPDATE;
    UPDATE rheo.groups AS g SET ordering = p_ordering WHERE g.stream = p_stream AND g.group_id = v_group.group_id;
    IF p_ordering = 'key' AND v_group.ordering <> 'key' THEN
        -- Fetches under the other orderings do not copy the event's key
        -- into its delivery; the deliveries in progress get it now, so
        -- that the later events of their keys wait for them. Locked in
        -- primary key order first, as ack_batch locks them.
        PERFORM 1 FROM rheo.deliveries d
          WHERE d.stream = p_stream AND d.group_id = v_group.group_id AND d.key IS NULL
          ORDER BY d."partition", d.sequence
            FOR UPDATE;
        UPDATE rheo.deliveries AS d SET key = e.key
          FROM rheo.events e
         WHERE d.stream = p_stream AND d.group_id = v_group.group_id AND d.key IS NULL
           AND e.stream = p_stream AND e."partition" = d."partition" AND e.sequence = d.sequence
           AND e.key IS NOT NULL;
    END IF;
    IF p_ordering <> 'key' THEN
        PERFORM 1 FROM rheo.deliveries d
          WHERE d.stream = p_stream AND d.group_id = v_group.group_id AND d.state = 'blocked'
          ORDER BY d."partition", d.sequence
            FOR UPDATE;
        UPDATE rheo.deliveries AS d
           SET state = 'pending', expires_at = v_now
         WHERE d.stream = p_stream AND d.group_id = v_group.group_id AND d.state = 'blocked';
        DELETE FROM rheo.key_wakeups AS w WHERE w.stream = p_stream AND w.group_id = v_group.group_id;
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.set_ordering(text, text, text)', 'rheo_admin');
