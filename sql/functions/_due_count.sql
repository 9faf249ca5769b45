-- How many deliveries of a partition are due again (pending with their
-- time passed, or, when expired says the fetch looks for them, leases
-- expired below the attempt limit), counted up to cap. They are found by
-- the indexes of their due time: the pending ones by deliveries_pending_idx,
-- which no lease enters, the expired leases by deliveries_due_idx, read
-- only once the cursor's expiry mark has passed. So the leases in flight,
-- however many, are not read, nor the events blocked behind their keys,
-- which are due at 'infinity', nor, until the mark, the entries of the
-- settled leases that a long transaction keeps. rheo.fetch counts up to
-- max_count + 1: up to max_count, those are all the deliveries due in the
-- partition, which rheo._due then reads by the same indexes. One row:
-- rheo.fetch reads it as a scalar subquery, where the planner inlines it
-- (see rheo._route).
CREATE OR REPLACE FUNCTION rheo._due_count(group_id int, "partition" int, now timestamptz, max_attempts int,
                                           cap bigint, expired boolean)
RETURNS SETOF int
LANGUAGE sql STABLE
AS $$
    SELECT count(*)::int
      FROM ((SELECT 1 FROM rheo.deliveries d
              WHERE d.group_id = $1 AND d."partition" = $2
                AND d.state = 'pending' AND d.expires_at <= $3
              ORDER BY d.expires_at
              LIMIT $5)
            UNION ALL
            (SELECT 1 FROM rheo.deliveries d
              WHERE $6 AND d.group_id = $1 AND d."partition" = $2
                AND d.expires_at <= $3
                AND d.state = 'leased' AND d.attempt < $4
              ORDER BY d.expires_at
              LIMIT $5)
            LIMIT $5) AS r
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._due_count(int, int, timestamptz, int, bigint, boolean)');
