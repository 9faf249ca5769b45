-- Validates a partitions argument against a stream's partition count and
-- returns it sorted without duplicates; NULL means every partition.
CREATE OR REPLACE FUNCTION rheo._partitions(partitions int[], partition_count int)
RETURNS int[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_partitions ALIAS FOR $1;
    p_count      ALIAS FOR $2;
    v_bad        int;
BEGIN
    PERFORM rheo._check_array('partitions', p_partitions);
    IF p_partitions IS NULL THEN
        RETURN ARRAY(SELECT generate_series(0, p_count - 1));
    END IF;
    IF array_position(p_partitions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = 'partitions must not contain NULL';
    END IF;
    SELECT x INTO v_bad FROM unnest(p_partitions) x WHERE x < 0 OR x >= p_count LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = format('partition %s is outside 0..%s', v_bad, p_count - 1);
    END IF;
    RETURN ARRAY(SELECT DISTINCT x FROM unnest(p_partitions) x ORDER BY x);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._partitions(int[], int)');
