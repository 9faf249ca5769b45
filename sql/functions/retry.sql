-- Gives a held lease back: claimable again after delay_ms, or
-- dead-lettered when the attempt limit is reached. A retry keeps the
-- delivery, so later events of its key stay blocked ('key' ordering); a
-- dead letter leaves a wakeup of the key when some are.
CREATE OR REPLACE FUNCTION rheo.retry(lease_id uuid, reason text DEFAULT NULL, delay_ms int DEFAULT 0,
                                      clock timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_lease_id ALIAS FOR $1;
    p_reason   ALIAS FOR $2;
    p_delay_ms ALIAS FOR $3;
    p_clock    ALIAS FOR $4;
    v_now      timestamptz := coalesce(p_clock, now());
    v_row      record;
    v_stream   text;
    v_held     boolean := false;
BEGIN
    IF p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_id must not be NULL';
    END IF;
    IF p_delay_ms IS NULL OR p_delay_ms < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('delay_ms must be >= 0, got %s', coalesce(p_delay_ms::text, 'NULL'));
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    IF rheo._distributed() THEN
        -- On Citus, by the stream the lease id names (see rheo.ack).
        FOREACH v_stream IN ARRAY rheo._lease_streams(p_lease_id) LOOP
            SELECT d.stream, d.group_id, d."partition", d.sequence, d.attempt, d.key, d.has_waiters, g.max_attempts
              INTO v_row
              FROM rheo.deliveries d
              JOIN rheo.groups g ON g.stream = v_stream AND g.group_id = d.group_id
             WHERE d.stream = v_stream AND d.lease_id = p_lease_id AND d.state = 'leased'
               FOR UPDATE OF d;
            v_held := FOUND;
            EXIT WHEN v_held;
        END LOOP;
    ELSE
        SELECT d.stream, d.group_id, d."partition", d.sequence, d.attempt, d.key, d.has_waiters, g.max_attempts INTO v_row
          FROM rheo.deliveries d
          JOIN rheo.groups g ON g.group_id = d.group_id
         WHERE d.lease_id = p_lease_id AND d.state = 'leased'
           FOR UPDATE OF d;
        v_held := FOUND;
    END IF;
    IF NOT v_held THEN
        RAISE EXCEPTION 'stale_lease' USING ERRCODE = 'RH004',
            DETAIL = format('lease %s is no longer held', p_lease_id);
    END IF;

    IF v_row.attempt >= v_row.max_attempts THEN
        v_stream := v_row.stream;
        DELETE FROM rheo.deliveries AS d
         WHERE d.stream = v_stream AND d.group_id = v_row.group_id AND d."partition" = v_row."partition" AND d.sequence = v_row.sequence;
        INSERT INTO rheo.dead_letters (stream, group_id, "partition", sequence, attempt, reason, dead_lettered_at)
        VALUES (v_stream, v_row.group_id, v_row."partition", v_row.sequence, v_row.attempt,
                coalesce(p_reason, 'max_attempts'), v_now);
        IF v_row.has_waiters THEN
            INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
            VALUES (v_stream, v_row.group_id, v_row."partition", v_row.key);
        END IF;
        RETURN 'dead_lettered';
    END IF;

    v_stream := v_row.stream;
    UPDATE rheo.deliveries AS d
       SET state = 'pending', lease_id = NULL, consumer_id = NULL, reason = p_reason,
           expires_at = v_now + make_interval(secs => p_delay_ms / 1000.0)
     WHERE d.stream = v_stream AND d.group_id = v_row.group_id AND d."partition" = v_row."partition"
       AND d.sequence = v_row.sequence;
    RETURN 'retrying';
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.retry(uuid, text, int, timestamptz)', 'rheo_consumer');
