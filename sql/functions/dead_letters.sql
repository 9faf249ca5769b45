-- A page of a group's dead letters in (partition, sequence) order; after
-- is the event id of the previous page's last dead letter.
CREATE OR REPLACE FUNCTION rheo.dead_letters(stream text, group_name text, max_count int DEFAULT 100,
                                             after text DEFAULT NULL)
RETURNS TABLE (event_id text, "partition" int, sequence bigint, attempt int, reason text,
               dead_lettered_at timestamptz, type text, key text, payload jsonb,
               metadata jsonb, ts timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- A page is read in key order from the primary key, whatever the
-- statistics say: the filter on the stream (which the single server's
-- key does not hold) would otherwise make the planner sort every dead
-- letter of the group instead.
SET enable_sort = off
-- A sort the plan cannot do without is then costed as disabled, far
-- above jit_above_cost: no JIT compilation for a statement this small.
SET jit = off
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_max_count  ALIAS FOR $3;
    p_after      ALIAS FOR $4;
    v_group      record;
    v_after_p    int := -1;
    v_after_s    bigint := 0;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    IF p_after IS NOT NULL THEN
        SELECT dl."partition", dl.sequence INTO v_after_p, v_after_s
          FROM rheo.events e
          JOIN rheo.dead_letters dl ON dl.stream = p_stream AND dl.group_id = v_group.group_id
                                   AND dl."partition" = e."partition" AND dl.sequence = e.sequence
         WHERE e.id = p_after AND e.stream = p_stream;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'cursor_not_found' USING ERRCODE = 'RH010',
                DETAIL = format('event %L is not among the dead letters of group %L', p_after, p_group_name);
        END IF;
    END IF;
    RETURN QUERY
        SELECT e.id, dl."partition", dl.sequence, dl.attempt, dl.reason, dl.dead_lettered_at,
               e.type, e.key, e.payload, e.metadata, e.ts
          FROM rheo.dead_letters dl
         CROSS JOIN LATERAL (SELECT ev.* FROM rheo.events ev
                              WHERE ev.stream = p_stream AND ev."partition" = dl."partition"
                                AND ev.sequence = dl.sequence LIMIT 1) AS e
         WHERE dl.stream = p_stream AND dl.group_id = v_group.group_id
           AND (dl."partition", dl.sequence) > (v_after_p, v_after_s)
         ORDER BY dl."partition", dl.sequence
         LIMIT p_max_count;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.dead_letters(text, text, int, text)', 'rheo_reader');
