-- Whether a partition has work for a fetch of a group: events past the
-- cursor, deliveries due (retry delay passed, or lease expired, at the
-- attempt limit too: fetch dead-letters those), or, under 'key'
-- ordering, keys with a wakeup. One row (true) when it has, none when
-- not: rheo.fetch joins it LATERAL to the cursor rows it considers, and
-- the planner inlines it there as the condition it names (see
-- rheo._route for the inlinable helpers).
-- Every table is read by its stream too, which a Citus cluster needs to
-- route the statement to the stream's node (docs/citus.md).
DROP FUNCTION IF EXISTS rheo._has_work(int, int, bigint, bigint, timestamptz, boolean);
CREATE OR REPLACE FUNCTION rheo._has_work(stream text, group_id int, "partition" int, next_sequence bigint,
                                          high_watermark bigint, now timestamptz, key_ordering boolean)
RETURNS SETOF boolean
LANGUAGE sql STABLE
AS $$
    SELECT true
     WHERE $4 <= $5
        OR EXISTS (SELECT 1 FROM rheo.deliveries d
                    WHERE d.stream = $1 AND d.group_id = $2 AND d."partition" = $3
                      AND d.expires_at <= $6)
        OR ($7 AND EXISTS (SELECT 1 FROM rheo.key_wakeups w
                            WHERE w.stream = $1 AND w.group_id = $2 AND w."partition" = $3))
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._has_work(text, int, int, bigint, bigint, timestamptz, boolean)');
