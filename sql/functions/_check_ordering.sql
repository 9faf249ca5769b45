-- Validates an ordering word (reference §3.3): 'none', 'key' or 'partition'.
CREATE OR REPLACE FUNCTION rheo._check_ordering(ordering text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF $1 IS NULL OR $1 NOT IN ('none', 'key', 'partition') THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('ordering must be none, key or partition, got %s', coalesce(quote_literal(left($1, 64)), 'NULL'));
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_ordering(text)');
