-- Rejects a clock or ts argument outside the years 0001 to 9999 (UTC),
-- infinities included: timestamps the functions store or add durations
-- to must stay finite, well inside timestamptz's range, and within what
-- every driver can represent. NULL (the default: now()) passes.
CREATE OR REPLACE FUNCTION rheo._check_time(name text, value timestamptz)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT isfinite($2) OR $2 < '0001-01-01 00:00:00+00' OR $2 >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('%s must be finite, from 0001-01-01T00:00:00Z up to but not including 10000-01-01T00:00:00Z, got %s',
                            $1, $2);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_time(text, timestamptz)');
