-- Rheo storage. The public log is rheo.events; everything else is the
-- bookkeeping of consumer groups, kept small so claims and settles stay
-- cheap however long the log grows. See docs/design.md.

CREATE TABLE rheo.streams (
    stream          text        PRIMARY KEY,
    partition_count int         NOT NULL CHECK (partition_count >= 1),
    created_at      timestamptz NOT NULL
);

-- One row per partition: the sequence allocator. An append holds this row's
-- lock until it commits, so sequences become visible in commit order.
CREATE TABLE rheo.partitions (
    stream         text   NOT NULL REFERENCES rheo.streams (stream),
    "partition"    int    NOT NULL,
    high_watermark bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (stream, "partition")
) WITH (fillfactor = 50);  -- room for HOT updates of high_watermark

CREATE TABLE rheo.events (
    stream      text        NOT NULL,
    "partition" int         NOT NULL,
    sequence    bigint      NOT NULL,
    id          text        NOT NULL,
    key         text,
    type        text        GENERATED ALWAYS AS (payload ->> 'type') STORED,
    payload     jsonb       NOT NULL,
    metadata    jsonb       NOT NULL,
    ts          timestamptz NOT NULL,
    PRIMARY KEY (stream, "partition", sequence),
    -- id first: point lookups by id touch one narrow range, and
    -- time-ordered generated ids append at the index's right edge.
    CONSTRAINT events_id_stream_key UNIQUE (id, stream)
);

CREATE TABLE rheo.groups (
    group_id     int         GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream       text        NOT NULL REFERENCES rheo.streams (stream),
    group_name   text        NOT NULL,
    max_attempts int         NOT NULL CHECK (max_attempts >= 1),
    created_at   timestamptz NOT NULL,
    CONSTRAINT groups_stream_group_name_key UNIQUE (stream, group_name)
);

-- Per group and partition, the next sequence never offered to the group.
-- Updated by every fetch that takes new events; the column is not indexed,
-- so the update is HOT.
CREATE TABLE rheo.cursors (
    group_id      int    NOT NULL REFERENCES rheo.groups (group_id),
    "partition"   int    NOT NULL,
    next_sequence bigint NOT NULL,
    PRIMARY KEY (group_id, "partition")
) WITH (fillfactor = 50);

-- Deliveries that are not terminal: leased, or waiting to be claimed again
-- (after a retry delay, or reopened by replay). Acked deliveries are
-- deleted and dead letters move to rheo.dead_letters, so this table holds
-- only the work in progress.
CREATE TABLE rheo.deliveries (
    group_id    int         NOT NULL,
    "partition" int         NOT NULL,
    sequence    bigint      NOT NULL,
    state       text        NOT NULL CHECK (state IN ('leased', 'pending')),
    lease_id    uuid,
    consumer_id text,
    attempt     int         NOT NULL,
    leased_at   timestamptz,
    -- leased: when the lease lapses; pending: when it becomes claimable.
    expires_at  timestamptz NOT NULL,
    reason      text,
    PRIMARY KEY (group_id, "partition", sequence)
) WITH (fillfactor = 70);

CREATE UNIQUE INDEX deliveries_lease_id_key ON rheo.deliveries (lease_id);

CREATE TABLE rheo.dead_letters (
    group_id         int         NOT NULL,
    "partition"      int         NOT NULL,
    sequence         bigint      NOT NULL,
    attempt          int         NOT NULL,
    reason           text        NOT NULL,
    dead_lettered_at timestamptz NOT NULL,
    PRIMARY KEY (group_id, "partition", sequence)
);

-- Rotates the starting partition of fetches without a shared row to lock.
CREATE SEQUENCE rheo.fetch_rotation AS bigint CYCLE;

CREATE TYPE rheo.lease AS (
    lease_id    uuid,
    receipt     text,
    stream      text,
    group_name  text,
    consumer_id text,
    attempt     int,
    leased_at   timestamptz,
    expires_at  timestamptz,
    event_id    text,
    "partition" int,
    sequence    bigint,
    key         text,
    type        text,
    payload     jsonb,
    metadata    jsonb,
    ts          timestamptz
);

-- The checksum of the installed sql/functions, so a migrate run with
-- unchanged functions changes nothing.
CREATE TABLE rheo.function_set (
    id           boolean     PRIMARY KEY DEFAULT true CHECK (id),
    sha256       text        NOT NULL,
    installed_at timestamptz NOT NULL
);
