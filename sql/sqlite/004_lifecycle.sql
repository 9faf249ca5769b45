-- The twin of sql/schema/004_lifecycle.sql (reference §7): retention, low
-- watermarks, and the one way events may leave the log (prune and
-- drop_stream).

-- The stream's retention in microseconds; NULL keeps its events forever.
ALTER TABLE rheo_streams ADD COLUMN max_age INTEGER CHECK (max_age > 0);

-- The lowest sequence not pruned: the first retained event, or the high
-- watermark + 1 when none is. Only prune raises it; sequences are never
-- reused.
ALTER TABLE rheo_partitions ADD COLUMN low_watermark INTEGER NOT NULL DEFAULT 1;

-- Permits to delete events. SQLite has no roles, so the delete guard on
-- rheo_events cannot ask who deletes, as PostgreSQL's does: it asks
-- whether a permit covers the row. The driver's prune and drop_stream
-- insert one permit per partition they delete from, delete the events of
-- that range, and delete the permit again, all in their own transaction:
-- no permit is ever committed, so no other connection sees one, and a
-- plain DELETE finds none and fails immutable_event as before.
CREATE TABLE rheo_event_deletions (
    stream      TEXT    NOT NULL,
    "partition" INTEGER NOT NULL,
    -- Events of the partition up to this sequence may be deleted.
    through     INTEGER NOT NULL,
    PRIMARY KEY (stream, "partition")
) STRICT, WITHOUT ROWID;

DROP TRIGGER rheo_events_no_delete;

CREATE TRIGGER rheo_events_no_delete BEFORE DELETE ON rheo_events
WHEN NOT EXISTS (SELECT 1 FROM rheo_event_deletions AS p
                  WHERE p.stream = OLD.stream AND p."partition" = OLD."partition"
                    AND OLD.sequence <= p.through)
BEGIN
    SELECT RAISE(ABORT, 'immutable_event');
END;
