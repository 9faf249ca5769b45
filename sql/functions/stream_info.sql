-- Each partition's retained range, and the stream's retention.
CREATE OR REPLACE FUNCTION rheo.stream_info(stream text)
RETURNS TABLE ("partition" int, low_watermark bigint, high_watermark bigint, max_age interval)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream ALIAS FOR $1;
BEGIN
    PERFORM rheo._stream(p_stream);
    RETURN QUERY
        SELECT pt."partition", pt.low_watermark, pt.high_watermark, s.max_age
          FROM rheo.partitions pt
          JOIN rheo.streams s ON s.stream = pt.stream
         WHERE pt.stream = p_stream
         ORDER BY pt."partition";
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.stream_info(text)', 'rheo_reader');
