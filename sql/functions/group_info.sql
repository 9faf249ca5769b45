-- A summary of a group's state at clock.
CREATE OR REPLACE FUNCTION rheo.group_info(stream text, group_name text, clock timestamptz DEFAULT NULL)
RETURNS TABLE (lag bigint, inflight bigint, pending_retry bigint, dead_letters bigint,
               oldest_unsettled_ts timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_clock      ALIAS FOR $3;
    v_group      record;
    v_now        timestamptz := coalesce(p_clock, now());
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    PERFORM rheo._check_time('clock', p_clock);
    RETURN QUERY
    SELECT (SELECT coalesce(sum(l.lag), 0)::bigint FROM rheo.lag(p_stream, p_group_name) l),
           (SELECT count(*) FROM rheo.deliveries d
             WHERE d.group_id = v_group.group_id AND d.state = 'leased' AND d.expires_at > v_now),
           (SELECT count(*) FROM rheo.deliveries d
             WHERE d.group_id = v_group.group_id AND NOT (d.state = 'leased' AND d.expires_at > v_now)),
           (SELECT count(*) FROM rheo.dead_letters dl WHERE dl.group_id = v_group.group_id),
           -- Non-terminal: deliveries in progress and events not offered
           -- yet. The second part reads the unoffered backlog's ts.
           least((SELECT min(e.ts) FROM rheo.deliveries d
                   CROSS JOIN LATERAL (SELECT ev.ts FROM rheo.events ev
                                        WHERE ev.stream = p_stream AND ev."partition" = d."partition"
                                          AND ev.sequence = d.sequence LIMIT 1) AS e
                   WHERE d.group_id = v_group.group_id),
                 (SELECT min(e.ts) FROM rheo.cursors c
                    JOIN rheo.events e ON e.stream = p_stream AND e."partition" = c."partition"
                                      AND e.sequence >= c.next_sequence
                   WHERE c.group_id = v_group.group_id));
END
$$;
