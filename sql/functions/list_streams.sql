-- Every stream, ordered by name.
CREATE OR REPLACE FUNCTION rheo.list_streams()
RETURNS TABLE (stream text, partition_count int, created_at timestamptz)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.stream, s.partition_count, s.created_at FROM rheo.streams s ORDER BY s.stream
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.list_streams()', 'rheo_reader');
