-- A version 7 (time-ordered) UUID for the given instant: 48 bits of Unix
-- milliseconds, then random bits. Generated event ids built from it keep
-- the id index append-friendly.
CREATE OR REPLACE FUNCTION rheo._uuid_v7(at timestamptz)
RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    -- gen_random_uuid() is version 4 (0100 in bits 52..55 of the bytea);
    -- setting bits 52 and 53 turns the version nibble into 0111.
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM $1) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;
