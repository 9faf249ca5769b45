-- The event at a position of a stream: none or one row, by the events'
-- primary key. Inlined where a statement reads the events of its
-- deliveries (see rheo._route).
CREATE OR REPLACE FUNCTION rheo._event(stream text, "partition" int, sequence bigint)
RETURNS SETOF rheo.events
LANGUAGE sql STABLE
AS $$
    SELECT e.* FROM rheo.events e
     WHERE e.stream = $1 AND e."partition" = $2 AND e.sequence = $3
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._event(text, int, bigint)');
