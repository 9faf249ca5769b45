-- Places a group's cursors in the given partitions: after start_after, at
-- the first event with ts >= start_at (or past the high watermark when
-- there is none), or at the beginning. Never below the low watermark:
-- pruned events count as terminal for every group (reference §7).
--
-- start_at is looked up partition by partition into a variable: Citus
-- cannot plan a function call that reads its tables inside the UPDATE.
CREATE OR REPLACE FUNCTION rheo._place_cursors(group_id int, stream text, partitions int[],
                                               start_after bigint, start_at timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_group_id    ALIAS FOR $1;
    p_stream      ALIAS FOR $2;
    p_partitions  ALIAS FOR $3;
    p_start_after ALIAS FOR $4;
    p_start_at    ALIAS FOR $5;
    v_next        bigint;
    v_pt          record;
BEGIN
    IF p_start_at IS NULL OR p_start_after IS NOT NULL THEN
        v_next := coalesce(p_start_after + 1, 1);
        UPDATE rheo.cursors AS c
           SET next_sequence = greatest(pt.low_watermark, v_next)
          FROM rheo.partitions pt
         WHERE c.stream = p_stream AND c.group_id = p_group_id AND c."partition" = ANY (p_partitions)
           AND pt.stream = p_stream AND pt."partition" = c."partition";
        RETURN;
    END IF;
    FOR v_pt IN
        SELECT pt."partition", pt.low_watermark, pt.high_watermark
          FROM rheo.partitions pt
         WHERE pt.stream = p_stream AND pt."partition" = ANY (p_partitions)
         ORDER BY pt."partition"
    LOOP
        v_next := greatest(v_pt.low_watermark,
                           coalesce(rheo._first_at(p_stream, v_pt."partition", p_start_at), v_pt.high_watermark + 1));
        UPDATE rheo.cursors AS c
           SET next_sequence = v_next
         WHERE c.stream = p_stream AND c.group_id = p_group_id AND c."partition" = v_pt."partition";
    END LOOP;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._place_cursors(int, text, int[], bigint, timestamptz)');
