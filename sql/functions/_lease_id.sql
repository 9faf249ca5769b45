-- On Citus, the lease id rheo._fetch_citus gives the event at a
-- position: the stream's hash (hashtext, as eight hex digits) in its first
-- four bytes, by which the settles find the stream (rheo._lease_streams);
-- the rest an md5 of the fetch's nonce and the position, with the version
-- digit 8, which tells these ids from the random (version 4) ones of a
-- single server. Deterministic: Citus refuses a volatile function in the
-- SET of an UPDATE. Inlinable (see rheo._route): the numbers are cast
-- to text, since text || int is only stable, and the planner inlines an
-- immutable function only where its body is immutable too.
CREATE OR REPLACE FUNCTION rheo._lease_id(mark text, nonce text, "partition" int, sequence bigint)
RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT overlay(($1 || substr(md5($2 || $3::text || '/' || $4::text), 9)) PLACING '8' FROM 13)::uuid
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._lease_id(text, text, int, bigint)');
