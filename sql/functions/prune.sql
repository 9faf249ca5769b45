-- Deletes the aged events of a stream that every group has passed, at
-- most max_count, and returns how many. Call it again until it returns 0.
--
-- Per partition, in partition order and each from its oldest event, it
-- deletes the longest run of lowest sequences that all qualify: ts older
-- than clock - max_age (the stream's retention) and, unless force,
-- terminal for every group of the stream (at or below its frontier). The
-- first event that does not qualify stops the partition, so the retained
-- range stays contiguous: an aged event behind a younger one waits. A
-- stream without retention keeps everything. force deletes aged events
-- that groups have not settled too: their deliveries and dead letters go,
-- their leases become stale, and their cursors move past them.
--
-- Locks, held to commit, in the order every function takes them
-- (docs/design.md, "Locks"): the stream's row of rheo.stream_locks, FOR
-- NO KEY UPDATE, so that prunes of the stream, drop_stream, set_retention
-- and create_group wait for each other, and appends, which never lock
-- it, do not; the cursors of each partition in turn, for every group, so
-- that no replay or reset moves a cursor below what is deleted: FOR KEY
-- SHARE, which a fetch's FOR NO KEY UPDATE does not conflict with (a
-- fetch only moves a cursor forward, past what a prune deletes), and
-- with force, which moves cursors itself, FOR UPDATE; with force, then,
-- the deliveries it deletes, in primary key order across the partitions,
-- once every cursor is held; and last, the partitions' rows, to move
-- their low watermarks, which appends wait for no longer than this
-- commit. Bounded by max_count, each call is a short transaction: see
-- docs/design.md, "Retention", for its cost and what it leaves to vacuum.
CREATE OR REPLACE FUNCTION rheo.prune(stream text, max_count int DEFAULT 10000, force boolean DEFAULT false,
                                      clock timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    p_stream    ALIAS FOR $1;
    p_max_count ALIAS FOR $2;
    p_force     ALIAS FOR $3;
    p_clock     ALIAS FOR $4;
    v_count     int;
    v_max_age   interval;
    v_cutoff    timestamptz;
    v_left      bigint;
    v_deleted   bigint := 0;
    v_n         bigint;
    v_p         int;
    v_low       bigint;
    v_high      bigint;
    v_end       bigint;
    v_young     bigint;
    v_passed    bigint;
    v_parts     int[] := '{}';
    v_starts    bigint[] := '{}';
    v_lows      bigint[] := '{}';
BEGIN
    v_count := rheo._stream(p_stream);
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    IF p_force IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'force must not be NULL';
    END IF;
    PERFORM rheo._check_time('clock', p_clock);
    PERFORM rheo._check_read_committed('prune');

    PERFORM 1 FROM rheo.stream_locks l WHERE l.stream = p_stream FOR NO KEY UPDATE;
    SELECT s.max_age INTO v_max_age FROM rheo.streams s WHERE s.stream = p_stream;
    IF NOT FOUND THEN  -- dropped meanwhile
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
    IF v_max_age IS NULL OR p_max_count = 0 THEN
        RETURN 0;
    END IF;
    v_cutoff := coalesce(p_clock, now()) - v_max_age;
    -- Months and days of opposite signs (set_retention checks its own
    -- clock only) can make the cutoff reach the clock in a month of
    -- another length: nothing is aged then.
    IF v_cutoff >= coalesce(p_clock, now()) THEN
        RETURN 0;
    END IF;
    v_left := p_max_count;

    -- First the run of each partition, in partition order, with its
    -- cursors locked.
    FOR v_p IN 0 .. v_count - 1 LOOP
        EXIT WHEN v_left = 0;
        IF p_force THEN  -- it may move them
            PERFORM 1 FROM rheo.cursors c JOIN rheo.groups g ON g.group_id = c.group_id AND g.stream = c.stream
              WHERE g.stream = p_stream AND c.stream = p_stream AND c."partition" = v_p
              ORDER BY c.group_id
                FOR UPDATE OF c;
        ELSE
            PERFORM 1 FROM rheo.cursors c JOIN rheo.groups g ON g.group_id = c.group_id AND g.stream = c.stream
              WHERE g.stream = p_stream AND c.stream = p_stream AND c."partition" = v_p
              ORDER BY c.group_id
                FOR KEY SHARE OF c;
        END IF;
        SELECT pt.low_watermark, pt.high_watermark INTO v_low, v_high
          FROM rheo.partitions pt WHERE pt.stream = p_stream AND pt."partition" = v_p;
        -- The run ends before the first event young enough to keep, and,
        -- unless force, at the lowest frontier of the stream's groups.
        v_end := least(v_high, v_low + v_left - 1);
        v_young := rheo._first_at(p_stream, v_p, v_cutoff);
        IF v_young IS NOT NULL THEN
            v_end := least(v_end, v_young - 1);
        END IF;
        IF NOT p_force THEN
            -- rheo._frontier of each cursor, spelt out with the stream
            -- so that Citus sends the statement to the stream's node.
            SELECT min(coalesce(
                       (SELECT d.sequence FROM rheo.deliveries d
                         WHERE d.stream = p_stream AND d.group_id = c.group_id AND d."partition" = c."partition"
                         ORDER BY d.sequence LIMIT 1),
                       c.next_sequence) - 1) INTO v_passed
              FROM rheo.cursors c JOIN rheo.groups g ON g.group_id = c.group_id AND g.stream = c.stream
             WHERE g.stream = p_stream AND c.stream = p_stream AND c."partition" = v_p;
            v_end := least(v_end, coalesce(v_passed, v_end));
        END IF;
        CONTINUE WHEN v_end < v_low;
        -- Sequences from the low watermark to the high one are all there.
        v_left := v_left - (v_end - v_low + 1);
        v_parts := v_parts || v_p;
        v_starts := v_starts || v_low;
        v_lows := v_lows || (v_end + 1);
    END LOOP;

    IF p_force THEN
        -- Groups that have not settled all of a run lose it: their
        -- deliveries of it, locked in primary key order across the
        -- partitions, the order of ack_batch, replay, reset_group and
        -- drop_stream (a partition at a time, group after group, would
        -- hold one group's delivery in partition 0 while a batch held
        -- another's in partition 1, each waiting for the other's).
        PERFORM 1 FROM rheo.deliveries d
          JOIN rheo.groups g ON g.group_id = d.group_id AND g.stream = d.stream
          JOIN unnest(v_parts, v_lows) AS r(part, low) ON r.part = d."partition"
          WHERE g.stream = p_stream AND d.stream = p_stream AND d.sequence < r.low
          ORDER BY d.group_id, d."partition", d.sequence
            FOR UPDATE OF d;
    END IF;

    FOR i IN 1 .. cardinality(v_parts) LOOP
        v_p := v_parts[i];
        v_low := v_starts[i];
        v_end := v_lows[i] - 1;
        IF p_force THEN
            -- A delivery deleted with events of its key blocked behind it
            -- (beyond the run) leaves a wakeup of the key, as a settle does.
            -- The cursors move past the run.
            WITH gone AS (
                DELETE FROM rheo.deliveries AS d USING rheo.groups g
                 WHERE g.group_id = d.group_id AND g.stream = d.stream AND g.stream = p_stream
                   AND d.stream = p_stream AND d."partition" = v_p
                   AND d.sequence <= v_end
                RETURNING d.group_id, d.key, d.has_waiters
            )
            INSERT INTO rheo.key_wakeups (stream, group_id, "partition", key)
            SELECT p_stream, x.group_id, v_p, x.key FROM gone x WHERE x.has_waiters;
            UPDATE rheo.cursors AS c SET next_sequence = v_end + 1
              FROM rheo.groups g
             WHERE g.group_id = c.group_id AND g.stream = c.stream AND g.stream = p_stream
               AND c.stream = p_stream AND c."partition" = v_p
               AND c.next_sequence <= v_end;
        END IF;
        DELETE FROM rheo.dead_letters AS dl USING rheo.groups g
         WHERE g.group_id = dl.group_id AND g.stream = dl.stream AND g.stream = p_stream
           AND dl.stream = p_stream AND dl."partition" = v_p
           AND dl.sequence BETWEEN v_low AND v_end;
        DELETE FROM rheo.events AS e
         WHERE e.stream = p_stream AND e."partition" = v_p AND e.sequence BETWEEN v_low AND v_end;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        -- A mark summarises the 1024 events up to it: once they are all
        -- gone it goes too (rheo._first_at reads past missing marks).
        DELETE FROM rheo.time_marks AS m
         WHERE m.stream = p_stream AND m."partition" = v_p AND m.sequence <= v_end;
        v_deleted := v_deleted + v_n;
    END LOOP;

    -- In ascending partition order, as appends lock them. Scalars, not
    -- subscripts, in the statement: Citus 13.2 ends the server process
    -- (SIGSEGV) on this UPDATE when it subscripts the arrays.
    FOR i IN 1 .. cardinality(v_parts) LOOP
        v_p := v_parts[i];
        v_low := v_lows[i];
        UPDATE rheo.partitions AS pt SET low_watermark = v_low
         WHERE pt.stream = p_stream AND pt."partition" = v_p;
    END LOOP;
    RETURN v_deleted;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.prune(text, int, boolean, timestamptz)', 'rheo_admin');
