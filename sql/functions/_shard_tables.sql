-- The tables that the statements of a call on one stream's rows name, in
-- the order of tables (docs/citus.md, "Statements on the shards"): here,
-- and on a Citus node that does not hold the stream, the tables
-- themselves ('rheo.deliveries', …), which Citus routes.
-- sql/citus/distribute.sql replaces it on Citus with one that names the
-- stream's shards on the node that holds them, whose statements
-- PostgreSQL plans alone. The names are ready for format's %s.
CREATE OR REPLACE FUNCTION rheo._shard_tables(stream text, tables text[])
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT array_agg(format('rheo.%I', x.t) ORDER BY x.o) FROM unnest(tables) WITH ORDINALITY AS x(t, o)
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._shard_tables(text, text[])');
