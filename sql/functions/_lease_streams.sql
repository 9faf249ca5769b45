-- On Citus, the streams whose node may hold a lease: for an id a fetch
-- made there (version digit 8, rheo._lease_id), those whose hash the id
-- begins with, read from the stream catalog, a reference table with a
-- copy on every node, by its index of the hash (sql/citus/distribute.sql):
-- one, unless two names hash alike. The settles then name the stream, and
-- Citus routes them to that node alone (docs/decisions.md, "Settles on
-- Citus"). Any other id was taken before the install was converted to
-- Citus, or made up: the deliveries of every shard are asked for it.
CREATE OR REPLACE FUNCTION rheo._lease_streams(lease_id uuid)
RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_lease_id ALIAS FOR $1;
BEGIN
    IF p_lease_id IS NULL THEN
        RETURN '{}';
    END IF;
    IF substr(p_lease_id::text, 15, 1) = '8' THEN
        RETURN ARRAY(SELECT s.stream FROM rheo.streams s
                      WHERE hashtext(s.stream) = rheo._lease_hash(p_lease_id)
                      ORDER BY 1);
    END IF;
    RETURN ARRAY(SELECT DISTINCT d.stream FROM rheo.deliveries d WHERE d.lease_id = p_lease_id ORDER BY 1);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._lease_streams(uuid)');
