-- The statement that runs sql with args (the values of $1, $2, …, as
-- quote_nullable gives them) from a statement prepared in this session
-- (docs/citus.md, "Statements on the shards"): sql is prepared once per
-- session, under a name made of its text, and then planned as the
-- caller's plan_cache_mode says, so that a statement run at every call
-- is not parsed and planned again at every call. A session setting
-- remembers what was prepared; one that lost it (a rolled-back
-- transaction) looks in pg_prepared_statements. The prepared statements
-- live as long as the session; DISCARD ALL drops them and the setting
-- together.
CREATE OR REPLACE FUNCTION rheo._prepared(sql text, args text[])
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_sql  ALIAS FOR $1;
    p_args ALIAS FOR $2;
    v_name text := 'rheo_' || md5(p_sql);
BEGIN
    IF current_setting('rheo.prepared_' || v_name, true) IS DISTINCT FROM 'on' THEN
        IF NOT EXISTS (SELECT FROM pg_prepared_statements s WHERE s.name = v_name) THEN
            EXECUTE format('PREPARE %I AS %s', v_name, p_sql);
        END IF;
        PERFORM set_config('rheo.prepared_' || v_name, 'on', false);
    END IF;
    RETURN format('EXECUTE %I(%s)', v_name, array_to_string(p_args, ', '));
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._prepared(text, text[])');
