-- Sets how long a stream keeps its events: prune deletes those older
-- than max_age once every group has passed them. NULL keeps them forever.
CREATE OR REPLACE FUNCTION rheo.set_retention(stream text, max_age interval)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream  ALIAS FOR $1;
    p_max_age ALIAS FOR $2;
    v_cutoff  timestamptz;
BEGIN
    PERFORM rheo._stream(p_stream);
    IF p_max_age <= interval '0' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_age must be positive, got %s', p_max_age);
    END IF;
    -- clock - max_age must stay a timestamp for every clock Rheo accepts.
    IF p_max_age > interval '10000 years' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_age must be at most 10000 years, got %s', p_max_age);
    END IF;
    -- Positive against the clock, as prune uses it: the comparison of
    -- intervals above counts a month as 30 days, so '-2 months +61 days'
    -- passes it while now() - max_age lies a day or more in the future,
    -- where prune would delete what was appended a moment ago.
    IF p_max_age IS NOT NULL THEN
        BEGIN
            v_cutoff := now() - p_max_age;
        EXCEPTION WHEN datetime_field_overflow THEN
            v_cutoff := 'infinity';
        END;
    END IF;
    IF v_cutoff >= now() THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_age must be positive: now() - max_age must lie before now() and be a timestamp, got %s for %s',
                            CASE WHEN isfinite(v_cutoff) THEN v_cutoff::text ELSE 'no timestamp' END, p_max_age);
    END IF;
    -- A prune of the stream in progress finishes with the retention it
    -- read, and a later one reads this one: they take turns on the
    -- stream's lock row (docs/design.md, "Locks").
    PERFORM 1 FROM rheo.stream_locks l WHERE l.stream = p_stream FOR NO KEY UPDATE;
    UPDATE rheo.streams AS s SET max_age = p_max_age WHERE s.stream = p_stream;
    IF NOT FOUND THEN  -- dropped meanwhile
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.set_retention(text, interval)', 'rheo_admin');
