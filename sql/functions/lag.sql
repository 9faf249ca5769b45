-- Frontier, high watermark and lag per partition, ordered by partition.
-- Each row is two index lookups, whatever the history's size.
--
-- The frontier of a group in a partition: everything below the lowest
-- non-terminal delivery is terminal, and with no delivery in progress
-- everything below the cursor is. It is written out here, with the
-- stream on every table, so that Citus routes the whole statement to the
-- stream's node (a helper function's statement would be planned apart),
-- and read in a lateral join with its LIMIT, once per partition.
CREATE OR REPLACE FUNCTION rheo.lag(stream text, group_name text, partitions int[] DEFAULT NULL)
RETURNS TABLE ("partition" int, frontier bigint, high_watermark bigint, lag bigint)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- The lowest delivery is read from the primary key, in order, whatever
-- the statistics say: the filter on the stream (which the single
-- server's key does not hold) would otherwise make a new install's
-- planner sort every delivery of the partition instead.
SET enable_sort = off
-- A sort the plan cannot do without is then costed as disabled, far
-- above jit_above_cost: no JIT compilation for a statement this small.
SET jit = off
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_partitions ALIAS FOR $3;
    v_group      record;
    v_scope      int[];
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    RETURN QUERY
        SELECT c."partition", coalesce(d.sequence, c.next_sequence) - 1, pt.high_watermark,
               greatest(0, pt.high_watermark - (coalesce(d.sequence, c.next_sequence) - 1))
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
          LEFT JOIN LATERAL (SELECT x.sequence FROM rheo.deliveries x
                              WHERE x.stream = p_stream AND x.group_id = c.group_id AND x."partition" = c."partition"
                              ORDER BY x.sequence LIMIT 1) AS d ON true
         WHERE c.stream = p_stream AND c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
         ORDER BY c."partition";
END
$$;

-- The frontier was a helper of its own before; lag was its last caller.
DROP FUNCTION IF EXISTS rheo._frontier(int, int, bigint);

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.lag(text, text, int[])', 'rheo_reader');
