-- The event at a position of a stream: none or one row, by the events'
-- primary key. Inlined where a statement reads the events of its
-- deliveries (see rheo._route). LIMIT 1 keeps the body a subquery of its
-- own when inlined, so that the caller's plan probes the primary key
-- once per row it joins: without it the planner pulls the lookup up
-- into the join, and a generic plan, knowing no positions, may join by
-- hashing every event of the stream.
CREATE OR REPLACE FUNCTION rheo._event(stream text, "partition" int, sequence bigint)
RETURNS SETOF rheo.events
LANGUAGE sql STABLE
AS $$
    SELECT e.* FROM rheo.events e
     WHERE e.stream = $1 AND e."partition" = $2 AND e.sequence = $3
     LIMIT 1
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._event(text, int, bigint)');
