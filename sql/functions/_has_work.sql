-- Whether a partition has work for a fetch of a group: events past the
-- cursor, deliveries pending and due (retry delay passed, replayed,
-- released), a lease expired (at the attempt limit too: fetch
-- dead-letters those), looked for only once the cursor's expiry mark is
-- reached, or, under 'key' ordering, keys with a wakeup. One
-- row (true) when it has, none when not: rheo.fetch joins it LATERAL to
-- the cursor rows it considers, and the planner inlines it there as the
-- condition it names (see rheo._route). The leases in flight are not
-- read: below the mark none has expired (docs/design.md, "Due times").
CREATE OR REPLACE FUNCTION rheo._has_work(group_id int, "partition" int, next_sequence bigint,
                                          high_watermark bigint, now timestamptz, key_ordering boolean,
                                          expiry_mark timestamptz)
RETURNS SETOF boolean
LANGUAGE sql STABLE
AS $$
    SELECT true
     WHERE $3 <= $4
        OR ($7 <= $5 AND EXISTS (SELECT 1 FROM rheo.deliveries d
                                  WHERE d.group_id = $1 AND d."partition" = $2
                                    AND d.state = 'leased' AND d.expires_at <= $5))
        OR EXISTS (SELECT 1 FROM rheo.deliveries d
                    WHERE d.group_id = $1 AND d."partition" = $2
                      AND d.state = 'pending' AND d.expires_at <= $5)
        OR ($6 AND EXISTS (SELECT 1 FROM rheo.key_wakeups w
                            WHERE w.group_id = $1 AND w."partition" = $2))
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._has_work(int, int, bigint, bigint, timestamptz, boolean, timestamptz)');
