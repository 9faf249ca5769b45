-- Creates a stream and its partitions' sequence allocators.
CREATE OR REPLACE FUNCTION rheo.create_stream(stream text, partition_count int DEFAULT 1,
                                              clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream ALIAS FOR $1;
    p_count  ALIAS FOR $2;
    p_clock  ALIAS FOR $3;
BEGIN
    IF NOT rheo._valid_name(p_stream) THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('invalid stream name %L: 1 to 128 characters of A-Z a-z 0-9 . _ : / -, starting with a letter or digit', p_stream);
    END IF;
    IF EXISTS (SELECT 1 FROM rheo.streams s WHERE s.stream = p_stream) THEN
        RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
            DETAIL = format('stream %L already exists', p_stream);
    END IF;
    IF p_count IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'partition_count must not be NULL';
    END IF;
    -- At most 4096: every partition is a row of rheo.partitions and of
    -- rheo.cursors for each group, and a fetch reads them all.
    IF p_count < 1 OR p_count > 4096 THEN
        RAISE EXCEPTION 'invalid_partition_count' USING ERRCODE = 'RH006',
            DETAIL = format('partition_count must be between 1 and 4096, got %s', p_count);
    END IF;
    PERFORM rheo._check_time('clock', p_clock);

    INSERT INTO rheo.streams (stream, partition_count, created_at)
    VALUES (p_stream, p_count, coalesce(p_clock, now()))
    ON CONFLICT ON CONSTRAINT streams_pkey DO NOTHING;
    IF NOT FOUND THEN  -- a concurrent create won the race
        RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
            DETAIL = format('stream %L already exists', p_stream);
    END IF;
    INSERT INTO rheo.stream_locks (stream) VALUES (p_stream);
    INSERT INTO rheo.partitions (stream, "partition", high_watermark)
    SELECT p_stream, x, 0 FROM generate_series(0, p_count - 1) x;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.create_stream(text, int, timestamptz)', 'rheo_admin');
