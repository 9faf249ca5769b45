-- The twin of sql/schema/003_due_and_time_indexes.sql. rheo_deliveries
-- has had its index by due time since 001; this adds the time marks
-- that find the first event at or after a time (start_at, replay from_ts)
-- without reading the partition from its first event.

-- The greatest ts appended to each partition so far, in microseconds.
ALTER TABLE rheo_partitions ADD COLUMN max_ts INTEGER;

-- For every 1024th sequence of a partition, the greatest ts of the events
-- up to it: a running maximum, so it grows with the sequence even where
-- explicit timestamps do not.
CREATE TABLE rheo_time_marks (
    stream      TEXT    NOT NULL,
    "partition" INTEGER NOT NULL,
    sequence    INTEGER NOT NULL,
    max_ts      INTEGER NOT NULL,
    PRIMARY KEY (stream, "partition", sequence)
) STRICT, WITHOUT ROWID;

CREATE INDEX rheo_time_marks_max_ts ON rheo_time_marks (stream, "partition", max_ts, sequence);

UPDATE rheo_partitions AS p
   SET max_ts = (SELECT max(e.ts) FROM rheo_events AS e WHERE e.stream = p.stream AND e."partition" = p."partition");

INSERT INTO rheo_time_marks (stream, "partition", sequence, max_ts)
SELECT r.stream, r."partition", r.sequence, r.max_ts
  FROM (SELECT e.stream, e."partition", e.sequence,
               max(e.ts) OVER (PARTITION BY e.stream, e."partition" ORDER BY e.sequence) AS max_ts
          FROM rheo_events AS e) AS r
 WHERE r.sequence % 1024 = 0;
