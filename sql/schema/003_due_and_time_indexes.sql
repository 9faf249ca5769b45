-- Index paths for what used to read the whole group or log: deliveries
-- due again, and the first event at or after a time. See docs/design.md.
--
-- Applied under load in steps (docs/upgrading.md): nothing here locks a
-- table for longer than a catalog change, except the switch's catch-up,
-- which reads only what was appended since the backfill. The previous
-- release's functions run until the switch; what they need meanwhile
-- (deliveries.ts filled in) is kept up by a trigger until the follow-up.

-- Deliveries by when they are due (a lease's expiry, a retry's end of
-- delay): a fetch finds the ones due now, and learns that there are none,
-- without reading the leases in flight. It makes renew, which only moves
-- expires_at, an update that is no longer HOT; renewals are rare next to
-- claims and settles.
-- rheo:step concurrently
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_due_idx ON rheo.deliveries (group_id, "partition", expires_at);

-- Settles leave a dead row each: let autovacuum come after a fixed number
-- of them rather than after a fraction of a table that stays small (the
-- Go driver vacuums it itself where its role may).
-- rheo:step online
ALTER TABLE rheo.deliveries SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000);

-- The ts of each delivery's event, so that the oldest unsettled event of
-- a group is found among its deliveries without looking up their events.
-- Until the follow-up, a trigger fills it in for the deliveries that the
-- previous release's fetch makes without it.
-- rheo:step
ALTER TABLE rheo.deliveries ADD COLUMN IF NOT EXISTS ts timestamptz;

CREATE OR REPLACE FUNCTION rheo._delivery_ts()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.ts := (SELECT e.ts
                 FROM rheo.groups g
                 JOIN rheo.events e ON e.stream = g.stream AND e."partition" = NEW."partition" AND e.sequence = NEW.sequence
                WHERE g.group_id = NEW.group_id);
    RETURN NEW;
END
$$;

REVOKE EXECUTE ON FUNCTION rheo._delivery_ts() FROM PUBLIC;

CREATE OR REPLACE TRIGGER deliveries_ts
    BEFORE INSERT ON rheo.deliveries
    FOR EACH ROW WHEN (NEW.ts IS NULL) EXECUTE FUNCTION rheo._delivery_ts();

-- rheo:step batch
UPDATE rheo.deliveries AS d
   SET ts = e.ts
  FROM rheo.groups g, rheo.events e
 WHERE (d.group_id, d."partition", d.sequence) IN
       (SELECT x.group_id, x."partition", x.sequence FROM rheo.deliveries x WHERE x.ts IS NULL LIMIT 1000)
   AND g.group_id = d.group_id
   AND e.stream = g.stream AND e."partition" = d."partition" AND e.sequence = d.sequence;

-- NOT NULL without a scan under the switch's lock: a CHECK made valid
-- beforehand proves it (and is dropped again in the switch).
-- rheo:step
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_constraint c
                    WHERE c.conrelid = 'rheo.deliveries'::regclass AND c.conname = 'deliveries_ts_not_null')
       AND EXISTS (SELECT FROM pg_attribute a
                    WHERE a.attrelid = 'rheo.deliveries'::regclass AND a.attname = 'ts' AND NOT a.attnotnull) THEN
        ALTER TABLE rheo.deliveries ADD CONSTRAINT deliveries_ts_not_null CHECK (ts IS NOT NULL) NOT VALID;
    END IF;
END
$$;

-- rheo:step online
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_constraint c
                WHERE c.conrelid = 'rheo.deliveries'::regclass AND c.conname = 'deliveries_ts_not_null' AND NOT c.convalidated) THEN
        ALTER TABLE rheo.deliveries VALIDATE CONSTRAINT deliveries_ts_not_null;
    END IF;
END
$$;

-- rheo:step switch
ALTER TABLE rheo.deliveries ALTER COLUMN ts SET NOT NULL;
ALTER TABLE rheo.deliveries DROP CONSTRAINT IF EXISTS deliveries_ts_not_null;

-- rheo:step followup
DROP TRIGGER IF EXISTS deliveries_ts ON rheo.deliveries;
DROP FUNCTION IF EXISTS rheo._delivery_ts();

-- Time marks: the log in segments of 1024 sequences per partition. For
-- each full segment, the row of its last sequence (a multiple of 1024)
-- holds the greatest ts of the events up to it and the least ts within
-- the segment. Explicit timestamps need not follow the sequence, but the
-- running maximum does, so the first mark at or past a time T is found by
-- its index, and the lowest sequence with ts >= T lies within the 1024
-- events after the mark before it (rheo._first_at). The segment minima
-- give the oldest event of a long backlog from a row per 1024 events
-- (rheo.group_info). The appends keep them in the allocation
-- (rheo._allocate); partitions keeps the same for the segment in progress.
-- rheo:step
CREATE TABLE IF NOT EXISTS rheo.time_marks (
    stream      text        NOT NULL,
    "partition" int         NOT NULL,
    sequence    bigint      NOT NULL,
    max_ts      timestamptz NOT NULL,
    min_ts      timestamptz NOT NULL,
    PRIMARY KEY (stream, "partition", sequence)
);

