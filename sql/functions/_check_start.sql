-- Validates the start options shared by create_group and reset_group.
CREATE OR REPLACE FUNCTION rheo._check_start(start_after bigint, start_at timestamptz)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF $1 IS NOT NULL AND $2 IS NOT NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'give start_after or start_at, not both';
    END IF;
    -- At most the largest bigint less one, so that the cursor after it
    -- still fits.
    IF $1 < 0 OR $1 > 9223372036854775806 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('start_after must be between 0 and 9223372036854775806, got %s', $1);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_start(bigint, timestamptz)');
