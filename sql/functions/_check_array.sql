-- Rejects an array argument that is not a plain list: PostgreSQL accepts
-- multidimensional arrays and arrays whose first index is not 1 for any
-- array type, and the functions read their arguments as lists indexed
-- from 1 (a '[0:1]' array would shift every id by one, and = ANY or
-- unnest would flatten a two-dimensional one). NULL and '{}', which has
-- no dimensions, pass.
CREATE OR REPLACE FUNCTION rheo._check_array(name text, value anyarray)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF array_ndims($2) > 1 OR array_lower($2, 1) <> 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('%s must be a one-dimensional array starting at index 1', $1);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_array(text, anyarray)');
