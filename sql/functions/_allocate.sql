-- Allocates counts[i] sequences in partition parts[i] of a stream, for
-- events whose ts is ts, and returns the last sequence before each
-- allocation. It keeps the partition's time marks (rheo.time_marks).
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
    p_stream  ALIAS FOR $1;
    p_parts   ALIAS FOR $2;
    p_counts  ALIAS FOR $3;
    p_ts      ALIAS FOR $4;
    v_bases   bigint[] := '{}';
    v_base    bigint;
    v_high    bigint;
    v_max     timestamptz;
    v_tail    timestamptz;
BEGIN
    FOR i IN 1 .. cardinality(p_parts) LOOP
        -- The least ts since the last mark moves to the next mark when
        -- the allocation reaches one: then it is left as it was here,
        -- to be read back, and set below.
        UPDATE rheo.partitions AS pt
           SET high_watermark = pt.high_watermark + p_counts[i],
               max_ts = greatest(pt.max_ts, p_ts),
               tail_min_ts = CASE WHEN (pt.high_watermark + p_counts[i]) / 1024 > pt.high_watermark / 1024
                                  THEN pt.tail_min_ts ELSE least(pt.tail_min_ts, p_ts) END
         WHERE pt.stream = p_stream AND pt."partition" = p_parts[i]
        RETURNING pt.high_watermark, pt.max_ts, pt.tail_min_ts INTO v_high, v_max, v_tail;
        IF NOT FOUND THEN  -- dropped while this append waited for the row
            RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
                DETAIL = format('stream %L does not exist', p_stream);
        END IF;
        v_base := v_high - p_counts[i];
        IF v_high / 1024 > v_base / 1024 THEN
            -- A mark at every multiple of 1024 reached. The events of one
            -- call share their ts: the greatest ts up to each mark is the
            -- partition's new max_ts, the least in the first segment also
            -- counts the events before this call, and the new tail holds
            -- only events of this call, if any.
            INSERT INTO rheo.time_marks (stream, "partition", sequence, max_ts, min_ts)
            SELECT p_stream, p_parts[i], m.sequence, v_max,
                   CASE WHEN m.sequence = (v_base / 1024 + 1) * 1024 THEN least(v_tail, p_ts) ELSE p_ts END
              FROM generate_series((v_base / 1024 + 1) * 1024, v_high, 1024) AS m(sequence);
            UPDATE rheo.partitions AS pt
               SET tail_min_ts = CASE WHEN v_high % 1024 = 0 THEN NULL ELSE p_ts END
             WHERE pt.stream = p_stream AND pt."partition" = p_parts[i];
        END IF;
        v_bases := v_bases || v_base;
    END LOOP;
    RETURN v_bases;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._allocate(text, int[], int[], timestamptz)');
