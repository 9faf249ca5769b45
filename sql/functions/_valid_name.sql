-- Whether a stream or group name is well formed (reference §1.2).
CREATE OR REPLACE FUNCTION rheo._valid_name(name text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce($1 ~ '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$', false)
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._valid_name(text)');
