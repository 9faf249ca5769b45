-- A group's deliveries in progress, the soonest due first: leases about
-- to lapse (or lapsed, not yet claimed again) and retries about to come
-- due. For operators and dashboards, who may not read rheo.deliveries
-- (docs/security.md). Events blocked behind their keys ('key' ordering)
-- are neither, and are left out: they are due at 'infinity', the end of
-- the index range read.
--
-- Each partition gives at most max_count of its deliveries through the
-- index of their due time, and the soonest max_count of those are
-- returned: the cost follows max_count and the partition count, not the
-- leases in flight.
CREATE OR REPLACE FUNCTION rheo.leases(stream text, group_name text, max_count int DEFAULT 100)
RETURNS TABLE (event_id text, "partition" int, sequence bigint, state text, consumer_id text, attempt int,
               leased_at timestamptz, expires_at timestamptz, reason text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
-- Each partition's deliveries are read in due order from their index,
-- whatever the statistics say: the filter on the stream (which the
-- single server's index does not hold) would otherwise make the planner
-- sort every delivery of the partition instead.
SET enable_sort = off
-- A sort the plan cannot do without is then costed as disabled, far
-- above jit_above_cost: no JIT compilation for a statement this small.
SET jit = off
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_max_count  ALIAS FOR $3;
    v_group      record;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    RETURN QUERY
        SELECT e.id, d."partition", d.sequence, d.state, d.consumer_id, d.attempt, d.leased_at, d.expires_at, d.reason
          FROM rheo.cursors c
         CROSS JOIN LATERAL (SELECT x."partition", x.sequence, x.state, x.consumer_id, x.attempt, x.leased_at,
                                    x.expires_at, x.reason
                               FROM rheo.deliveries x
                              WHERE x.stream = p_stream AND x.group_id = c.group_id
                                AND x."partition" = c."partition"
                                AND x.expires_at < 'infinity'
                              ORDER BY x.expires_at
                              LIMIT p_max_count) AS d
         CROSS JOIN LATERAL (SELECT ev.id FROM rheo.events ev
                              WHERE ev.stream = p_stream AND ev."partition" = d."partition"
                                AND ev.sequence = d.sequence LIMIT 1) AS e
         WHERE c.stream = p_stream AND c.group_id = v_group.group_id
         ORDER BY d.expires_at, d."partition", d.sequence
         LIMIT p_max_count;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.leases(text, text, int)', 'rheo_reader');
