-- How many leases a fetch of at most max_count takes from each partition,
-- given what each can give (avail, in the order dealt): as if dealt
-- round-robin, one lease per partition per round from the partition at
-- index start (0-based) of avail, until max_count or no work is left.
-- The SQLite driver deals the same way, lease by lease (quota in
-- driver/sqlite/fetch.go); both are tested on one table of cases
-- (tests/sql/_quota_test.sql).
--
-- Computed in closed form rather than lease by lease. After v_level full
-- rounds every partition has min(avail, v_level); the leases still left
-- go, one each, to the partitions that have more, in rotation order.
CREATE OR REPLACE FUNCTION rheo._quota(avail int[], max_count int, start int)
RETURNS int[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_avail     ALIAS FOR $1;
    p_max_count ALIAS FOR $2;
    p_start     ALIAS FOR $3;
    v_k         int := coalesce(cardinality(p_avail), 0);
    v_quota     int[];
    v_level     int := 0;
    v_below     int := 0;    -- leases dealt up to v_level
    v_rest      int := v_k;  -- partitions with avail above v_level
    v_left      int;
    v_a         int;
    v_p         int;
BEGIN
    IF (SELECT coalesce(sum(a), 0) FROM unnest(p_avail) AS a) <= p_max_count THEN
        RETURN p_avail;
    END IF;
    -- The highest level whose full rounds fit in max_count: raising the
    -- level from one partition's avail to the next costs one lease per
    -- partition not yet exhausted.
    FOR v_a IN SELECT a FROM unnest(p_avail) AS a ORDER BY a LOOP
        EXIT WHEN v_below + (v_a - v_level) * v_rest > p_max_count;
        v_below := v_below + (v_a - v_level) * v_rest;
        v_level := v_a;
        v_rest := v_rest - 1;
    END LOOP;
    v_level := v_level + (p_max_count - v_below) / v_rest;
    SELECT array_agg(least(a, v_level) ORDER BY ord) INTO v_quota
      FROM unnest(p_avail) WITH ORDINALITY AS x(a, ord);
    SELECT p_max_count - sum(q) INTO v_left FROM unnest(v_quota) AS q;
    FOR i IN 0 .. v_k - 1 LOOP
        EXIT WHEN v_left = 0;
        v_p := 1 + (p_start + i) % v_k;  -- +1: arrays start at 1
        IF p_avail[v_p] > v_quota[v_p] THEN
            v_quota[v_p] := v_quota[v_p] + 1;
            v_left := v_left - 1;
        END IF;
    END LOOP;
    RETURN v_quota;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._quota(int[], int, int)');
