-- Validates the filter of rheo.query and returns its parts, NULL where a
-- key is absent. Unknown keys and values of the wrong JSON type are
-- invalid_argument: a misspelt key must not silently widen a query.
CREATE OR REPLACE FUNCTION rheo._query_filter(filter jsonb, partition_count int,
                                              OUT type text, OUT key text, OUT "partition" int,
                                              OUT payload jsonb, OUT metadata jsonb,
                                              OUT from_ts timestamptz, OUT to_ts timestamptz,
                                              OUT after_sequence bigint, OUT until_sequence bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_filter  ALIAS FOR $1;
    p_count   ALIAS FOR $2;
    v_unknown text;
    v_n       numeric;
BEGIN
    IF p_filter IS NULL OR jsonb_typeof(p_filter) <> 'object' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'filter must be a JSON object';
    END IF;
    SELECT k INTO v_unknown
      FROM jsonb_object_keys(p_filter) AS k
     WHERE k <> ALL (ARRAY['type', 'key', 'partition', 'payload', 'metadata', 'from', 'to',
                           'after_sequence', 'until_sequence'])
     ORDER BY k
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('unknown filter key %L', v_unknown);
    END IF;

    IF p_filter ? 'type' THEN
        IF jsonb_typeof(p_filter -> 'type') <> 'string' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter type must be a string';
        END IF;
        type := p_filter ->> 'type';
    END IF;

    -- events.key never holds '' (an empty key counts as no key), so an
    -- empty key could only ever match nothing.
    IF p_filter ? 'key' THEN
        IF jsonb_typeof(p_filter -> 'key') <> 'string' OR p_filter ->> 'key' = '' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter key must be a non-empty string';
        END IF;
        key := p_filter ->> 'key';
    END IF;

    IF p_filter ? 'partition' THEN
        IF jsonb_typeof(p_filter -> 'partition') <> 'number' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter partition must be an integer';
        END IF;
        v_n := (p_filter ->> 'partition')::numeric;
        IF v_n <> trunc(v_n) THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter partition must be an integer';
        END IF;
        IF v_n < 0 OR v_n >= p_count THEN
            RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
                DETAIL = format('partition %s is outside 0..%s', v_n, p_count - 1);
        END IF;
        "partition" := v_n::int;
    END IF;

    IF p_filter ? 'payload' THEN
        IF jsonb_typeof(p_filter -> 'payload') <> 'object' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter payload must be a JSON object';
        END IF;
        payload := p_filter -> 'payload';
    END IF;

    IF p_filter ? 'metadata' THEN
        IF jsonb_typeof(p_filter -> 'metadata') <> 'object' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter metadata must be a JSON object';
        END IF;
        metadata := p_filter -> 'metadata';
    END IF;

    from_ts := rheo._query_filter_ts(p_filter, 'from');
    to_ts := rheo._query_filter_ts(p_filter, 'to');
    after_sequence := rheo._query_filter_sequence(p_filter, 'after_sequence');
    until_sequence := rheo._query_filter_sequence(p_filter, 'until_sequence');
END
$$;

-- A timestamp of the filter: a JSON string in timestamptz input syntax
-- (RFC 3339 with an offset is the portable choice).
CREATE OR REPLACE FUNCTION rheo._query_filter_ts(filter jsonb, name text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_filter ALIAS FOR $1;
    p_name   ALIAS FOR $2;
BEGIN
    IF NOT p_filter ? p_name THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_filter -> p_name) <> 'string' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('filter %s must be a timestamp string', p_name);
    END IF;
    RETURN (p_filter ->> p_name)::timestamptz;
EXCEPTION
    WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_time_zone_displacement_value
         OR invalid_parameter_value THEN  -- an unknown time zone name
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('filter %s is not a timestamp: %s', p_name, p_filter ->> p_name);
END
$$;

-- A sequence bound of the filter: a JSON integer >= 0.
CREATE OR REPLACE FUNCTION rheo._query_filter_sequence(filter jsonb, name text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_filter ALIAS FOR $1;
    p_name   ALIAS FOR $2;
    v_n      numeric;
BEGIN
    IF NOT p_filter ? p_name THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_filter -> p_name) = 'number' THEN
        v_n := (p_filter ->> p_name)::numeric;
    END IF;
    IF v_n IS NULL OR v_n <> trunc(v_n) OR v_n < 0 OR v_n > 9223372036854775807 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('filter %s must be an integer >= 0, got %s', p_name, p_filter -> p_name);
    END IF;
    RETURN v_n::bigint;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_filter(jsonb, int)');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_filter_ts(jsonb, text)');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_filter_sequence(jsonb, text)');
