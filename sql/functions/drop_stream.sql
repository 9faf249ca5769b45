-- Removes a stream, its groups and every event, and returns how many
-- events it deleted. With prune, the only way events leave the log. The
-- name can be created anew, with sequences from 1.
--
-- One transaction, whatever the stream's size: prune a long stream first
-- to keep it short.
CREATE OR REPLACE FUNCTION rheo.drop_stream(stream text, confirm boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream  ALIAS FOR $1;
    p_confirm ALIAS FOR $2;
    v_deleted bigint;
BEGIN
    IF p_confirm IS NOT TRUE THEN
        RAISE EXCEPTION 'confirm_required' USING ERRCODE = 'RH008',
            DETAIL = 'drop_stream deletes the stream with every event and group: call it with confirm => true';
    END IF;
    -- The stream's lock row first: prunes, create_group and
    -- set_retention of the stream wait for the drop, and then find no
    -- stream. The delete of its catalog row at the end takes that row
    -- whole, once no append is left that could check its foreign key to
    -- it (FOR KEY SHARE) while holding a partition this drop waits for.
    PERFORM 1 FROM rheo.stream_locks l WHERE l.stream = p_stream FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
    PERFORM rheo._check_read_committed('drop_stream');
    -- Then the allocators, which waits for the appends in progress to
    -- commit and holds later ones back, so that the events deleted below
    -- are all there are; then the groups' cursors and deliveries, in the
    -- order every function takes them (docs/design.md, "Locks").
    PERFORM 1 FROM rheo.partitions pt WHERE pt.stream = p_stream ORDER BY pt."partition" FOR UPDATE;
    PERFORM 1 FROM rheo.cursors c JOIN rheo.groups g ON g.group_id = c.group_id AND g.stream = c.stream
      WHERE g.stream = p_stream AND c.stream = p_stream
      ORDER BY c.group_id, c."partition"
        FOR UPDATE OF c;
    PERFORM 1 FROM rheo.deliveries d JOIN rheo.groups g ON g.group_id = d.group_id AND g.stream = d.stream
      WHERE g.stream = p_stream AND d.stream = p_stream
      ORDER BY d.group_id, d."partition", d.sequence
        FOR UPDATE OF d;

    DELETE FROM rheo.deliveries AS d USING rheo.groups g
     WHERE g.group_id = d.group_id AND g.stream = d.stream AND g.stream = p_stream AND d.stream = p_stream;
    DELETE FROM rheo.dead_letters AS dl USING rheo.groups g
     WHERE g.group_id = dl.group_id AND g.stream = dl.stream AND g.stream = p_stream AND dl.stream = p_stream;
    DELETE FROM rheo.key_wakeups AS w USING rheo.groups g
     WHERE g.group_id = w.group_id AND g.stream = w.stream AND g.stream = p_stream AND w.stream = p_stream;
    DELETE FROM rheo.cursors AS c USING rheo.groups g
     WHERE g.group_id = c.group_id AND g.stream = c.stream AND g.stream = p_stream AND c.stream = p_stream;
    DELETE FROM rheo.groups AS g WHERE g.stream = p_stream;
    DELETE FROM rheo.events AS e WHERE e.stream = p_stream;
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    DELETE FROM rheo.time_marks AS m WHERE m.stream = p_stream;
    DELETE FROM rheo.partitions AS pt WHERE pt.stream = p_stream;
    DELETE FROM rheo.streams AS s WHERE s.stream = p_stream;
    DELETE FROM rheo.stream_locks AS l WHERE l.stream = p_stream;
    RETURN v_deleted;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.drop_stream(text, boolean)', 'rheo_admin');
