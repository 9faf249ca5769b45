-- Rheo storage on SQLite: the twin of sql/schema/001_init.sql, with rheo_
-- table-name prefixes in place of the rheo schema. The Go driver
-- (driver/sqlite) runs every operation as plain statements inside one
-- BEGIN IMMEDIATE transaction, so there are no functions here.
--
-- Timestamps are INTEGER microseconds since the Unix epoch (UTC): they sort
-- as numbers and round-trip exactly at the precision of PostgreSQL's
-- timestamptz. JSON is TEXT, checked to be an object where the log keeps
-- it. Tables are STRICT so that a value of the wrong type fails instead of
-- being stored as something else.

CREATE TABLE rheo_streams (
    stream          TEXT    NOT NULL PRIMARY KEY,
    partition_count INTEGER NOT NULL CHECK (partition_count >= 1),
    created_at      INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- One row per partition: the sequence allocator. An append updates it in
-- its write transaction, and SQLite has one writer at a time, so sequences
-- become visible in commit order.
CREATE TABLE rheo_partitions (
    stream         TEXT    NOT NULL REFERENCES rheo_streams (stream),
    "partition"    INTEGER NOT NULL,
    high_watermark INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (stream, "partition")
) STRICT, WITHOUT ROWID;

-- The public log. A rowid table rather than WITHOUT ROWID: payloads are
-- often larger than the few hundred bytes that clustered rows handle well,
-- and the primary key index still serves the range scans of read and fetch.
CREATE TABLE rheo_events (
    stream      TEXT    NOT NULL,
    "partition" INTEGER NOT NULL,
    sequence    INTEGER NOT NULL,
    id          TEXT    NOT NULL,
    key         TEXT,
    -- payload->>'type' as PostgreSQL renders it: strings unquoted, JSON
    -- null as NULL, other values as JSON text.
    type        TEXT GENERATED ALWAYS AS (
                    CASE json_type(payload, '$.type')
                        WHEN 'text' THEN payload ->> '$.type'
                        WHEN 'null' THEN NULL
                        ELSE payload -> '$.type'
                    END) STORED,
    payload     TEXT    NOT NULL CHECK (json_type(payload) = 'object'),
    metadata    TEXT    NOT NULL CHECK (json_type(metadata) = 'object'),
    ts          INTEGER NOT NULL,
    PRIMARY KEY (stream, "partition", sequence),
    -- id first: point lookups by id touch one narrow range, and
    -- time-ordered generated ids append at the index's right edge.
    UNIQUE (id, stream)
) STRICT;

-- Events are immutable. Appends are the driver's INSERTs; anything that
-- would change or remove an event fails with the reference's word.
CREATE TRIGGER rheo_events_no_update BEFORE UPDATE ON rheo_events
BEGIN
    SELECT RAISE(ABORT, 'immutable_event');
END;

CREATE TRIGGER rheo_events_no_delete BEFORE DELETE ON rheo_events
BEGIN
    SELECT RAISE(ABORT, 'immutable_event');
END;

-- AUTOINCREMENT: group ids are never reused, like an identity column.
CREATE TABLE rheo_groups (
    group_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    stream       TEXT    NOT NULL REFERENCES rheo_streams (stream),
    group_name   TEXT    NOT NULL,
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    created_at   INTEGER NOT NULL,
    UNIQUE (stream, group_name)
) STRICT;

-- Per group and partition, the next sequence never offered to the group.
CREATE TABLE rheo_cursors (
    group_id      INTEGER NOT NULL REFERENCES rheo_groups (group_id),
    "partition"   INTEGER NOT NULL,
    next_sequence INTEGER NOT NULL,
    PRIMARY KEY (group_id, "partition")
) STRICT, WITHOUT ROWID;

-- Deliveries that are not terminal: leased, or waiting to be claimed again
-- (after a retry delay, or reopened by replay). Acked deliveries are
-- deleted and dead letters move to rheo_dead_letters, so this table holds
-- only the work in progress.
CREATE TABLE rheo_deliveries (
    group_id    INTEGER NOT NULL,
    "partition" INTEGER NOT NULL,
    sequence    INTEGER NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('leased', 'pending')),
    lease_id    TEXT,
    consumer_id TEXT,
    attempt     INTEGER NOT NULL,
    leased_at   INTEGER,
    -- leased: when the lease lapses; pending: when it becomes claimable.
    expires_at  INTEGER NOT NULL,
    reason      TEXT,
    PRIMARY KEY (group_id, "partition", sequence)
) STRICT, WITHOUT ROWID;

-- Settles find their delivery by lease id.
CREATE UNIQUE INDEX rheo_deliveries_lease_id ON rheo_deliveries (lease_id);

-- Fetch finds what is claimable again or to dead-letter (expires_at <=
-- clock) in a range scan of this index, without reading the leases still
-- running. state and attempt make it covering for those scans; the
-- statements that change them change expires_at too.
CREATE INDEX rheo_deliveries_due ON rheo_deliveries (group_id, "partition", expires_at, state, attempt);

CREATE TABLE rheo_dead_letters (
    group_id         INTEGER NOT NULL,
    "partition"      INTEGER NOT NULL,
    sequence         INTEGER NOT NULL,
    attempt          INTEGER NOT NULL,
    reason           TEXT    NOT NULL,
    dead_lettered_at INTEGER NOT NULL,
    PRIMARY KEY (group_id, "partition", sequence)
) STRICT, WITHOUT ROWID;
