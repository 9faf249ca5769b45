-- Looks a group up, stream first: stream_not_found, then group_not_found.
CREATE OR REPLACE FUNCTION rheo._group(stream text, group_name text,
                                       OUT group_id int, OUT max_attempts int,
                                       OUT partition_count int, OUT ordering text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
BEGIN
    partition_count := rheo._stream(p_stream);
    SELECT g.group_id, g.max_attempts, g.ordering INTO group_id, max_attempts, ordering
      FROM rheo.groups g
     WHERE g.stream = p_stream AND g.group_name = p_group_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'group_not_found' USING ERRCODE = 'RH002',
            DETAIL = format('group %L does not exist on stream %L', p_group_name, p_stream);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._group(text, text)');
