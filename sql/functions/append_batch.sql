-- Appends a batch atomically, returning the events in input order.
CREATE OR REPLACE FUNCTION rheo.append_batch(stream text, payloads jsonb, keys text[] DEFAULT NULL,
                                             ids text[] DEFAULT NULL, "partition" int DEFAULT NULL,
                                             metadata jsonb DEFAULT '{}', clock timestamptz DEFAULT NULL)
RETURNS SETOF rheo.events
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT * FROM rheo._append($1, $2, $3, $4, $5, $6, NULL, $7);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.append_batch(text, jsonb, text[], text[], int, jsonb, timestamptz)', 'rheo_producer');
