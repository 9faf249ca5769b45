-- Whether Rheo is installed distributed on a Citus cluster (docs/citus.md).
-- false here; sql/citus/distribute.sql replaces the body with true on a
-- Citus coordinator, after the functions are installed. A constant
-- that the planner folds: the single server's fetch and settles pay
-- nothing for the test of it that chooses their Citus statements.
CREATE OR REPLACE FUNCTION rheo._distributed()
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT false
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._distributed()');
