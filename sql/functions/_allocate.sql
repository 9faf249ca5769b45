-- Allocates counts[i] sequences in partition parts[i] of a stream, for
-- events whose ts is ts, and returns the last sequence before each
-- allocation.
--
-- The partitions' rows are locked until the calling transaction ends, so
-- appends to one partition serialize here and a sequence never becomes
-- visible before a lower one (docs/design.md). They are locked in the
-- order given; callers give the partitions in ascending order, so that
-- concurrent batches over several partitions cannot deadlock.
CREATE OR REPLACE FUNCTION rheo._allocate(stream text, parts int[], counts int[], ts timestamptz)
RETURNS bigint[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    p_stream ALIAS FOR $1;
    p_parts  ALIAS FOR $2;
    p_counts ALIAS FOR $3;
    p_ts     ALIAS FOR $4;
    v_bases  bigint[] := '{}';
    v_base   bigint;
    v_max    timestamptz;
BEGIN
    FOR i IN 1 .. cardinality(p_parts) LOOP
        UPDATE rheo.partitions AS pt
           SET high_watermark = pt.high_watermark + p_counts[i], max_ts = greatest(pt.max_ts, p_ts)
         WHERE pt.stream = p_stream AND pt."partition" = p_parts[i]
        RETURNING pt.high_watermark - p_counts[i], pt.max_ts INTO v_base, v_max;
        -- A time mark at every multiple of 1024 the allocation reaches.
        -- The events of one call share their ts, so the greatest ts up to
        -- each such sequence is the partition's new max_ts.
        IF (v_base + p_counts[i]) / 1024 > v_base / 1024 THEN
            INSERT INTO rheo.time_marks (stream, "partition", sequence, max_ts)
            SELECT p_stream, p_parts[i], m.sequence, v_max
              FROM generate_series((v_base / 1024 + 1) * 1024, v_base + p_counts[i], 1024) AS m(sequence);
        END IF;
        v_bases := v_bases || v_base;
    END LOOP;
    RETURN v_bases;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._allocate(text, int[], int[], timestamptz)');
