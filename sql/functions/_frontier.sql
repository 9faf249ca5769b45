-- The frontier of a group in a partition: everything below the lowest
-- non-terminal delivery is terminal, and with no delivery in progress
-- everything below the cursor is.
CREATE OR REPLACE FUNCTION rheo._frontier(group_id int, "partition" int, next_sequence bigint)
RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(
        (SELECT d.sequence FROM rheo.deliveries d
          WHERE d.group_id = $1 AND d."partition" = $2
          ORDER BY d.sequence LIMIT 1),
        $3) - 1
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._frontier(int, int, bigint)');
