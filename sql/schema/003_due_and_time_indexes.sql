-- Index paths for what used to read the whole group or log: deliveries
-- due again, and the first event at or after a time. See docs/design.md.

-- Deliveries by when they are due (a lease's expiry, a retry's end of
-- delay): a fetch finds the ones due now, and learns that there are none,
-- without reading the leases in flight. It makes renew, which only moves
-- expires_at, an update that is no longer HOT; renewals are rare next to
-- claims and settles.
CREATE INDEX deliveries_due_idx ON rheo.deliveries (group_id, "partition", expires_at);

-- Settles leave a dead row each: let autovacuum come after a fixed number
-- of them rather than after a fraction of a table that stays small (the
-- Go driver vacuums it itself where its role may).
ALTER TABLE rheo.deliveries SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000);

-- The ts of each delivery's event, so that the oldest unsettled event of
-- a group is found among its deliveries without looking up their events.
ALTER TABLE rheo.deliveries ADD COLUMN ts timestamptz;
UPDATE rheo.deliveries AS d
   SET ts = e.ts
  FROM rheo.groups g, rheo.events e
 WHERE g.group_id = d.group_id
   AND e.stream = g.stream AND e."partition" = d."partition" AND e.sequence = d.sequence;
ALTER TABLE rheo.deliveries ALTER COLUMN ts SET NOT NULL;

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
CREATE TABLE rheo.time_marks (
    stream      text        NOT NULL,
    "partition" int         NOT NULL,
    sequence    bigint      NOT NULL,
    max_ts      timestamptz NOT NULL,
    min_ts      timestamptz NOT NULL,
    PRIMARY KEY (stream, "partition", sequence)
);

CREATE INDEX time_marks_max_ts_idx ON rheo.time_marks (stream, "partition", max_ts, sequence);

-- The greatest ts appended to the partition, and the least ts of the
-- events after its last mark (NULL when there are none).
ALTER TABLE rheo.partitions ADD COLUMN max_ts timestamptz, ADD COLUMN tail_min_ts timestamptz;

INSERT INTO rheo.time_marks (stream, "partition", sequence, max_ts, min_ts)
SELECT r.stream, r."partition", r.sequence, r.max_ts, r.min_ts
  FROM (SELECT e.stream, e."partition", e.sequence,
               max(e.ts) OVER (PARTITION BY e.stream, e."partition" ORDER BY e.sequence) AS max_ts,
               min(e.ts) OVER (PARTITION BY e.stream, e."partition", (e.sequence - 1) / 1024) AS min_ts
          FROM rheo.events e) AS r
 WHERE r.sequence % 1024 = 0;

UPDATE rheo.partitions AS pt
   SET max_ts = (SELECT max(e.ts) FROM rheo.events e
                  WHERE e.stream = pt.stream AND e."partition" = pt."partition"),
       tail_min_ts = (SELECT min(e.ts) FROM rheo.events e
                       WHERE e.stream = pt.stream AND e."partition" = pt."partition"
                         AND e.sequence > pt.high_watermark / 1024 * 1024);
