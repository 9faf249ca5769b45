-- The delivery whose turn it is in a partition of a group ordered by
-- partition: its earliest delivery not terminal, whatever its state, by
-- physical address; none when the partition has none in progress (then
-- the next event's turn has come). rheo.fetch offers it only when it is
-- due; inlined there (see rheo._route).
CREATE OR REPLACE FUNCTION rheo._turn(group_id int, "partition" int)
RETURNS TABLE (tid tid, sequence bigint, state text, attempt int, expires_at timestamptz)
LANGUAGE sql STABLE
AS $$
    SELECT d.ctid, d.sequence, d.state, d.attempt, d.expires_at FROM rheo.deliveries d
     WHERE d.group_id = $1 AND d."partition" = $2
     ORDER BY d.sequence
     LIMIT 1
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._turn(int, int)');
