-- How many events past a partition's cursor a fetch of at most max_count
-- leases may take: those up to the high watermark, capped at max_count.
-- Inlinable (see rheo._route).
CREATE OR REPLACE FUNCTION rheo._fresh(next_sequence bigint, high_watermark bigint, max_count int)
RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT greatest(0, least($3::bigint, $2 - $1 + 1))::int
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._fresh(bigint, bigint, int)');
