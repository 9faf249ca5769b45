-- What a fetch takes from each partition whose cursor it locked: of the
-- partition's quota, the deliveries due again first (reclaim, at most as
-- many as were counted), then events past the cursor (fresh); due_known
-- says the count of due deliveries was exact (below max_count + 1), so
-- rheo._due need not look past it. Partitions with no quota are left
-- out. Inlined into both claims of rheo.fetch (see rheo._route).
CREATE OR REPLACE FUNCTION rheo._plan(parts int[], next_sequences bigint[], quotas int[], reclaims int[],
                                      max_count int)
RETURNS TABLE (part int, next_sequence bigint, reclaim int, fresh int, due_known boolean)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT x.part, x.next_sequence, least(x.quota, x.reclaim), x.quota - least(x.quota, x.reclaim),
           x.reclaim <= $5
      FROM unnest($1, $2, $3, $4) AS x(part, next_sequence, quota, reclaim)
     WHERE x.quota > 0
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._plan(int[], bigint[], int[], int[], int)');
