-- The deliveries of a partition due again (pending with their time
-- passed, or, when expired says the fetch looks for them, leases expired
-- below the attempt limit) with the n lowest sequences, by physical
-- address. due_known: the partition has at most max_count of them
-- (rheo._due_count counted them), so they are read by the indexes of
-- their due time (see there) and sorted; otherwise they are many, and
-- the primary key finds the lowest soon (unless they are few among many
-- more leases in flight: that costs a read of the leases in flight below
-- them). What rheo.fetch claims again under 'none' and 'key' ordering;
-- inlined there (see rheo._route).
CREATE OR REPLACE FUNCTION rheo._due(group_id int, "partition" int, now timestamptz, max_attempts int,
                                     max_count int, n int, due_known boolean, expired boolean)
RETURNS SETOF tid
LANGUAGE sql STABLE
AS $$
    (SELECT y.tid
       FROM ((SELECT x.ctid AS tid, x.sequence FROM rheo.deliveries x
               WHERE x.group_id = $1 AND x."partition" = $2
                 AND x.state = 'pending' AND x.expires_at <= $3
               ORDER BY x.expires_at
               LIMIT $5)
             UNION ALL
             (SELECT x.ctid AS tid, x.sequence FROM rheo.deliveries x
               WHERE $8 AND x.group_id = $1 AND x."partition" = $2
                 AND x.expires_at <= $3
                 AND x.state = 'leased' AND x.attempt < $4
               ORDER BY x.expires_at
               LIMIT $5)) AS y
      WHERE $7
      ORDER BY y.sequence
      LIMIT $6)
    UNION ALL
    (SELECT x.ctid FROM rheo.deliveries x
      WHERE x.group_id = $1 AND x."partition" = $2
        AND x.expires_at <= $3
        AND (x.state = 'pending' OR ($8 AND x.attempt < $4))
        AND NOT $7
      ORDER BY x.sequence
      LIMIT $6)
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._due(int, int, timestamptz, int, int, int, boolean, boolean)');
