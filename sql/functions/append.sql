-- Appends one event to a stream (see rheo._append for the rules).
CREATE OR REPLACE FUNCTION rheo.append(stream text, payload jsonb, key text DEFAULT NULL,
                                       "partition" int DEFAULT NULL, id text DEFAULT NULL,
                                       metadata jsonb DEFAULT '{}', ts timestamptz DEFAULT NULL,
                                       clock timestamptz DEFAULT NULL)
RETURNS rheo.events
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_event rheo.events;
BEGIN
    SELECT * INTO v_event
      FROM rheo._append($1, jsonb_build_array($2), ARRAY[$3], ARRAY[$5], $4, $6, $7, $8);
    RETURN v_event;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.append(text, jsonb, text, int, text, jsonb, timestamptz, timestamptz)', 'rheo_producer');
