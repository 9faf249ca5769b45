-- Extends a held lease to clock + lease_ms and returns the new expiry.
CREATE OR REPLACE FUNCTION rheo.renew(lease_id uuid, lease_ms int DEFAULT 30000,
                                      clock timestamptz DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_lease_id ALIAS FOR $1;
    p_lease_ms ALIAS FOR $2;
    p_clock    ALIAS FOR $3;
    v_expires   timestamptz;
    v_was       timestamptz;
    v_stream    text;
    v_group_id  int;
    v_partition int;
BEGIN
    IF p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_id must not be NULL';
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('lease_ms must be >= 1, got %s', coalesce(p_lease_ms::text, 'NULL'));
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    IF rheo._distributed() THEN
        -- On Citus, by the stream the lease id names (see rheo.ack); the
        -- expiry computed first, as Citus evaluates no now() in an
        -- UPDATE's coalesce.
        v_expires := coalesce(p_clock, now()) + make_interval(secs => p_lease_ms / 1000.0);
        -- The expiry mark as below.
        FOREACH v_stream IN ARRAY rheo._lease_streams(p_lease_id) LOOP
            SELECT d.group_id, d."partition", d.expires_at INTO v_group_id, v_partition, v_was
              FROM rheo.deliveries d
             WHERE d.stream = v_stream AND d.lease_id = p_lease_id AND d.state = 'leased';
            IF v_expires < v_was THEN
                PERFORM FROM rheo.cursors c
                  WHERE c.stream = v_stream AND c.group_id = v_group_id AND c."partition" = v_partition
                    FOR NO KEY UPDATE;
            END IF;
            UPDATE rheo.deliveries AS d
               SET expires_at = v_expires
             WHERE d.stream = v_stream AND d.lease_id = p_lease_id AND d.state = 'leased';
            IF FOUND THEN
                IF v_expires < v_was THEN
                    UPDATE rheo.cursors AS c
                       SET expiry_mark = v_expires
                     WHERE c.stream = v_stream AND c.group_id = v_group_id AND c."partition" = v_partition
                       AND c.expiry_mark > v_expires;
                END IF;
                RETURN v_expires;
            END IF;
        END LOOP;
        RAISE EXCEPTION 'stale_lease' USING ERRCODE = 'RH004',
            DETAIL = format('lease %s is no longer held', p_lease_id);
    END IF;
    v_expires := coalesce(p_clock, now()) + make_interval(secs => p_lease_ms / 1000.0);
    -- A renew that brings the expiry earlier than it was may bring it
    -- before the partition's expiry mark (rheo.fetch), which fetches read
    -- as a lower bound of every lease's expiry: it lowers the mark, and
    -- takes the cursor row first, before the delivery, the order of
    -- fetch, replay and reset_group, and so that no fetch moves the mark
    -- up past this lease before the renew commits. A renew that extends
    -- the lease, the usual one, locks and writes the delivery alone.
    SELECT d.group_id, d."partition", d.expires_at INTO v_group_id, v_partition, v_was
      FROM rheo.deliveries d
     WHERE d.lease_id = p_lease_id AND d.state = 'leased';
    IF v_expires < v_was THEN
        PERFORM FROM rheo.cursors c
          WHERE c.group_id = v_group_id AND c."partition" = v_partition
            FOR NO KEY UPDATE;
    END IF;
    UPDATE rheo.deliveries AS d
       SET expires_at = v_expires
     WHERE d.lease_id = p_lease_id AND d.state = 'leased'
    RETURNING d.group_id, d."partition" INTO v_group_id, v_partition;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stale_lease' USING ERRCODE = 'RH004',
            DETAIL = format('lease %s is no longer held', p_lease_id);
    END IF;
    IF v_expires < v_was THEN
        UPDATE rheo.cursors AS c
           SET expiry_mark = v_expires
         WHERE c.group_id = v_group_id AND c."partition" = v_partition AND c.expiry_mark > v_expires;
    END IF;
    RETURN v_expires;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.renew(uuid, int, timestamptz)', 'rheo_consumer');
