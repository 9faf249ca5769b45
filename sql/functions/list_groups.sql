-- A stream's groups, ordered by name.
CREATE OR REPLACE FUNCTION rheo.list_groups(stream text)
RETURNS TABLE (group_name text, max_attempts int, created_at timestamptz, ordering text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream ALIAS FOR $1;
BEGIN
    PERFORM rheo._stream(p_stream);
    RETURN QUERY
        SELECT g.group_name, g.max_attempts, g.created_at, g.ordering
          FROM rheo.groups g
         WHERE g.stream = p_stream
         ORDER BY g.group_name;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.list_groups(text)', 'rheo_reader');
