-- Places a group's cursors in the given partitions: after start_after, at
-- the first event with ts >= start_at (or past the high watermark when
-- there is none), or at the beginning. Never below the low watermark:
-- pruned events count as terminal for every group (reference §7).
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
BEGIN
    UPDATE rheo.cursors AS c
       SET next_sequence = greatest(pt.low_watermark, CASE
               WHEN p_start_after IS NOT NULL THEN p_start_after + 1
               WHEN p_start_at IS NOT NULL THEN coalesce(rheo._first_at(p_stream, c."partition", p_start_at),
                                                          pt.high_watermark + 1)
               ELSE 1
           END)
      FROM rheo.partitions pt
     WHERE c.group_id = p_group_id AND c."partition" = ANY (p_partitions)
       AND pt.stream = p_stream AND pt."partition" = c."partition";
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._place_cursors(int, text, int[], bigint, timestamptz)');
