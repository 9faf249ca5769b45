-- The partition a routing key maps to: the first four bytes of md5(key),
-- big-endian and unsigned, modulo the partition count. bit(32)::bigint
-- keeps the value unsigned, where ::int would wrap it negative.
CREATE OR REPLACE FUNCTION rheo._route(key text, partition_count int)
RETURNS int
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ((('x' || substr(md5($1), 1, 8))::bit(32)::bigint) % $2)::int
$$;
