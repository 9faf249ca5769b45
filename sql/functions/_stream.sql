-- The partition count of a stream; stream_not_found when it is missing.
CREATE OR REPLACE FUNCTION rheo._stream(stream text)
RETURNS int
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream ALIAS FOR $1;
    v_count  int;
BEGIN
    SELECT s.partition_count INTO v_count FROM rheo.streams s WHERE s.stream = p_stream;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
    RETURN v_count;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._stream(text)');
