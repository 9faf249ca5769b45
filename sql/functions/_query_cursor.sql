-- Query cursors. A cursor is base64url (no padding) of
--     q1.<fingerprint>.<position>.<position>...
-- with one position per partition in the query's scope, in partition
-- order: ascending, the highest sequence already examined; descending,
-- the lowest sequence already examined (so the next page is below it).
-- The fingerprint ties the cursor to its stream, filter and direction.

-- The fingerprint of a query: the first 16 hex digits of md5 over the
-- stream, the filter's canonical jsonb text and the direction.
CREATE OR REPLACE FUNCTION rheo._query_fingerprint(stream text, filter jsonb, descending boolean)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT substr(md5($1 || E'\n' || $2::text || E'\n' || CASE WHEN $3 THEN 'desc' ELSE 'asc' END), 1, 16)
$$;

CREATE OR REPLACE FUNCTION rheo._query_cursor_encode(fingerprint text, positions bigint[])
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- translate drops the newlines that encode() puts every 76 characters,
    -- as the target list is shorter than the source list.
    SELECT rtrim(translate(encode(convert_to('q1.' || $1 || '.' || array_to_string($2, '.'), 'UTF8'), 'base64'),
                           E'+/\n', '-_'),
                 '=')
$$;

-- The positions of a cursor issued for the query with this fingerprint
-- and scope size. Not a cursor at all: invalid_argument. A cursor of
-- another stream, filter, direction or version: cursor_not_found.
CREATE OR REPLACE FUNCTION rheo._query_cursor_decode(cursor text, fingerprint text, scope_size int)
RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_cursor      ALIAS FOR $1;
    p_fingerprint ALIAS FOR $2;
    p_scope_size  ALIAS FOR $3;
    v_text        text;
    v_parts       text[];
    v_positions   bigint[];
BEGIN
    BEGIN
        IF p_cursor !~ '^[A-Za-z0-9_-]+$' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- +3 then /4*4: restore the padding base64 decoding needs.
        v_text := convert_from(decode(rpad(translate(p_cursor, '-_', '+/'),
                                           (length(p_cursor) + 3) / 4 * 4, '='),
                                      'base64'),
                               'UTF8');
        v_parts := regexp_match(v_text, '^([a-z0-9]+)\.([0-9a-f]{16})\.([0-9]{1,19}(?:\.[0-9]{1,19})*)$');
        IF v_parts IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_positions := string_to_array(v_parts[3], '.')::bigint[];
    EXCEPTION WHEN invalid_parameter_value OR character_not_in_repertoire OR untranslatable_character
                   OR numeric_value_out_of_range THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('%L is not a query cursor', p_cursor);
    END;
    IF v_parts[1] <> 'q1' OR v_parts[2] <> p_fingerprint OR cardinality(v_positions) <> p_scope_size THEN
        RAISE EXCEPTION 'cursor_not_found' USING ERRCODE = 'RH010',
            DETAIL = format('cursor %L was not issued for this stream, filter and direction', p_cursor);
    END IF;
    RETURN v_positions;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_fingerprint(text, jsonb, boolean)');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_cursor_encode(text, bigint[])');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_cursor_decode(text, text, int)');
