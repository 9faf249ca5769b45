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

-- The greatest ts appended to each partition so far, kept by the append
-- functions in the row they update anyway.
ALTER TABLE rheo.partitions ADD COLUMN max_ts timestamptz;

-- For every 1024th sequence of a partition, the greatest ts of the events
-- up to it. Explicit timestamps need not follow the sequence, but this
-- running maximum does, so the first mark at or past a time T is found by
-- its index, and the lowest sequence with ts >= T lies within the 1024
-- events after the mark before it (rheo._first_at).
CREATE TABLE rheo.time_marks (
    stream      text        NOT NULL,
    "partition" int         NOT NULL,
    sequence    bigint      NOT NULL,
    max_ts      timestamptz NOT NULL,
    PRIMARY KEY (stream, "partition", sequence)
);

CREATE INDEX time_marks_max_ts_idx ON rheo.time_marks (stream, "partition", max_ts, sequence);

UPDATE rheo.partitions AS pt
   SET max_ts = (SELECT max(e.ts) FROM rheo.events e WHERE e.stream = pt.stream AND e."partition" = pt."partition");

INSERT INTO rheo.time_marks (stream, "partition", sequence, max_ts)
SELECT r.stream, r."partition", r.sequence, r.max_ts
  FROM (SELECT e.stream, e."partition", e.sequence,
               max(e.ts) OVER (PARTITION BY e.stream, e."partition" ORDER BY e.sequence) AS max_ts
          FROM rheo.events e) AS r
 WHERE r.sequence % 1024 = 0;
