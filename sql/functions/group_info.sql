-- A summary of a group's state at clock.
--
-- An event blocked behind its key ('key' ordering) is not terminal, so it
-- counts in lag and oldest_unsettled_ts, but it is neither in flight nor
-- a pending retry: it waits for an earlier event, not for a time.
--
-- One pass over the group's deliveries gives the counts and their oldest
-- event (deliveries carry their event's ts). The oldest event not offered
-- yet is found per partition from the time marks: the events from the
-- cursor to the end of its segment of 1024, then one row per full segment
-- after it, then the partition's own row for the segment in progress. So
-- a group far behind costs a row per 1024 events of its backlog, not the
-- backlog.
CREATE OR REPLACE FUNCTION rheo.group_info(stream text, group_name text, clock timestamptz DEFAULT NULL)
RETURNS TABLE (lag bigint, inflight bigint, pending_retry bigint, dead_letters bigint,
               oldest_unsettled_ts timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_clock      ALIAS FOR $3;
    v_group      record;
    v_now        timestamptz := coalesce(p_clock, now());
    v_lag        bigint;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    PERFORM rheo._check_time('clock', p_clock);
    -- Summed beforehand: Citus cannot plan a statement that reads its
    -- tables both directly and through a function.
    SELECT coalesce(sum(l.lag), 0)::bigint INTO v_lag FROM rheo.lag(p_stream, p_group_name) l;
    RETURN QUERY
    WITH delivered AS (
        SELECT count(*) FILTER (WHERE d.state = 'leased' AND d.expires_at > v_now) AS inflight,
               count(*) FILTER (WHERE d.state <> 'blocked'
                                  AND NOT (d.state = 'leased' AND d.expires_at > v_now)) AS pending_retry,
               min(d.ts) AS oldest
          FROM rheo.deliveries d
         WHERE d.stream = p_stream AND d.group_id = v_group.group_id
    ), unoffered AS (
        SELECT min(least(head.ts, marks.ts, tail.ts)) AS oldest
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         -- k: the first multiple of 1024 at or after the cursor, the end of
         -- its segment; the last mark: the highest multiple of 1024 allocated.
         CROSS JOIN LATERAL (SELECT (c.next_sequence + 1023) / 1024 * 1024 AS k,
                                    pt.high_watermark / 1024 * 1024 AS last_mark) AS b
         CROSS JOIN LATERAL (SELECT min(e.ts) AS ts FROM rheo.events e
                              WHERE e.stream = p_stream AND e."partition" = c."partition"
                                AND e.sequence >= c.next_sequence
                                AND e.sequence <= least(b.k, pt.high_watermark)) AS head
         CROSS JOIN LATERAL (SELECT min(m.min_ts) AS ts FROM rheo.time_marks m
                              WHERE m.stream = p_stream AND m."partition" = c."partition"
                                AND m.sequence > b.k AND m.sequence <= b.last_mark) AS marks
         CROSS JOIN LATERAL (SELECT CASE WHEN b.last_mark >= b.k THEN pt.tail_min_ts END AS ts) AS tail
         WHERE c.stream = p_stream AND c.group_id = v_group.group_id AND c.next_sequence <= pt.high_watermark
    )
    SELECT v_lag, dl.inflight, dl.pending_retry,
           (SELECT count(*) FROM rheo.dead_letters x WHERE x.stream = p_stream AND x.group_id = v_group.group_id),
           least(dl.oldest, u.oldest)
      FROM delivered dl, unoffered u;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.group_info(text, text, timestamptz)', 'rheo_reader');
