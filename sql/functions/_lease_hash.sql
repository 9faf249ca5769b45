-- On Citus, the hash of the stream a lease id belongs to: its first four
-- bytes, where rheo.fetch puts hashtext(stream) there. The settles look
-- the lease's stream up by it in the stream catalog, a reference table
-- with a copy on every node, by its index of the hash
-- (sql/citus/distribute.sql), so that their statements name the stream
-- and Citus routes them to the one node that holds the lease
-- (docs/decisions.md, "Settles on Citus"). Inlinable (see rheo._route).
CREATE OR REPLACE FUNCTION rheo._lease_hash(lease_id uuid)
RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ('x' || substr($1::text, 1, 8))::bit(32)::int
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._lease_hash(uuid)');
