-- The deliveries of a partition due again (retry delay passed, or lease
-- expired below the attempt limit) with the n lowest sequences, by
-- physical address. due_known: the partition has at most max_count of
-- them (rheo._due_count counted them), so they are read by the
-- index of their due time and sorted; otherwise they are many, and the
-- primary key finds the lowest soon (unless they are few among many more
-- leases in flight: that costs a read of the leases in flight below
-- them). What rheo.fetch claims again under 'none' and 'key' ordering;
-- inlined there (see rheo._route).
-- Read by the stream too, for Citus (see rheo._has_work).
DROP FUNCTION IF EXISTS rheo._due(int, int, timestamptz, int, int, int, boolean);
CREATE OR REPLACE FUNCTION rheo._due(stream text, group_id int, "partition" int, now timestamptz,
                                     max_attempts int, max_count int, n int, due_known boolean)
RETURNS SETOF tid
LANGUAGE sql STABLE
AS $$
    (SELECT y.tid
       FROM (SELECT x.ctid AS tid, x.sequence FROM rheo.deliveries x
              WHERE x.stream = $1 AND x.group_id = $2 AND x."partition" = $3
                AND x.expires_at <= $4
                AND (x.state = 'pending' OR x.attempt < $5)
              ORDER BY x.expires_at
              LIMIT $6) AS y
      WHERE $8
      ORDER BY y.sequence
      LIMIT $7)
    UNION ALL
    (SELECT x.ctid FROM rheo.deliveries x
      WHERE x.stream = $1 AND x.group_id = $2 AND x."partition" = $3
        AND x.expires_at <= $4
        AND (x.state = 'pending' OR x.attempt < $5)
        AND NOT $8
      ORDER BY x.sequence
      LIMIT $7)
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._due(text, int, int, timestamptz, int, int, int, boolean)');
