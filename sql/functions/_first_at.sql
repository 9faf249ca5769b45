-- The lowest sequence of a partition whose ts is at or after at, or NULL
-- when there is none (start_at, replay from_ts).
--
-- The greatest ts up to a sequence grows with the sequence, so the first
-- time mark whose max_ts reaches at is found by its index: every event
-- up to the mark before it is older than at, and the event sought lies
-- after that one, among the next 1024 (more only where pruning took the
-- events that set the mark). Without such a mark it lies after the last
-- mark. Either way the events are read from there by the primary key.
--
-- PL/pgSQL rather than SQL: Citus cannot plan a SQL function's statement
-- on its distributed tables ("parameters in SQL functions").
CREATE OR REPLACE FUNCTION rheo._first_at(stream text, "partition" int, at timestamptz)
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- Index paths only, whatever the statistics say (a new stream has none):
-- the first mark at or after the time is read from the index on max_ts,
-- never sorted out of all the partition's marks.
SET enable_seqscan = off
SET enable_sort = off
AS $$
BEGIN
    RETURN (
        SELECT e.sequence
          FROM rheo.events e
         WHERE e.stream = $1 AND e."partition" = $2 AND e.ts >= $3
           AND e.sequence > coalesce(
                   (SELECT m.sequence - 1024 FROM rheo.time_marks m
                     WHERE m.stream = $1 AND m."partition" = $2 AND m.max_ts >= $3
                     ORDER BY m.max_ts, m.sequence LIMIT 1),
                   (SELECT m.sequence FROM rheo.time_marks m
                     WHERE m.stream = $1 AND m."partition" = $2
                     ORDER BY m.sequence DESC LIMIT 1),
                   0)
         ORDER BY e.sequence
         LIMIT 1);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._first_at(text, int, timestamptz)');
