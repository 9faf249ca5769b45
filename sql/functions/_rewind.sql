-- Rewinds a group in one partition so every event after sequence n is
-- claimable again from attempt 1: its leases become stale and its dead
-- letters are cleared, and its blocked events are dropped with the rest.
-- It never moves the cursor forward. Returns how many already-offered
-- events became claimable again. It never goes
-- below the low watermark: from a sequence below it, it rewinds to it.
-- The caller holds the cursor row's lock.
CREATE OR REPLACE FUNCTION rheo._rewind(group_id int, stream text, "partition" int, n bigint)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_group_id  ALIAS FOR $1;
    p_stream    ALIAS FOR $2;
    p_partition ALIAS FOR $3;
    p_n         ALIAS FOR $4;
    v_next      bigint;
    v_high      bigint;
    v_low       bigint;
    v_n         bigint;
    v_unoffered bigint;
BEGIN
    SELECT c.next_sequence, pt.high_watermark, pt.low_watermark INTO v_next, v_high, v_low
      FROM rheo.cursors c
      JOIN rheo.partitions pt ON pt.stream = c.stream AND pt."partition" = c."partition"
     WHERE c.stream = p_stream AND pt.stream = p_stream AND c.group_id = p_group_id AND c."partition" = p_partition;
    v_n := greatest(p_n, v_low - 1);
    IF v_next <= v_n + 1 THEN
        RETURN 0;
    END IF;
    -- Lock the deliveries in primary key order before deleting them, as
    -- every multi-row settle does (docs/design.md, "Locks").
    PERFORM 1 FROM rheo.deliveries d
      WHERE d.stream = p_stream AND d.group_id = p_group_id AND d."partition" = p_partition AND d.sequence > v_n
      ORDER BY d.sequence
        FOR UPDATE;
    -- Events blocked behind their keys ('key' ordering) and never leased
    -- were passed by the cursor but not offered (reference §1.1).
    SELECT count(*) INTO v_unoffered FROM rheo.deliveries d
     WHERE d.stream = p_stream AND d.group_id = p_group_id AND d."partition" = p_partition AND d.sequence > v_n
       AND d.state = 'blocked' AND d.attempt = 0;
    DELETE FROM rheo.deliveries AS d
     WHERE d.stream = p_stream AND d.group_id = p_group_id AND d."partition" = p_partition AND d.sequence > v_n;
    DELETE FROM rheo.dead_letters AS dl
     WHERE dl.stream = p_stream AND dl.group_id = p_group_id AND dl."partition" = p_partition AND dl.sequence > v_n;
    UPDATE rheo.cursors AS c
       SET next_sequence = v_n + 1
     WHERE c.stream = p_stream AND c.group_id = p_group_id AND c."partition" = p_partition;
    -- Offered: below the cursor and existing (a cursor placed past the
    -- high watermark has offered nothing beyond it).
    RETURN greatest(0, least(v_next - 1, v_high) - v_n - v_unoffered);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._rewind(int, text, int, bigint)');
