-- The partition of a key among partition_count partitions (reference
-- §4.1): the first four bytes of md5(key), big-endian and unsigned
-- (bit(32)::bigint keeps it unsigned where ::int would wrap), modulo the
-- partition count; an event without a key goes to partition 0.
-- rheo.PartitionForKey is the same rule in Go.
--
-- The inlinable helpers (_route, _event_key, and fetch's _has_work,
-- _fresh, _due_count, _plan, _due, _turn and _event) are LANGUAGE sql,
-- IMMUTABLE or STABLE, SECURITY INVOKER and without SET options, so that
-- the planner inlines their bodies into the statements that call them:
-- they cost what the expression costs, not a function call. A SET
-- search_path would stop the inlining; they take the search_path of the
-- Rheo function they are inlined into (always pg_catalog, pg_temp), name
-- every table with its schema, and no role may execute them
-- (tests/sql/privileges_test.sql).
CREATE OR REPLACE FUNCTION rheo._route(key text, partition_count int)
RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- md5(NULL) is NULL: coalesce gives a keyless event partition 0,
    -- with each argument written once, so that the planner inlines the
    -- body whatever expression the caller passes.
    SELECT coalesce(((('x' || substr(md5($1), 1, 8))::bit(32)::bigint) % $2)::int, 0)
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._route(text, int)');
