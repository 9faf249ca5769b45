-- Creates a consumer group with a cursor per partition and its ordering
-- ('none', 'key' or 'partition', reference §3.3).
CREATE OR REPLACE FUNCTION rheo.create_group(stream text, group_name text, max_attempts int DEFAULT 20,
                                             start_after bigint DEFAULT NULL, start_at timestamptz DEFAULT NULL,
                                             partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL,
                                             ordering text DEFAULT 'none')
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream       ALIAS FOR $1;
    p_group_name   ALIAS FOR $2;
    p_max_attempts ALIAS FOR $3;
    p_start_after  ALIAS FOR $4;
    p_start_at     ALIAS FOR $5;
    p_partitions   ALIAS FOR $6;
    p_clock        ALIAS FOR $7;
    p_ordering     ALIAS FOR $8;
    v_count        int;
    v_scope        int[];
    v_group_id     int;
    v_now          timestamptz := coalesce(p_clock, now());
BEGIN
    v_count := rheo._stream(p_stream);
    -- Holds off drop_stream and prune of the stream until this commits,
    -- and waits for theirs (FOR SHARE conflicts with their FOR NO KEY
    -- UPDATE): the cursors are placed against the partitions' low
    -- watermarks as they stand.
    PERFORM 1 FROM rheo.stream_locks l WHERE l.stream = p_stream FOR SHARE;
    IF NOT FOUND THEN  -- dropped meanwhile
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
    IF NOT rheo._valid_name(p_group_name) THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('invalid group name %L: 1 to 128 characters of A-Z a-z 0-9 . _ : / -, starting with a letter or digit', p_group_name);
    END IF;
    IF EXISTS (SELECT 1 FROM rheo.groups g WHERE g.stream = p_stream AND g.group_name = p_group_name) THEN
        RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
            DETAIL = format('group %L already exists on stream %L', p_group_name, p_stream);
    END IF;
    IF p_max_attempts IS NULL OR p_max_attempts < 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_attempts must be >= 1, got %s', coalesce(p_max_attempts::text, 'NULL'));
    END IF;
    PERFORM rheo._check_start(p_start_after, p_start_at);
    v_scope := rheo._partitions(p_partitions, v_count);
    PERFORM rheo._check_time('clock', p_clock);
    PERFORM rheo._check_ordering(p_ordering);
    PERFORM rheo._check_read_committed('create_group');

    IF rheo._distributed() THEN
        -- On Citus (docs/decisions.md, "Citus") the call may run on the
        -- worker that holds the stream, where the int identity cannot be
        -- drawn. The key there is (group_id, stream), so the id need only
        -- be new on its stream: a random one, drawn again on a clash.
        -- Random rather than counted per stream, so that the ids of a
        -- shard's many streams stay apart in its group_id indexes.
        LOOP
            v_group_id := 1 + floor(random() * 2147483646)::int;
            INSERT INTO rheo.groups (group_id, stream, group_name, max_attempts, created_at, ordering)
            OVERRIDING SYSTEM VALUE
            VALUES (v_group_id, p_stream, p_group_name, p_max_attempts, v_now, p_ordering)
            ON CONFLICT DO NOTHING;
            EXIT WHEN FOUND;
            IF EXISTS (SELECT 1 FROM rheo.groups g WHERE g.stream = p_stream AND g.group_name = p_group_name) THEN
                RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
                    DETAIL = format('group %L already exists on stream %L', p_group_name, p_stream);
            END IF;
        END LOOP;
    ELSE
        INSERT INTO rheo.groups (stream, group_name, max_attempts, created_at, ordering)
        VALUES (p_stream, p_group_name, p_max_attempts, v_now, p_ordering)
        ON CONFLICT ON CONSTRAINT groups_stream_group_name_key DO NOTHING
        RETURNING groups.group_id INTO v_group_id;
        IF v_group_id IS NULL THEN  -- a concurrent create won the race
            RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
                DETAIL = format('group %L already exists on stream %L', p_group_name, p_stream);
        END IF;
    END IF;
    -- Every partition from its first retained event; the start options
    -- then place the listed ones. The stream is the partitions' own
    -- column, by which Citus sends the rows to the shard they come from.
    INSERT INTO rheo.cursors (stream, group_id, "partition", next_sequence)
    SELECT pt.stream, v_group_id, pt."partition", pt.low_watermark
      FROM rheo.partitions pt WHERE pt.stream = p_stream;
    IF p_start_after IS NOT NULL OR p_start_at IS NOT NULL THEN
        PERFORM rheo._place_cursors(v_group_id, p_stream, v_scope, p_start_after, p_start_at);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.create_group(text, text, int, bigint, timestamptz, int[], timestamptz, text)', 'rheo_admin');
