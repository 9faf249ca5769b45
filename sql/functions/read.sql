-- Reads one partition of a stream in sequence order.
CREATE OR REPLACE FUNCTION rheo.read(stream text, after bigint DEFAULT 0, max_count int DEFAULT 100,
                                     "partition" int DEFAULT 0)
RETURNS SETOF rheo.events
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream    ALIAS FOR $1;
    p_after     ALIAS FOR $2;
    p_max_count ALIAS FOR $3;
    p_partition ALIAS FOR $4;
    v_count     int;
BEGIN
    v_count := rheo._stream(p_stream);
    IF p_after IS NULL OR p_max_count IS NULL OR p_partition IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'after, max_count and partition must not be NULL';
    END IF;
    IF p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', p_max_count);
    END IF;
    IF p_partition < 0 OR p_partition >= v_count THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = format('partition %s is outside 0..%s', p_partition, v_count - 1);
    END IF;
    RETURN QUERY
        SELECT e.* FROM rheo.events e
         WHERE e.stream = p_stream AND e."partition" = p_partition AND e.sequence > p_after
         ORDER BY e.sequence
         LIMIT p_max_count;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.read(text, bigint, int, int)', 'rheo_reader');
