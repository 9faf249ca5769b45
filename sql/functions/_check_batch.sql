-- Checks the inputs of an append (rheo._append) in the order they are
-- reported: every payload an object, then the given ids (non-empty, at
-- most 1024 bytes), the given keys, and the keys taken from payloads (the
-- effective key of an input without one in keys), all at most 1024
-- bytes. Raises the first failure, else returns true.
--
-- rheo._append does not call it on every append: it tests each input
-- with a few cheap expressions in the statement that reads the payloads
-- anyway, and calls this only when one fails, to report exactly what is
-- wrong (a pass over every payload here costs more than the rest of the
-- checks together).
CREATE OR REPLACE FUNCTION rheo._check_batch(payloads jsonb, keys text[], ids text[])
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_payloads ALIAS FOR $1;
    p_keys     ALIAS FOR $2;
    p_ids      ALIAS FOR $3;
    v_n        int := jsonb_array_length(p_payloads);
    v_bad      bigint;
    v_bytes    int;
BEGIN
    -- Strict mode: lax mode would look inside an element that is an array.
    IF jsonb_path_exists(p_payloads, 'strict $[*] ? (@.type() != "object")') THEN
        SELECT x.ord INTO v_bad
          FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
         WHERE jsonb_typeof(x.v) <> 'object'
         LIMIT 1;
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = CASE WHEN v_n = 1 THEN 'payload must be a JSON object'
                          ELSE format('payload %s of the batch is not a JSON object', v_bad - 1) END;
    END IF;
    IF array_position(p_ids, '') IS NOT NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'event ids must not be empty';
    END IF;
    -- Ids are indexed and keys stored and compared on every append: at
    -- most 1024 bytes each, the given ones first, then the keys taken
    -- from payloads.
    SELECT u.ord, octet_length(u.id) INTO v_bad, v_bytes
      FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
     WHERE octet_length(u.id) > 1024
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = CASE WHEN v_n = 1 THEN format('event id must be at most 1024 bytes, got %s bytes', v_bytes)
                          ELSE format('event id %s of the batch must be at most 1024 bytes, got %s bytes', v_bad - 1, v_bytes) END;
    END IF;
    SELECT u.ord, octet_length(u.key) INTO v_bad, v_bytes
      FROM unnest(p_keys) WITH ORDINALITY AS u(key, ord)
     WHERE octet_length(u.key) > 1024
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = CASE WHEN v_n = 1 THEN format('key must be at most 1024 bytes, got %s bytes', v_bytes)
                          ELSE format('key %s of the batch must be at most 1024 bytes, got %s bytes', v_bad - 1, v_bytes) END;
    END IF;
    SELECT x.ord, octet_length(x.v ->> 'key') INTO v_bad, v_bytes
      FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
     WHERE octet_length(x.v ->> 'key') > 1024 AND nullif(p_keys[x.ord::int], '') IS NULL
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = CASE WHEN v_n = 1 THEN format('payload key must be at most 1024 bytes, got %s bytes', v_bytes)
                          ELSE format('payload key %s of the batch must be at most 1024 bytes, got %s bytes', v_bad - 1, v_bytes) END;
    END IF;
    RETURN true;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_batch(jsonb, text[], text[])');