CREATE INDEX IF NOT EXISTS time_marks_max_ts_idx ON rheo.time_marks (stream, "partition", max_ts, sequence);

-- The greatest ts appended to the partition, and the least ts of the
-- events after its last mark (NULL when there are none).
-- rheo:step
ALTER TABLE rheo.partitions ADD COLUMN IF NOT EXISTS max_ts timestamptz, ADD COLUMN IF NOT EXISTS tail_min_ts timestamptz;

-- The marks of the full segments after each partition's last mark, at
-- most max_segments of a partition per call (NULL: all), and the number
-- made; and each partition's running maximum and tail from its last mark.
-- Helpers of this migration, dropped by its follow-up.
-- rheo:step
CREATE OR REPLACE FUNCTION rheo._fill_time_marks(max_segments int)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count bigint;
BEGIN
    INSERT INTO rheo.time_marks (stream, "partition", sequence, max_ts, min_ts)
    SELECT s.stream, s."partition", (s.segment + 1) * 1024,
           greatest(s.last_max, max(s.segment_max) OVER (PARTITION BY s.stream, s."partition" ORDER BY s.segment)),
           s.segment_min
      FROM (SELECT p.stream, p."partition", p.last_max, (e.sequence - 1) / 1024 AS segment,
                   max(e.ts) AS segment_max, min(e.ts) AS segment_min
              FROM (SELECT pt.stream, pt."partition", coalesce(m.sequence, 0) AS last_sequence, m.max_ts AS last_max,
                           least(pt.high_watermark / 1024 * 1024,
                                 coalesce(m.sequence, 0) + coalesce(max_segments::bigint * 1024, pt.high_watermark)) AS upto
                      FROM rheo.partitions pt
                      LEFT JOIN LATERAL (SELECT t.sequence, t.max_ts FROM rheo.time_marks t
                                          WHERE t.stream = pt.stream AND t."partition" = pt."partition"
                                          ORDER BY t.sequence DESC LIMIT 1) AS m ON true) AS p
              JOIN rheo.events e ON e.stream = p.stream AND e."partition" = p."partition"
                                AND e.sequence > p.last_sequence AND e.sequence <= p.upto
             GROUP BY p.stream, p."partition", p.last_max, (e.sequence - 1) / 1024) AS s;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION rheo._fill_time_tails()
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE rheo.partitions AS pt
       SET max_ts = greatest((SELECT t.max_ts FROM rheo.time_marks t
                               WHERE t.stream = pt.stream AND t."partition" = pt."partition"
                               ORDER BY t.sequence DESC LIMIT 1),
                             (SELECT max(e.ts) FROM rheo.events e
                               WHERE e.stream = pt.stream AND e."partition" = pt."partition"
                                 AND e.sequence > pt.high_watermark / 1024 * 1024)),
           tail_min_ts = (SELECT min(e.ts) FROM rheo.events e
                           WHERE e.stream = pt.stream AND e."partition" = pt."partition"
                             AND e.sequence > pt.high_watermark / 1024 * 1024);
$$;

REVOKE EXECUTE ON FUNCTION rheo._fill_time_marks(int), rheo._fill_time_tails() FROM PUBLIC;

-- The backfill, 64 segments of each partition at a time, while the
-- previous release's appends go on adding events.
-- rheo:step batch
SELECT n FROM rheo._fill_time_marks(64) AS n WHERE n > 0;

-- The switch holds the appends: the marks of what they added since the
-- backfill, then each partition's running maximum and tail. The previous
-- release's appends that waited for the switch still add events without
-- marks when it ends: the follow-up, with the appends held again, makes
-- the marks and tails again from where the switch left them.
-- rheo:step switch
SELECT rheo._fill_time_marks(NULL);
SELECT rheo._fill_time_tails();
DROP TABLE IF EXISTS rheo.upgrade_marks_from;
CREATE TABLE rheo.upgrade_marks_from AS
SELECT pt.stream, pt."partition", pt.high_watermark / 1024 * 1024 AS sequence FROM rheo.partitions pt;

-- rheo:step followup
DO $$
BEGIN
    IF to_regclass('rheo.upgrade_marks_from') IS NOT NULL THEN
        DELETE FROM rheo.time_marks AS t
         USING rheo.upgrade_marks_from f
         WHERE t.stream = f.stream AND t."partition" = f."partition" AND t.sequence > f.sequence;
        PERFORM rheo._fill_time_marks(NULL);
        PERFORM rheo._fill_time_tails();
        DROP TABLE rheo.upgrade_marks_from;
    END IF;
    DROP FUNCTION IF EXISTS rheo._fill_time_marks(int);
    DROP FUNCTION IF EXISTS rheo._fill_time_tails();
END
$$;
