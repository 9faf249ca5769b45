-- Makes events claimable again for a group, without copying them. Exactly
-- one selector: from_sequence, event_ids or from_ts.
CREATE OR REPLACE FUNCTION rheo.replay(stream text, group_name text, from_sequence bigint DEFAULT NULL,
                                       event_ids text[] DEFAULT NULL, from_ts timestamptz DEFAULT NULL,
                                       partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream        ALIAS FOR $1;
    p_group_name    ALIAS FOR $2;
    p_from_sequence ALIAS FOR $3;
    p_event_ids     ALIAS FOR $4;
    p_from_ts       ALIAS FOR $5;
    p_partitions    ALIAS FOR $6;
    p_clock         ALIAS FOR $7;
    v_group         record;
    v_scope         int[];
    v_total         bigint := 0;
    v_p             int;
    v_first         bigint;
    v_now           timestamptz := coalesce(p_clock, now());
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    IF num_nonnulls(p_from_sequence, p_event_ids, p_from_ts) <> 1 THEN
        RAISE EXCEPTION 'invalid_replay_opts' USING ERRCODE = 'RH009',
            DETAIL = 'give exactly one of from_sequence, event_ids and from_ts';
    END IF;
    -- At most the largest bigint less one, so that the cursor after it
    -- still fits.
    IF p_from_sequence < 0 OR p_from_sequence > 9223372036854775806 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('from_sequence must be between 0 and 9223372036854775806, got %s', p_from_sequence);
    END IF;
    PERFORM rheo._check_array('event_ids', p_event_ids);
    PERFORM rheo._check_time('clock', p_clock);
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    PERFORM rheo._check_read_committed('replay');

    -- Lock the cursors in partition order: replay waits for fetches in
    -- progress, and they cannot claim what it is reopening.
    PERFORM 1 FROM rheo.cursors c
      WHERE c.stream = p_stream AND c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
      ORDER BY c."partition"
        FOR UPDATE;

    IF p_event_ids IS NOT NULL THEN
        -- Terminal events only: below the cursor with no delivery in
        -- progress (acked), or dead-lettered. An event blocked behind its
        -- key has a delivery, so it is not among them. In 'key' mode the
        -- next fetch blocks a reopened event behind an earlier one of its
        -- key that is not terminal.
        WITH target AS (
            SELECT DISTINCT e."partition", e.sequence, e.ts, e.key
              FROM unnest(p_event_ids) AS u(id)
             CROSS JOIN LATERAL (SELECT ev."partition", ev.sequence, ev.ts, ev.key FROM rheo.events ev
                                  WHERE ev.id = u.id AND ev.stream = p_stream LIMIT 1) AS e
              JOIN rheo.cursors c ON c.stream = p_stream AND c.group_id = v_group.group_id
                                 AND c."partition" = e."partition"
             WHERE e."partition" = ANY (v_scope)
               AND e.sequence < c.next_sequence
               AND NOT EXISTS (SELECT 1 FROM rheo.deliveries d
                                WHERE d.stream = p_stream AND d.group_id = v_group.group_id
                                  AND d."partition" = e."partition"
                                  AND d.sequence = e.sequence)
        ), cleared AS (
            DELETE FROM rheo.dead_letters AS dl
             USING target t
             WHERE dl.stream = p_stream AND dl.group_id = v_group.group_id AND dl."partition" = t."partition" AND dl.sequence = t.sequence
        )
        -- attempt 0: the next lease is attempt 1.
        INSERT INTO rheo.deliveries (stream, group_id, "partition", sequence, state, attempt, expires_at, ts, key)
        SELECT p_stream, v_group.group_id, t."partition", t.sequence, 'pending', 0, v_now, t.ts, t.key
          FROM target t;
        GET DIAGNOSTICS v_total = ROW_COUNT;
        RETURN v_total;
    END IF;

    FOREACH v_p IN ARRAY v_scope LOOP
        IF p_from_sequence IS NOT NULL THEN
            v_total := v_total + rheo._rewind(v_group.group_id, p_stream, v_p, p_from_sequence);
        ELSE
            v_first := rheo._first_at(p_stream, v_p, p_from_ts);
            IF v_first IS NOT NULL THEN
                v_total := v_total + rheo._rewind(v_group.group_id, p_stream, v_p, v_first - 1);
            END IF;
        END IF;
    END LOOP;
    RETURN v_total;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.replay(text, text, bigint, text[], timestamptz, int[], timestamptz)', 'rheo_admin');
