-- The effective key of an appended event (reference §4.1): the key
-- given with it, else its payload's "key" field; an empty string counts
-- as none. Inlinable, like rheo._route (see there).
CREATE OR REPLACE FUNCTION rheo._event_key(key text, payload jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(nullif($1, ''), nullif($2 ->> 'key', ''))
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._event_key(text, jsonb)');
