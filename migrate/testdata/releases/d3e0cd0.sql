-- Rheo PostgreSQL install: roles, schema migrations 1 to 5, then the
-- functions (sha256 429d1629282dc61e9fd1901a718047784d52cae7b52d9871f379ab988107054d). Run it in one transaction; rerunning it changes
-- nothing.

DO $$BEGIN PERFORM pg_advisory_xact_lock(8243950647153092466); END$$;

CREATE SCHEMA IF NOT EXISTS rheo;

-- Roles: created when missing, if the current role may create roles.
DO $rheo_roles$
DECLARE
    v_role   text;
    v_member record;
BEGIN
    IF NOT (SELECT r.rolsuper OR r.rolcreaterole FROM pg_roles r WHERE r.rolname = current_user) THEN
        RETURN;
    END IF;
    FOREACH v_role IN ARRAY ARRAY['rheo_owner', 'rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- created by a concurrent install
            END;
        END IF;
    END LOOP;
    FOR v_member IN
        SELECT m.role, m.member
          FROM (VALUES ('rheo_reader', 'rheo_producer'), ('rheo_reader', 'rheo_consumer'),
                       ('rheo_producer', 'rheo_admin'), ('rheo_consumer', 'rheo_admin')) AS m(role, member)
         WHERE NOT pg_has_role(m.member, m.role, 'MEMBER')
    LOOP
        BEGIN
            EXECUTE format('GRANT %I TO %I', v_member.role, v_member.member);
        EXCEPTION WHEN unique_violation THEN
            NULL;  -- granted by a concurrent install
        END;
    END LOOP;
END
$rheo_roles$;

DO $rheo_owner_access$
DECLARE
    v_me    record;
    v_owner record;
BEGIN
    SELECT r.oid, r.rolname, r.rolsuper, r.rolcreaterole INTO v_me FROM pg_roles r WHERE r.rolname = current_user;
    SELECT o.oid, o.rolsuper, o.rolcanlogin INTO v_owner FROM pg_roles o WHERE o.rolname = 'rheo_owner';
    IF v_owner.oid IS NULL THEN
        RAISE NOTICE 'rheo: role rheo_owner does not exist and % may not create roles, so Rheo''s functions run as %; run rheo-migrate roles as a superuser or a role with CREATEROLE to create the roles and hand Rheo over to rheo_owner',
            v_me.rolname, v_me.rolname;
        RETURN;
    END IF;
    IF v_owner.rolsuper OR v_owner.rolcanlogin THEN
        RAISE EXCEPTION 'role rheo_owner must not own Rheo''s functions, which run with its privileges, while it %: ALTER ROLE rheo_owner NOSUPERUSER NOLOGIN',
            CASE WHEN v_owner.rolsuper THEN 'is a superuser' ELSE 'can log in' END;
    END IF;
    IF pg_has_role(v_me.oid, v_owner.oid, 'MEMBER') THEN
        RETURN;
    END IF;
    IF v_me.rolcreaterole THEN
        GRANT rheo_owner TO CURRENT_USER;
    ELSIF (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'rheo') = v_owner.oid THEN
        RAISE EXCEPTION 'Rheo in this database belongs to rheo_owner and % may not act as it: run rheo-migrate as a superuser or a role with CREATEROLE, or GRANT rheo_owner TO % for the run',
            v_me.rolname, v_me.rolname;
    ELSE
        RAISE NOTICE 'rheo: % may not act as rheo_owner, so Rheo''s functions run as %; run rheo-migrate roles as a superuser or a role with CREATEROLE to hand Rheo over to rheo_owner',
            v_me.rolname, v_me.rolname;
    END IF;
END
$rheo_owner_access$;

CREATE TABLE IF NOT EXISTS rheo.schema_version (version int4 NOT NULL);
INSERT INTO rheo.schema_version (version) SELECT 0 WHERE NOT EXISTS (SELECT FROM rheo.schema_version);

-- Schema migration 1: 001_init.sql
DO $rheo_do$
BEGIN
  IF (SELECT version FROM rheo.schema_version) < 1 THEN
    EXECUTE $rheo_sql$
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
$rheo_sql$;
    UPDATE rheo.schema_version SET version = 1;
  END IF;
END

$rheo_do$;

-- Schema migration 2: 002_query_indexes.sql
DO $rheo_do$
BEGIN
  IF (SELECT version FROM rheo.schema_version) < 2 THEN
    EXECUTE $rheo_sql$
-- Lineage lookups of rheo.query: every event of a conversation
-- (metadata correlation_id) and every event caused by one (causation_id)
-- without scanning the stream. Partial, so that events without these keys
-- cost nothing; keyed like the primary key after the value, so that each
-- partition's probe of rheo.query reads its matches in sequence order.
-- The other filters have no index by default: docs/query.md weighs what
-- each would cost appends against what it saves queries, with the DDL.
--
-- IF NOT EXISTS: on a large log, create these beforehand with CREATE
-- INDEX CONCURRENTLY and the same names, and this migration keeps them
-- instead of locking out appends while it builds them.
CREATE INDEX IF NOT EXISTS events_correlation_id_idx
    ON rheo.events (stream, (metadata ->> 'correlation_id'), "partition", sequence)
    WHERE (metadata ->> 'correlation_id') IS NOT NULL;

CREATE INDEX IF NOT EXISTS events_causation_id_idx
    ON rheo.events (stream, (metadata ->> 'causation_id'), "partition", sequence)
    WHERE (metadata ->> 'causation_id') IS NOT NULL;
$rheo_sql$;
    UPDATE rheo.schema_version SET version = 2;
  END IF;
END

$rheo_do$;

-- Schema migration 3: 003_due_and_time_indexes.sql
DO $rheo_do$
BEGIN
  IF (SELECT version FROM rheo.schema_version) < 3 THEN
    EXECUTE $rheo_sql$
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
$rheo_sql$;
    UPDATE rheo.schema_version SET version = 3;
  END IF;
END

$rheo_do$;

-- Schema migration 4: 004_lifecycle.sql
DO $rheo_do$
BEGIN
  IF (SELECT version FROM rheo.schema_version) < 4 THEN
    EXECUTE $rheo_sql$
-- Lifecycle and retention (SPEC §7): how long a stream keeps its events,
-- and where each partition's retained log begins.

-- The stream's retention: prune deletes events older than this, once
-- every group has passed them. NULL keeps them forever.
ALTER TABLE rheo.streams ADD COLUMN max_age interval;

-- The lowest sequence not pruned: the first retained event, or the high
-- watermark + 1 when none is. Only prune moves it, at the end of its
-- transaction, so appends wait for it no longer than a commit.
ALTER TABLE rheo.partitions ADD COLUMN low_watermark bigint NOT NULL DEFAULT 1;
$rheo_sql$;
    UPDATE rheo.schema_version SET version = 4;
  END IF;
END

$rheo_do$;

-- Schema migration 5: 005_ordering.sql
DO $rheo_do$
BEGIN
  IF (SELECT version FROM rheo.schema_version) < 5 THEN
    EXECUTE $rheo_sql$
-- Ordering (SPEC §8): a group hands out its events in any order ('none',
-- the default), one at a time per key ('key'), or one at a time per
-- partition ('partition'). See docs/design.md, "Ordering".

ALTER TABLE rheo.groups ADD COLUMN ordering text NOT NULL DEFAULT 'none'
    CHECK (ordering IN ('none', 'key', 'partition'));

-- The event's key, copied when a 'key' group's delivery row is made (NULL
-- for keyless events and under the other orderings; set_ordering copies
-- it when a group turns to 'key'), so that a key's deliveries are found
-- without the log.
ALTER TABLE rheo.deliveries ADD COLUMN key text;
UPDATE rheo.deliveries AS d
   SET key = e.key
  FROM rheo.groups g, rheo.events e
 WHERE g.group_id = d.group_id
   AND e.stream = g.stream AND e."partition" = d."partition" AND e.sequence = d.sequence
   AND e.key IS NOT NULL;

-- 'blocked': an event the cursor passed in 'key' mode while an earlier
-- event of its key was not terminal. It is stored once, with expires_at
-- 'infinity', so that the index of due times never reaches it, and it
-- becomes 'pending' when its turn comes.
ALTER TABLE rheo.deliveries DROP CONSTRAINT deliveries_state_check,
    ADD CONSTRAINT deliveries_state_check CHECK (state IN ('leased', 'pending', 'blocked'));

-- Set on a delivery that later events of its key are blocked behind: its
-- settle leaves a wakeup for its key. Not indexed, so setting it is HOT.
ALTER TABLE rheo.deliveries ADD COLUMN has_waiters boolean NOT NULL DEFAULT false;

-- A key's deliveries in sequence order: its earliest one not terminal,
-- the one just before a new event, and the next blocked one. The group
-- and the partition are indexed as group_id::bigint and
-- "partition"::bigint, and the probes name them so: the primary key,
-- which leads with (group_id, partition) too, cannot serve them then, so
-- no plan (generic plans may be made on an empty table, where both look
-- alike) takes it and filters on the key, reading every event blocked
-- behind a key to probe it.
CREATE INDEX deliveries_key_idx ON rheo.deliveries ((group_id::bigint), ("partition"::bigint), key, sequence)
    WHERE key IS NOT NULL;

-- The probes of that index run in generic plans, for a key the planner
-- does not know. When one hot key holds most deliveries, the statistics
-- would say that a key matches most rows, and the planner would take the
-- primary key and filter on the key instead, reading every event blocked
-- behind the hot key to probe any other. Keys are many by design: tell
-- the planner so (half as many keys as rows), whatever ANALYZE samples.
ALTER TABLE rheo.deliveries ALTER COLUMN key SET (n_distinct = -0.5);

-- Keys whose blocked events may be due for release: a settle of a
-- delivery with waiters writes one, and so does a fetch that blocks an
-- event behind a delivery not yet marked as having waiters. The next
-- 'key' fetch of the partition takes them and releases or marks the key's
-- earliest delivery. Rows live for a fetch or so; duplicates are allowed,
-- so that writing one never waits.
CREATE TABLE rheo.key_wakeups (
    group_id    int  NOT NULL,
    "partition" int  NOT NULL,
    key         text NOT NULL
);

CREATE INDEX key_wakeups_group_id_partition_idx ON rheo.key_wakeups (group_id, "partition");

ALTER TABLE rheo.key_wakeups SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000);

-- The new signatures replace the old ones, which leaves no overloads:
-- create_group gains a trailing ordering argument, list_groups an
-- ordering column, and the group lookup returns the ordering. The
-- functions are installed again after the migrations.
DROP FUNCTION IF EXISTS rheo.create_group(text, text, int, bigint, timestamptz, int[], timestamptz);
DROP FUNCTION IF EXISTS rheo.list_groups(text);
DROP FUNCTION IF EXISTS rheo._group(text, text);
$rheo_sql$;
    UPDATE rheo.schema_version SET version = 5;
  END IF;
END

$rheo_do$;

-- The schema and everything in it belong to rheo_owner.
DO $rheo_hand_over$
DECLARE
    v_owner  oid := (SELECT r.oid FROM pg_roles r WHERE r.rolname = 'rheo_owner');
    v_object record;
BEGIN
    IF v_owner IS NULL OR NOT pg_has_role(current_user, v_owner, 'MEMBER') THEN
        RETURN;
    END IF;
    IF (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'rheo') <> v_owner THEN
        ALTER SCHEMA rheo OWNER TO rheo_owner;
    END IF;
    FOR v_object IN
        SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                              WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'c' THEN 'TYPE' ELSE 'TABLE' END AS kind,
               c.oid::regclass::text AS name
          FROM pg_class c
         WHERE c.relnamespace = 'rheo'::regnamespace AND c.relowner <> v_owner
           AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S', 'c')
           AND NOT (c.relkind = 'S'
                    AND EXISTS (SELECT FROM pg_depend d
                                 WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
        UNION ALL
        SELECT 'TYPE', t.oid::regtype::text
          FROM pg_type t
         WHERE t.typnamespace = 'rheo'::regnamespace AND t.typowner <> v_owner AND t.typtype IN ('d', 'e', 'r', 'm')
        UNION ALL
        SELECT 'ROUTINE', p.oid::regprocedure::text
          FROM pg_proc p
         WHERE p.pronamespace = 'rheo'::regnamespace AND p.proowner <> v_owner
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO rheo_owner', v_object.kind, v_object.name);
    END LOOP;
END
$rheo_hand_over$;

-- Functions, created as rheo_owner: _access.sql, _allocate.sql, _append.sql, _check_array.sql, _check_ordering.sql, _check_start.sql, _check_time.sql, _first_at.sql, _frontier.sql, _group.sql, _partitions.sql, _place_cursors.sql, _query_cursor.sql, _query_filter.sql, _rewind.sql, _stream.sql, _valid_name.sql, ack.sql, ack_batch.sql, append.sql, append_batch.sql, create_group.sql, create_stream.sql, dead_letters.sql, drop_group.sql, drop_stream.sql, fetch.sql, group_info.sql, group_status.sql, immutability.sql, lag.sql, leases.sql, list_groups.sql, list_streams.sql, prune.sql, query.sql, read.sql, reject.sql, renew.sql, replay.sql, reset_group.sql, retry.sql, set_ordering.sql, set_retention.sql, stream_info.sql
DO $rheo_do$
DECLARE
  v_role text := current_setting('role');
BEGIN
  IF NOT EXISTS (SELECT FROM rheo.function_set WHERE sha256 = '429d1629282dc61e9fd1901a718047784d52cae7b52d9871f379ab988107054d')
     OR (SELECT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = 'rheo_reader')
       AND NOT has_schema_privilege('rheo_reader', 'rheo', 'USAGE')) THEN
    IF pg_has_role(current_user, 'rheo_owner', 'MEMBER') THEN
      SET LOCAL ROLE rheo_owner;
    END IF;
    EXECUTE $rheo_sql$
-- Sets who holds privilege on object: nobody but its owner, plus the
-- listed roles. Every function file ends with a call of it, so that a
-- function's privileges read beside its body (see docs/security.md).
--
-- PostgreSQL grants EXECUTE on a new function to PUBLIC, and CREATE OR
-- REPLACE keeps whatever was granted before, so the privilege is revoked
-- from PUBLIC and from every Rheo role first: moving a function from one
-- role to another takes it away from the first. Roles that do not exist
-- (an install by a role that may not create roles) are skipped; `rheo-migrate
-- roles` creates them later and installs the functions again.
--
-- privilege and object are constants of Rheo's own SQL files, never user
-- input; no role but the owner may call this.
CREATE OR REPLACE FUNCTION rheo._access(privilege text, object text, VARIADIC roles text[] DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_privilege ALIAS FOR $1;
    p_object    ALIAS FOR $2;
    p_roles     ALIAS FOR $3;
    v_role      text;
BEGIN
    EXECUTE format('REVOKE %s ON %s FROM PUBLIC', p_privilege, p_object);
    FOR v_role IN
        SELECT r.rolname FROM pg_roles r
         WHERE r.rolname IN ('rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin')
    LOOP
        EXECUTE format('REVOKE %s ON %s FROM %I', p_privilege, p_object, v_role);
    END LOOP;
    FOR v_role IN
        SELECT r.rolname FROM pg_roles r WHERE r.rolname = ANY (p_roles)
    LOOP
        EXECUTE format('GRANT %s ON %s TO %I', p_privilege, p_object, v_role);
    END LOOP;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._access(text, text, text[])');

-- Every Rheo role may look into the schema; what it may do there is
-- granted object by object.
SELECT rheo._access('USAGE', 'SCHEMA rheo', 'rheo_reader', 'rheo_producer', 'rheo_consumer', 'rheo_admin');

-- Tables, views and sequences: nothing for anyone but their owner. The
-- files of rheo.events and rheo.group_status grant SELECT on them.
SELECT rheo._access('ALL', format('%s %s', CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass))
  FROM pg_class c
 WHERE c.relnamespace = 'rheo'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S');

-- What is installed, which an application checks when it connects
-- (connect.Open, migrate.PostgresStatus): version numbers and a checksum.
SELECT rheo._access('SELECT', 'TABLE rheo.schema_version', 'rheo_reader');
SELECT rheo._access('SELECT', 'TABLE rheo.function_set', 'rheo_reader');

-- The Go driver vacuums rheo.deliveries after every so many settles
-- (docs/design.md); from PostgreSQL 17 on that can be granted to the
-- role that settles.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 170000 THEN
        PERFORM rheo._access('MAINTAIN', 'TABLE rheo.deliveries', 'rheo_consumer');
    END IF;
END
$$;
-- Allocates counts[i] sequences in partition parts[i] of a stream, for
-- events whose ts is ts, and returns the last sequence before each
-- allocation. It keeps the partition's time marks (rheo.time_marks).
--
-- The partitions' rows are locked until the calling transaction ends, so
-- appends to one partition serialize here and a sequence never becomes
-- visible before a lower one (docs/design.md). They are locked in the
-- order given; callers give the partitions in ascending order, so that
-- concurrent batches over several partitions cannot deadlock.
CREATE OR REPLACE FUNCTION rheo._allocate(stream text, parts int[], counts int[], ts timestamptz)
RETURNS bigint[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    p_stream  ALIAS FOR $1;
    p_parts   ALIAS FOR $2;
    p_counts  ALIAS FOR $3;
    p_ts      ALIAS FOR $4;
    v_bases   bigint[] := '{}';
    v_base    bigint;
    v_high    bigint;
    v_max     timestamptz;
    v_tail    timestamptz;
BEGIN
    FOR i IN 1 .. cardinality(p_parts) LOOP
        -- The least ts since the last mark moves to the next mark when
        -- the allocation reaches one: then it is left as it was here,
        -- to be read back, and set below.
        UPDATE rheo.partitions AS pt
           SET high_watermark = pt.high_watermark + p_counts[i],
               max_ts = greatest(pt.max_ts, p_ts),
               tail_min_ts = CASE WHEN (pt.high_watermark + p_counts[i]) / 1024 > pt.high_watermark / 1024
                                  THEN pt.tail_min_ts ELSE least(pt.tail_min_ts, p_ts) END
         WHERE pt.stream = p_stream AND pt."partition" = p_parts[i]
        RETURNING pt.high_watermark, pt.max_ts, pt.tail_min_ts INTO v_high, v_max, v_tail;
        IF NOT FOUND THEN  -- dropped while this append waited for the row
            RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
                DETAIL = format('stream %L does not exist', p_stream);
        END IF;
        v_base := v_high - p_counts[i];
        IF v_high / 1024 > v_base / 1024 THEN
            -- A mark at every multiple of 1024 reached. The events of one
            -- call share their ts: the greatest ts up to each mark is the
            -- partition's new max_ts, the least in the first segment also
            -- counts the events before this call, and the new tail holds
            -- only events of this call, if any.
            INSERT INTO rheo.time_marks (stream, "partition", sequence, max_ts, min_ts)
            SELECT p_stream, p_parts[i], m.sequence, v_max,
                   CASE WHEN m.sequence = (v_base / 1024 + 1) * 1024 THEN least(v_tail, p_ts) ELSE p_ts END
              FROM generate_series((v_base / 1024 + 1) * 1024, v_high, 1024) AS m(sequence);
            UPDATE rheo.partitions AS pt
               SET tail_min_ts = CASE WHEN v_high % 1024 = 0 THEN NULL ELSE p_ts END
             WHERE pt.stream = p_stream AND pt."partition" = p_parts[i];
        END IF;
        v_bases := v_bases || v_base;
    END LOOP;
    RETURN v_bases;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._allocate(text, int[], int[], timestamptz)');
-- Shared body of rheo.append and rheo.append_batch.
--
-- Sequences are allocated by updating the partitions' rows, whose locks are
-- held until the transaction commits: appends to one partition serialize
-- there, and a sequence can never become visible before a lower one.
-- Ids already stored (or repeated in the batch) with the same content are
-- returned as stored and allocate nothing; with other content the whole
-- call fails already_exists.
CREATE OR REPLACE FUNCTION rheo._append(stream text, payloads jsonb, keys text[], ids text[],
                                        "partition" int, metadata jsonb, ts timestamptz,
                                        clock timestamptz)
RETURNS SETOF rheo.events
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- A hot path: JIT compilation, redone at every call, would cost more than
-- the statements (see rheo.fetch).
SET jit = off
AS $$
DECLARE
    p_stream    ALIAS FOR $1;
    p_payloads  ALIAS FOR $2;
    p_keys      ALIAS FOR $3;
    p_ids       ALIAS FOR $4;
    p_partition ALIAS FOR $5;
    p_metadata  ALIAS FOR $6;
    p_ts        ALIAS FOR $7;
    p_clock     ALIAS FOR $8;
    v_count     int;
    v_n         int;
    v_now       timestamptz;
    v_ts        timestamptz;
    v_bad       bigint;
    v_bytes     int;
    v_field     text;
    v_conflict  text;
    v_random    text;
    v_hex_ms    text;
    v_id_prefix text;
    v_id_base   bigint;
    v_ids       text[];
    v_keys      text[];
    v_parts     int[];
    v_payloads  jsonb[];
    v_is_new    boolean[];
    v_new_parts int[];
    v_counts    int[];
    v_bases     bigint[];
    v_tries     int := 0;
    v_generated boolean;
BEGIN
    v_count := rheo._stream(p_stream);
    IF p_payloads IS NULL OR jsonb_typeof(p_payloads) <> 'array' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'payloads must be a JSON array of objects';
    END IF;
    PERFORM rheo._check_array('keys', p_keys);
    PERFORM rheo._check_array('ids', p_ids);
    v_n := jsonb_array_length(p_payloads);
    IF p_keys IS NOT NULL AND coalesce(cardinality(p_keys), 0) <> v_n THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('keys has %s entries for %s payloads', coalesce(cardinality(p_keys), 0), v_n);
    END IF;
    IF p_ids IS NOT NULL AND coalesce(cardinality(p_ids), 0) <> v_n THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('ids has %s entries for %s payloads', coalesce(cardinality(p_ids), 0), v_n);
    END IF;
    IF p_metadata IS NULL OR jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'metadata must be a JSON object';
    END IF;
    -- Lineage values are indexed (sql/schema/002_query_indexes.sql) and
    -- looked up: at most 1024 bytes, like ids and keys.
    SELECT k.field, octet_length(p_metadata ->> k.field) INTO v_field, v_bytes
      FROM unnest(ARRAY['correlation_id', 'causation_id', 'producer', 'schema', 'schema_version']) AS k(field)
     WHERE octet_length(p_metadata ->> k.field) > 1024
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('metadata %s must be at most 1024 bytes, got %s bytes', v_field, v_bytes);
    END IF;
    IF p_partition < 0 OR p_partition >= v_count THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = format('partition %s is outside 0..%s', p_partition, v_count - 1);
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us.
    IF p_ts IS NOT NULL THEN
        PERFORM rheo._check_time('ts', p_ts);
    END IF;
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;
    -- A JSON path test does not expand the array into a value per element;
    -- the first offending element is looked for only when there is one.
    -- Strict mode: lax mode would look inside an element that is an array.
    IF jsonb_path_exists(p_payloads, 'strict $[*] ? (@.type() != "object")') THEN
        SELECT x.ord INTO v_bad
          FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
         WHERE jsonb_typeof(x.v) <> 'object'
         LIMIT 1;
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = CASE WHEN v_n = 1 THEN 'payload must be a JSON object'
                          ELSE format('payload %s of the batch is not a JSON object', v_bad - 1) END;
    END IF;
    IF array_position(p_ids, '') IS NOT NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'event ids must not be empty';
    END IF;
    -- Ids are indexed and keys stored and compared on every append: at
    -- most 1024 bytes each, the given ones first, then the keys taken
    -- from payloads (the effective key of an input without one in keys).
    SELECT u.ord, octet_length(u.id) INTO v_bad, v_bytes
      FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
     WHERE octet_length(u.id) > 1024
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = CASE WHEN v_n = 1 THEN format('event id must be at most 1024 bytes, got %s bytes', v_bytes)
                          ELSE format('event id %s of the batch must be at most 1024 bytes, got %s bytes', v_bad - 1, v_bytes) END;
    END IF;
    SELECT u.ord, octet_length(u.key) INTO v_bad, v_bytes
      FROM unnest(p_keys) WITH ORDINALITY AS u(key, ord)
     WHERE octet_length(u.key) > 1024
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = CASE WHEN v_n = 1 THEN format('key must be at most 1024 bytes, got %s bytes', v_bytes)
                          ELSE format('key %s of the batch must be at most 1024 bytes, got %s bytes', v_bad - 1, v_bytes) END;
    END IF;
    SELECT x.ord, octet_length(x.v ->> 'key') INTO v_bad, v_bytes
      FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
     WHERE octet_length(x.v ->> 'key') > 1024 AND nullif(p_keys[x.ord::int], '') IS NULL
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = CASE WHEN v_n = 1 THEN format('payload key must be at most 1024 bytes, got %s bytes', v_bytes)
                          ELSE format('payload key %s of the batch must be at most 1024 bytes, got %s bytes', v_bad - 1, v_bytes) END;
    END IF;

    v_now := coalesce(p_clock, now());
    v_ts := coalesce(p_ts, v_now);

    -- Generated ids are UUIDv7 in text form: 48 bits of Unix milliseconds,
    -- the version digit 7, then random bits whose last 48 count up through
    -- the call from a random start (RFC 9562, section 6.2, method 1). One
    -- gen_random_uuid() per call gives the random digits; its 17th hex
    -- digit already carries the variant bits (10xx). The counter starts
    -- between 2^44 and 2^45, so start + ordinality always has exactly 12
    -- hex digits: the id of input i is v_id_prefix || to_hex(v_id_base + i),
    -- cheap enough for every event of a large batch, and the ids of a call
    -- sort (in the C collation) in input order.
    v_random := replace(gen_random_uuid()::text, '-', '');
    v_hex_ms := lpad(to_hex(floor(extract(epoch FROM v_now) * 1000)::bigint), 12, '0');
    v_id_prefix := substr(v_hex_ms, 1, 8) || '-' || substr(v_hex_ms, 9, 4) || '-7' || substr(v_random, 1, 3)
                   || '-' || substr(v_random, 17, 4) || '-';
    v_id_base := (1::bigint << 44) + ('x' || substr(v_random, 21, 11))::bit(44)::bigint;

    v_generated := p_ids IS NULL OR array_remove(p_ids, NULL) = '{}';
    IF v_generated THEN
        -- Every id is generated, so none can repeat a stored one: no probe
        -- of the id index, no subtransaction, and the events come back from
        -- the INSERT itself. The effective key and the partition of each
        -- input are computed inline, at expression speed, rather than
        -- gathered into arrays first.
        --
        -- Routing: the first four bytes of md5(key), big-endian and unsigned
        -- (bit(32)::bigint keeps it unsigned where ::int would wrap), modulo
        -- the partition count.
        IF p_partition IS NOT NULL OR v_count = 1 THEN
            v_new_parts := ARRAY[coalesce(p_partition, 0)];
            v_counts := ARRAY[v_n];
        ELSE
            SELECT array_agg(c.part ORDER BY c.part), array_agg(c.n ORDER BY c.part)
              INTO v_new_parts, v_counts
              FROM (SELECT r.part, count(*)::int AS n
                      FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
                     CROSS JOIN LATERAL (SELECT coalesce(nullif(p_keys[x.ord::int], ''), nullif(x.v ->> 'key', '')) AS key) AS k
                     CROSS JOIN LATERAL (SELECT CASE WHEN k.key IS NULL THEN 0
                                                     ELSE ((('x' || substr(md5(k.key), 1, 8))::bit(32)::bigint) % v_count)::int
                                                END AS part) AS r
                     GROUP BY r.part) AS c;
        END IF;
        v_bases := rheo._allocate(p_stream, v_new_parts, v_counts, v_ts);

        IF cardinality(v_new_parts) = 1 THEN
            -- One partition: the sequences follow the input order, and the
            -- INSERT returns its rows in the order its SELECT makes them.
            RETURN QUERY
            INSERT INTO rheo.events AS e (stream, "partition", sequence, id, key, payload, metadata, ts)
            SELECT p_stream, v_new_parts[1], v_bases[1] + x.ord,
                   v_id_prefix || to_hex(v_id_base + x.ord),
                   coalesce(nullif(p_keys[x.ord::int], ''), nullif(x.v ->> 'key', '')), x.v, p_metadata, v_ts
              FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
            RETURNING e.*;
        ELSE
            -- The ids grow with the input order, so ordering by them returns
            -- the events in input order.
            RETURN QUERY
            WITH inserted AS (
                INSERT INTO rheo.events AS e (stream, "partition", sequence, id, key, payload, metadata, ts)
                SELECT p_stream, r.part,
                       v_bases[array_position(v_new_parts, r.part)]
                       + row_number() OVER (PARTITION BY r.part ORDER BY x.ord),
                       v_id_prefix || to_hex(v_id_base + x.ord), k.key, x.v, p_metadata, v_ts
                  FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
                 CROSS JOIN LATERAL (SELECT coalesce(nullif(p_keys[x.ord::int], ''), nullif(x.v ->> 'key', '')) AS key) AS k
                 CROSS JOIN LATERAL (SELECT CASE WHEN k.key IS NULL THEN 0
                                                 ELSE ((('x' || substr(md5(k.key), 1, 8))::bit(32)::bigint) % v_count)::int
                                            END AS part) AS r
                RETURNING e.*
            )
            SELECT * FROM inserted i ORDER BY i.id COLLATE "C";
        END IF;
    ELSE
        -- Some ids were given: each may repeat a stored event or an earlier
        -- input of the batch. One row per input, in input order: effective
        -- id, key and partition (routed as above).
        SELECT array_agg(coalesce(p_ids[x.ord::int], v_id_prefix || to_hex(v_id_base + x.ord)) ORDER BY x.ord),
               array_agg(k.key ORDER BY x.ord),
               array_agg(coalesce(p_partition,
                                  CASE WHEN k.key IS NULL THEN 0
                                       ELSE ((('x' || substr(md5(k.key), 1, 8))::bit(32)::bigint) % v_count)::int
                                  END)
                         ORDER BY x.ord),
               array_agg(x.v ORDER BY x.ord)
          INTO v_ids, v_keys, v_parts, v_payloads
          FROM jsonb_array_elements(p_payloads) WITH ORDINALITY AS x(v, ord)
         CROSS JOIN LATERAL (SELECT coalesce(nullif(p_keys[x.ord::int], ''), nullif(x.v ->> 'key', '')) AS key) AS k;

        SELECT u.id INTO v_conflict
          FROM unnest(v_ids, v_keys, v_payloads) AS u(id, key, payload)
         GROUP BY u.id
        HAVING count(DISTINCT (u.key, u.payload)) > 1
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
                DETAIL = format('event id %L appears twice in the batch with different content', v_conflict);
        END IF;

        LOOP
            BEGIN
                -- Probe the id index once per input. LATERAL ... LIMIT 1 keeps
                -- the planner from choosing a scan of the stream when its
                -- statistics are missing or stale (a new stream has none).
                -- New: the first occurrence of an id not stored yet.
                SELECT array_agg(t.is_new ORDER BY t.ord), min(t.id) FILTER (WHERE t.conflict)
                  INTO v_is_new, v_conflict
                  FROM (SELECT u.ord, u.id,
                               ex.id IS NOT NULL
                               AND (ex.payload <> u.payload OR ex.key IS DISTINCT FROM u.key
                                    OR ex.metadata <> p_metadata) AS conflict,
                               ex.id IS NULL
                               AND row_number() OVER (PARTITION BY u.id ORDER BY u.ord) = 1 AS is_new
                          FROM unnest(v_ids, v_keys, v_payloads) WITH ORDINALITY AS u(id, key, payload, ord)
                          LEFT JOIN LATERAL (SELECT e.id, e.key, e.payload, e.metadata
                                               FROM rheo.events e
                                              WHERE e.id = u.id AND e.stream = p_stream
                                              LIMIT 1) AS ex ON true) AS t;
                IF v_conflict IS NOT NULL THEN
                    RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
                        DETAIL = format('event id %L already exists on stream %L with other content', v_conflict, p_stream);
                END IF;

                SELECT array_agg(c.part ORDER BY c.part), array_agg(c.n ORDER BY c.part)
                  INTO v_new_parts, v_counts
                  FROM (SELECT u.part, count(*)::int AS n
                          FROM unnest(v_parts, v_is_new) AS u(part, is_new)
                         WHERE u.is_new
                         GROUP BY u.part) AS c;

                IF v_new_parts IS NOT NULL THEN
                    v_bases := rheo._allocate(p_stream, v_new_parts, v_counts, v_ts);
                    INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
                    SELECT p_stream, u.part,
                           b.base + row_number() OVER (PARTITION BY u.part ORDER BY u.ord),
                           u.id, u.key, u.payload, p_metadata, v_ts
                      FROM unnest(v_ids, v_keys, v_parts, v_payloads, v_is_new)
                           WITH ORDINALITY AS u(id, key, part, payload, is_new, ord)
                      JOIN unnest(v_new_parts, v_bases) AS b(part, base) ON b.part = u.part
                     WHERE u.is_new;
                END IF;
                EXIT;
            EXCEPTION WHEN unique_violation THEN
                -- A concurrent append stored one of these ids first and has
                -- committed. Read committed: the next statement sees it,
                -- so look again, now seeing it as a repeat. Every turn
                -- finds at least one more id stored, so the loop ends
                -- within one turn per id. Repeatable read or serializable:
                -- the winner's event is not in this transaction's snapshot
                -- and cannot be returned, so the transaction must be
                -- retried, as for any write conflict at those levels; its
                -- retry sees the event and repeats it.
                v_tries := v_tries + 1;
                IF current_setting('transaction_isolation') <> 'read committed' OR v_tries > cardinality(v_ids) THEN
                    RAISE EXCEPTION 'could not serialize access due to a concurrent append of the same event id'
                        USING ERRCODE = 'serialization_failure',
                              DETAIL = format('a transaction that committed after this one began appended one of these ids to stream %L', p_stream),
                              HINT = 'Retry the transaction: the append then returns the stored event.';
                END IF;
            END;
        END LOOP;
    END IF;

    IF v_new_parts IS NOT NULL AND coalesce(current_setting('rheo.notify', true), '') <> 'off' THEN
        PERFORM pg_notify('rheo_events',
                          json_build_object('stream', p_stream, 'partition', b.part,
                                            'sequence', b.base + b.n)::text)
           FROM unnest(v_new_parts, v_bases, v_counts) AS b(part, base, n);
    END IF;
    IF v_generated THEN
        RETURN;
    END IF;

    RETURN QUERY
        SELECT ev.*
          FROM unnest(v_ids) WITH ORDINALITY AS u(id, ord)
         CROSS JOIN LATERAL (SELECT e.* FROM rheo.events e
                              WHERE e.id = u.id AND e.stream = p_stream LIMIT 1) AS ev
         ORDER BY u.ord;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._append(text, jsonb, text[], text[], int, jsonb, timestamptz, timestamptz)');
-- Rejects an array argument that is not a plain list: PostgreSQL accepts
-- multidimensional arrays and arrays whose first index is not 1 for any
-- array type, and the functions read their arguments as lists indexed
-- from 1 (a '[0:1]' array would shift every id by one, and = ANY or
-- unnest would flatten a two-dimensional one). NULL and '{}', which has
-- no dimensions, pass.
CREATE OR REPLACE FUNCTION rheo._check_array(name text, value anyarray)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF array_ndims($2) > 1 OR array_lower($2, 1) <> 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('%s must be a one-dimensional array starting at index 1', $1);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_array(text, anyarray)');
-- Validates an ordering word (SPEC §8): 'none', 'key' or 'partition'.
CREATE OR REPLACE FUNCTION rheo._check_ordering(ordering text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF $1 IS NULL OR $1 NOT IN ('none', 'key', 'partition') THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('ordering must be none, key or partition, got %s', coalesce(quote_literal(left($1, 64)), 'NULL'));
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_ordering(text)');
-- Validates the start options shared by create_group and reset_group.
CREATE OR REPLACE FUNCTION rheo._check_start(start_after bigint, start_at timestamptz)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF $1 IS NOT NULL AND $2 IS NOT NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'give start_after or start_at, not both';
    END IF;
    -- At most the largest bigint less one, so that the cursor after it
    -- still fits.
    IF $1 < 0 OR $1 > 9223372036854775806 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('start_after must be between 0 and 9223372036854775806, got %s', $1);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_start(bigint, timestamptz)');
-- Rejects a clock or ts argument outside the years 0001 to 9999 (UTC),
-- infinities included: timestamps the functions store or add durations
-- to must stay finite, well inside timestamptz's range, and within what
-- every driver can represent. NULL (the default: now()) passes.
CREATE OR REPLACE FUNCTION rheo._check_time(name text, value timestamptz)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT isfinite($2) OR $2 < '0001-01-01 00:00:00+00' OR $2 >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('%s must be finite, from 0001-01-01T00:00:00Z up to but not including 10000-01-01T00:00:00Z, got %s',
                            $1, $2);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_time(text, timestamptz)');
-- The lowest sequence of a partition whose ts is at or after at, or NULL
-- when there is none (start_at, replay from_ts).
--
-- The greatest ts up to a sequence grows with the sequence, so the first
-- time mark whose max_ts reaches at is found by its index: every event
-- up to the mark before it is older than at, and the event sought lies
-- after that one, among the next 1024 (more only where pruning took the
-- events that set the mark). Without such a mark it lies after the last
-- mark. Either way the events are read from there by the primary key.
CREATE OR REPLACE FUNCTION rheo._first_at(stream text, "partition" int, at timestamptz)
RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- Index paths only, whatever the statistics say (a new stream has none):
-- the first mark at or after the time is read from the index on max_ts,
-- never sorted out of all the partition's marks.
SET enable_seqscan = off
SET enable_sort = off
AS $$
    SELECT e.sequence
      FROM rheo.events e
     WHERE e.stream = $1 AND e."partition" = $2 AND e.ts >= $3
       AND e.sequence > coalesce(
               (SELECT m.sequence - 1024 FROM rheo.time_marks m
                 WHERE m.stream = $1 AND m."partition" = $2 AND m.max_ts >= $3
                 ORDER BY m.max_ts, m.sequence LIMIT 1),
               (SELECT m.sequence FROM rheo.time_marks m
                 WHERE m.stream = $1 AND m."partition" = $2
                 ORDER BY m.sequence DESC LIMIT 1),
               0)
     ORDER BY e.sequence
     LIMIT 1
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._first_at(text, int, timestamptz)');
-- The frontier of a group in a partition: everything below the lowest
-- non-terminal delivery is terminal, and with no delivery in progress
-- everything below the cursor is.
CREATE OR REPLACE FUNCTION rheo._frontier(group_id int, "partition" int, next_sequence bigint)
RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(
        (SELECT d.sequence FROM rheo.deliveries d
          WHERE d.group_id = $1 AND d."partition" = $2
          ORDER BY d.sequence LIMIT 1),
        $3) - 1
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._frontier(int, int, bigint)');
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
-- Validates a partitions argument against a stream's partition count and
-- returns it sorted without duplicates; NULL means every partition.
CREATE OR REPLACE FUNCTION rheo._partitions(partitions int[], partition_count int)
RETURNS int[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_partitions ALIAS FOR $1;
    p_count      ALIAS FOR $2;
    v_bad        int;
BEGIN
    PERFORM rheo._check_array('partitions', p_partitions);
    IF p_partitions IS NULL THEN
        RETURN ARRAY(SELECT generate_series(0, p_count - 1));
    END IF;
    IF array_position(p_partitions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = 'partitions must not contain NULL';
    END IF;
    SELECT x INTO v_bad FROM unnest(p_partitions) x WHERE x < 0 OR x >= p_count LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = format('partition %s is outside 0..%s', v_bad, p_count - 1);
    END IF;
    RETURN ARRAY(SELECT DISTINCT x FROM unnest(p_partitions) x ORDER BY x);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._partitions(int[], int)');
-- Places a group's cursors in the given partitions: after start_after, at
-- the first event with ts >= start_at (or past the high watermark when
-- there is none), or at the beginning. Never below the low watermark:
-- pruned events count as terminal for every group (SPEC §7).
CREATE OR REPLACE FUNCTION rheo._place_cursors(group_id int, stream text, partitions int[],
                                               start_after bigint, start_at timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_group_id    ALIAS FOR $1;
    p_stream      ALIAS FOR $2;
    p_partitions  ALIAS FOR $3;
    p_start_after ALIAS FOR $4;
    p_start_at    ALIAS FOR $5;
BEGIN
    UPDATE rheo.cursors AS c
       SET next_sequence = greatest(pt.low_watermark, CASE
               WHEN p_start_after IS NOT NULL THEN p_start_after + 1
               WHEN p_start_at IS NOT NULL THEN coalesce(rheo._first_at(p_stream, c."partition", p_start_at),
                                                          pt.high_watermark + 1)
               ELSE 1
           END)
      FROM rheo.partitions pt
     WHERE c.group_id = p_group_id AND c."partition" = ANY (p_partitions)
       AND pt.stream = p_stream AND pt."partition" = c."partition";
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._place_cursors(int, text, int[], bigint, timestamptz)');
-- Query cursors. A cursor is base64url (no padding) of
--     q1.<fingerprint>.<position>.<position>...
-- with one position per partition in the query's scope, in partition
-- order: ascending, the highest sequence already examined; descending,
-- the lowest sequence already examined (so the next page is below it).
-- The fingerprint ties the cursor to its stream, filter and direction.

-- The fingerprint of a query: the first 16 hex digits of md5 over the
-- stream, the filter's canonical jsonb text and the direction.
CREATE OR REPLACE FUNCTION rheo._query_fingerprint(stream text, filter jsonb, descending boolean)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT substr(md5($1 || E'\n' || $2::text || E'\n' || CASE WHEN $3 THEN 'desc' ELSE 'asc' END), 1, 16)
$$;

CREATE OR REPLACE FUNCTION rheo._query_cursor_encode(fingerprint text, positions bigint[])
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- translate drops the newlines that encode() puts every 76 characters,
    -- as the target list is shorter than the source list.
    SELECT rtrim(translate(encode(convert_to('q1.' || $1 || '.' || array_to_string($2, '.'), 'UTF8'), 'base64'),
                           E'+/\n', '-_'),
                 '=')
$$;

-- The positions of a cursor issued for the query with this fingerprint
-- and scope size. Not a cursor at all: invalid_argument. A cursor of
-- another stream, filter, direction or version: cursor_not_found.
CREATE OR REPLACE FUNCTION rheo._query_cursor_decode(cursor text, fingerprint text, scope_size int)
RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_cursor      ALIAS FOR $1;
    p_fingerprint ALIAS FOR $2;
    p_scope_size  ALIAS FOR $3;
    v_text        text;
    v_parts       text[];
    v_positions   bigint[];
BEGIN
    BEGIN
        IF p_cursor !~ '^[A-Za-z0-9_-]+$' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- +3 then /4*4: restore the padding base64 decoding needs.
        v_text := convert_from(decode(rpad(translate(p_cursor, '-_', '+/'),
                                           (length(p_cursor) + 3) / 4 * 4, '='),
                                      'base64'),
                               'UTF8');
        v_parts := regexp_match(v_text, '^([a-z0-9]+)\.([0-9a-f]{16})\.([0-9]{1,19}(?:\.[0-9]{1,19})*)$');
        IF v_parts IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_positions := string_to_array(v_parts[3], '.')::bigint[];
    EXCEPTION WHEN invalid_parameter_value OR character_not_in_repertoire OR untranslatable_character
                   OR numeric_value_out_of_range THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('%L is not a query cursor', p_cursor);
    END;
    IF v_parts[1] <> 'q1' OR v_parts[2] <> p_fingerprint OR cardinality(v_positions) <> p_scope_size THEN
        RAISE EXCEPTION 'cursor_not_found' USING ERRCODE = 'RH010',
            DETAIL = format('cursor %L was not issued for this stream, filter and direction', p_cursor);
    END IF;
    RETURN v_positions;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_fingerprint(text, jsonb, boolean)');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_cursor_encode(text, bigint[])');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_cursor_decode(text, text, int)');
-- Validates the filter of rheo.query and returns its parts, NULL where a
-- key is absent. Unknown keys and values of the wrong JSON type are
-- invalid_argument: a misspelt key must not silently widen a query.
CREATE OR REPLACE FUNCTION rheo._query_filter(filter jsonb, partition_count int,
                                              OUT type text, OUT key text, OUT "partition" int,
                                              OUT payload jsonb, OUT metadata jsonb,
                                              OUT from_ts timestamptz, OUT to_ts timestamptz,
                                              OUT after_sequence bigint, OUT until_sequence bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_filter  ALIAS FOR $1;
    p_count   ALIAS FOR $2;
    v_unknown text;
    v_n       numeric;
BEGIN
    IF p_filter IS NULL OR jsonb_typeof(p_filter) <> 'object' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'filter must be a JSON object';
    END IF;
    SELECT k INTO v_unknown
      FROM jsonb_object_keys(p_filter) AS k
     WHERE k <> ALL (ARRAY['type', 'key', 'partition', 'payload', 'metadata', 'from', 'to',
                           'after_sequence', 'until_sequence'])
     ORDER BY k
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('unknown filter key %L', v_unknown);
    END IF;

    IF p_filter ? 'type' THEN
        IF jsonb_typeof(p_filter -> 'type') <> 'string' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter type must be a string';
        END IF;
        type := p_filter ->> 'type';
    END IF;

    -- events.key never holds '' (an empty key counts as no key), so an
    -- empty key could only ever match nothing.
    IF p_filter ? 'key' THEN
        IF jsonb_typeof(p_filter -> 'key') <> 'string' OR p_filter ->> 'key' = '' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter key must be a non-empty string';
        END IF;
        key := p_filter ->> 'key';
    END IF;

    IF p_filter ? 'partition' THEN
        IF jsonb_typeof(p_filter -> 'partition') <> 'number' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter partition must be an integer';
        END IF;
        v_n := (p_filter ->> 'partition')::numeric;
        IF v_n <> trunc(v_n) THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter partition must be an integer';
        END IF;
        IF v_n < 0 OR v_n >= p_count THEN
            RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
                DETAIL = format('partition %s is outside 0..%s', v_n, p_count - 1);
        END IF;
        "partition" := v_n::int;
    END IF;

    IF p_filter ? 'payload' THEN
        IF jsonb_typeof(p_filter -> 'payload') <> 'object' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter payload must be a JSON object';
        END IF;
        payload := p_filter -> 'payload';
    END IF;

    IF p_filter ? 'metadata' THEN
        IF jsonb_typeof(p_filter -> 'metadata') <> 'object' THEN
            RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
                DETAIL = 'filter metadata must be a JSON object';
        END IF;
        metadata := p_filter -> 'metadata';
    END IF;

    from_ts := rheo._query_filter_ts(p_filter, 'from');
    to_ts := rheo._query_filter_ts(p_filter, 'to');
    after_sequence := rheo._query_filter_sequence(p_filter, 'after_sequence');
    until_sequence := rheo._query_filter_sequence(p_filter, 'until_sequence');
END
$$;

-- A timestamp of the filter: a JSON string in timestamptz input syntax
-- (RFC 3339 with an offset is the portable choice).
CREATE OR REPLACE FUNCTION rheo._query_filter_ts(filter jsonb, name text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_filter ALIAS FOR $1;
    p_name   ALIAS FOR $2;
BEGIN
    IF NOT p_filter ? p_name THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_filter -> p_name) <> 'string' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('filter %s must be a timestamp string', p_name);
    END IF;
    RETURN (p_filter ->> p_name)::timestamptz;
EXCEPTION
    WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_time_zone_displacement_value
         OR invalid_parameter_value THEN  -- an unknown time zone name
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('filter %s is not a timestamp: %s', p_name, p_filter ->> p_name);
END
$$;

-- A sequence bound of the filter: a JSON integer >= 0.
CREATE OR REPLACE FUNCTION rheo._query_filter_sequence(filter jsonb, name text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_filter ALIAS FOR $1;
    p_name   ALIAS FOR $2;
    v_n      numeric;
BEGIN
    IF NOT p_filter ? p_name THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_filter -> p_name) = 'number' THEN
        v_n := (p_filter ->> p_name)::numeric;
    END IF;
    IF v_n IS NULL OR v_n <> trunc(v_n) OR v_n < 0 OR v_n > 9223372036854775807 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('filter %s must be an integer >= 0, got %s', p_name, p_filter -> p_name);
    END IF;
    RETURN v_n::bigint;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_filter(jsonb, int)');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_filter_ts(jsonb, text)');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo._query_filter_sequence(jsonb, text)');
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
      JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
     WHERE c.group_id = p_group_id AND c."partition" = p_partition;
    v_n := greatest(p_n, v_low - 1);
    IF v_next <= v_n + 1 THEN
        RETURN 0;
    END IF;
    -- Lock the deliveries in primary key order before deleting them, as
    -- every multi-row settle does (docs/design.md, "Locks").
    PERFORM 1 FROM rheo.deliveries d
      WHERE d.group_id = p_group_id AND d."partition" = p_partition AND d.sequence > v_n
      ORDER BY d.sequence
        FOR UPDATE;
    -- Events blocked behind their keys ('key' ordering) and never leased
    -- were passed by the cursor but not offered (SPEC §8).
    SELECT count(*) INTO v_unoffered FROM rheo.deliveries d
     WHERE d.group_id = p_group_id AND d."partition" = p_partition AND d.sequence > v_n
       AND d.state = 'blocked' AND d.attempt = 0;
    DELETE FROM rheo.deliveries AS d
     WHERE d.group_id = p_group_id AND d."partition" = p_partition AND d.sequence > v_n;
    DELETE FROM rheo.dead_letters AS dl
     WHERE dl.group_id = p_group_id AND dl."partition" = p_partition AND dl.sequence > v_n;
    UPDATE rheo.cursors AS c
       SET next_sequence = v_n + 1
     WHERE c.group_id = p_group_id AND c."partition" = p_partition;
    -- Offered: below the cursor and existing (a cursor placed past the
    -- high watermark has offered nothing beyond it).
    RETURN greatest(0, least(v_next - 1, v_high) - v_n - v_unoffered);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._rewind(int, text, int, bigint)');
-- The partition count of a stream; stream_not_found when it is missing.
CREATE OR REPLACE FUNCTION rheo._stream(stream text)
RETURNS int
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream ALIAS FOR $1;
    v_count  int;
BEGIN
    SELECT s.partition_count INTO v_count FROM rheo.streams s WHERE s.stream = p_stream;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
    RETURN v_count;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._stream(text)');
-- Whether a stream or group name is well formed (SPEC §1).
CREATE OR REPLACE FUNCTION rheo._valid_name(name text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce($1 ~ '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$', false)
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._valid_name(text)');
-- Settles a held lease as done. The delivery row is deleted: the frontier
-- is derived from what remains, so an ack writes nothing else, but for a
-- wakeup of its key when later events of the key are blocked behind it
-- ('key' ordering, docs/design.md).
CREATE OR REPLACE FUNCTION rheo.ack(lease_id uuid, clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Settles find their delivery through the lease_id index only: a table
-- scan would read every deleted row not yet vacuumed, and the planner
-- picks one when statistics are missing or stale (a new table has none).
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
-- A hot path: JIT compilation, redone at every call, would cost more than
-- the statement (see rheo.fetch).
SET jit = off
AS $$
DECLARE
    p_lease_id ALIAS FOR $1;
    p_clock    ALIAS FOR $2;
    v_group_id  int;
    v_partition int;
    v_key       text;
    v_waiters   boolean;
BEGIN
    IF p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_id must not be NULL';
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    DELETE FROM rheo.deliveries AS d WHERE d.lease_id = p_lease_id AND d.state = 'leased'
    RETURNING d.group_id, d."partition", d.key, d.has_waiters INTO v_group_id, v_partition, v_key, v_waiters;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stale_lease' USING ERRCODE = 'RH004',
            DETAIL = format('lease %s is no longer held', p_lease_id);
    END IF;
    IF v_waiters THEN
        INSERT INTO rheo.key_wakeups (group_id, "partition", key) VALUES (v_group_id, v_partition, v_key);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.ack(uuid, timestamptz)', 'rheo_consumer');
-- Acks each lease independently: stale ones (and repeats within the
-- array) report ok = false instead of failing the call.
CREATE OR REPLACE FUNCTION rheo.ack_batch(lease_ids uuid[], clock timestamptz DEFAULT NULL)
RETURNS TABLE (lease_id uuid, ok boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Settles find their delivery through the lease_id index only: a table
-- scan would read every deleted row not yet vacuumed, and the planner
-- picks one when statistics are missing or stale (a new table has none).
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
-- A hot path: JIT compilation, redone at every call, would cost more than
-- the statement (see rheo.fetch).
SET jit = off
AS $$
DECLARE
    p_lease_ids ALIAS FOR $1;
    p_clock     ALIAS FOR $2;
BEGIN
    IF p_lease_ids IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_ids must not be NULL';
    END IF;
    PERFORM rheo._check_array('lease_ids', p_lease_ids);
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    -- The deliveries are locked in primary key order, the order in which
    -- replay and reset_group lock them too, so that a batch settling
    -- while a group is replayed waits for the replay, or the replay for
    -- it, but the two never deadlock. They are then deleted by their
    -- physical address. Those with later events of their key blocked
    -- behind them leave a wakeup of the key ('key' ordering).
    RETURN QUERY
    WITH held AS MATERIALIZED (
        SELECT d.ctid AS tid FROM rheo.deliveries d
         WHERE d.lease_id = ANY (p_lease_ids) AND d.state = 'leased'
         ORDER BY d.group_id, d."partition", d.sequence
           FOR UPDATE
    ), settled AS (
        DELETE FROM rheo.deliveries AS d
         WHERE d.ctid = ANY (ARRAY(SELECT h.tid FROM held h))
        RETURNING d.lease_id, d.group_id, d."partition", d.key, d.has_waiters
    ), woken AS (
        INSERT INTO rheo.key_wakeups (group_id, "partition", key)
        SELECT s.group_id, s."partition", s.key FROM settled s WHERE s.has_waiters
    )
    SELECT u.id,
           s.lease_id IS NOT NULL AND row_number() OVER (PARTITION BY u.id ORDER BY u.ord) = 1
      FROM unnest(p_lease_ids) WITH ORDINALITY AS u(id, ord)
      LEFT JOIN settled s ON s.lease_id = u.id
     ORDER BY u.ord;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.ack_batch(uuid[], timestamptz)', 'rheo_consumer');
-- Appends one event to a stream (see rheo._append for the rules).
CREATE OR REPLACE FUNCTION rheo.append(stream text, payload jsonb, key text DEFAULT NULL,
                                       "partition" int DEFAULT NULL, id text DEFAULT NULL,
                                       metadata jsonb DEFAULT '{}', ts timestamptz DEFAULT NULL,
                                       clock timestamptz DEFAULT NULL)
RETURNS rheo.events
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_event rheo.events;
BEGIN
    SELECT * INTO v_event
      FROM rheo._append($1, jsonb_build_array($2), ARRAY[$3], ARRAY[$5], $4, $6, $7, $8);
    RETURN v_event;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.append(text, jsonb, text, int, text, jsonb, timestamptz, timestamptz)', 'rheo_producer');
-- Appends a batch atomically, returning the events in input order.
CREATE OR REPLACE FUNCTION rheo.append_batch(stream text, payloads jsonb, keys text[] DEFAULT NULL,
                                             ids text[] DEFAULT NULL, "partition" int DEFAULT NULL,
                                             metadata jsonb DEFAULT '{}', clock timestamptz DEFAULT NULL)
RETURNS SETOF rheo.events
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT * FROM rheo._append($1, $2, $3, $4, $5, $6, NULL, $7);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.append_batch(text, jsonb, text[], text[], int, jsonb, timestamptz)', 'rheo_producer');
-- Creates a consumer group with a cursor per partition and its ordering
-- ('none', 'key' or 'partition', SPEC §8).
CREATE OR REPLACE FUNCTION rheo.create_group(stream text, group_name text, max_attempts int DEFAULT 5,
                                             start_after bigint DEFAULT NULL, start_at timestamptz DEFAULT NULL,
                                             partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL,
                                             ordering text DEFAULT 'none')
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream       ALIAS FOR $1;
    p_group_name   ALIAS FOR $2;
    p_max_attempts ALIAS FOR $3;
    p_start_after  ALIAS FOR $4;
    p_start_at     ALIAS FOR $5;
    p_partitions   ALIAS FOR $6;
    p_clock        ALIAS FOR $7;
    p_ordering     ALIAS FOR $8;
    v_count        int;
    v_scope        int[];
    v_group_id     int;
BEGIN
    v_count := rheo._stream(p_stream);
    -- Holds off drop_stream and prune of the stream until this commits,
    -- and waits for theirs (FOR SHARE conflicts with their FOR NO KEY
    -- UPDATE): the cursors are placed against the partitions' low
    -- watermarks as they stand.
    PERFORM 1 FROM rheo.streams s WHERE s.stream = p_stream FOR SHARE;
    IF NOT FOUND THEN  -- dropped meanwhile
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
    IF NOT rheo._valid_name(p_group_name) THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('invalid group name %L: 1 to 128 characters of A-Z a-z 0-9 . _ : / -, starting with a letter or digit', p_group_name);
    END IF;
    IF EXISTS (SELECT 1 FROM rheo.groups g WHERE g.stream = p_stream AND g.group_name = p_group_name) THEN
        RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
            DETAIL = format('group %L already exists on stream %L', p_group_name, p_stream);
    END IF;
    IF p_max_attempts IS NULL OR p_max_attempts < 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_attempts must be >= 1, got %s', coalesce(p_max_attempts::text, 'NULL'));
    END IF;
    PERFORM rheo._check_start(p_start_after, p_start_at);
    v_scope := rheo._partitions(p_partitions, v_count);
    PERFORM rheo._check_time('clock', p_clock);
    PERFORM rheo._check_ordering(p_ordering);

    INSERT INTO rheo.groups (stream, group_name, max_attempts, created_at, ordering)
    VALUES (p_stream, p_group_name, p_max_attempts, coalesce(p_clock, now()), p_ordering)
    ON CONFLICT ON CONSTRAINT groups_stream_group_name_key DO NOTHING
    RETURNING groups.group_id INTO v_group_id;
    IF v_group_id IS NULL THEN  -- a concurrent create won the race
        RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
            DETAIL = format('group %L already exists on stream %L', p_group_name, p_stream);
    END IF;
    -- Every partition from its first retained event; the start options
    -- then place the listed ones.
    INSERT INTO rheo.cursors (group_id, "partition", next_sequence)
    SELECT v_group_id, pt."partition", pt.low_watermark
      FROM rheo.partitions pt WHERE pt.stream = p_stream;
    IF p_start_after IS NOT NULL OR p_start_at IS NOT NULL THEN
        PERFORM rheo._place_cursors(v_group_id, p_stream, v_scope, p_start_after, p_start_at);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.create_group(text, text, int, bigint, timestamptz, int[], timestamptz, text)', 'rheo_admin');
-- Creates a stream and its partitions' sequence allocators.
CREATE OR REPLACE FUNCTION rheo.create_stream(stream text, partition_count int DEFAULT 1,
                                              clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream ALIAS FOR $1;
    p_count  ALIAS FOR $2;
    p_clock  ALIAS FOR $3;
BEGIN
    IF NOT rheo._valid_name(p_stream) THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('invalid stream name %L: 1 to 128 characters of A-Z a-z 0-9 . _ : / -, starting with a letter or digit', p_stream);
    END IF;
    IF EXISTS (SELECT 1 FROM rheo.streams s WHERE s.stream = p_stream) THEN
        RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
            DETAIL = format('stream %L already exists', p_stream);
    END IF;
    IF p_count IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'partition_count must not be NULL';
    END IF;
    -- At most 4096: every partition is a row of rheo.partitions and of
    -- rheo.cursors for each group, and a fetch reads them all.
    IF p_count < 1 OR p_count > 4096 THEN
        RAISE EXCEPTION 'invalid_partition_count' USING ERRCODE = 'RH006',
            DETAIL = format('partition_count must be between 1 and 4096, got %s', p_count);
    END IF;
    PERFORM rheo._check_time('clock', p_clock);

    INSERT INTO rheo.streams (stream, partition_count, created_at)
    VALUES (p_stream, p_count, coalesce(p_clock, now()))
    ON CONFLICT ON CONSTRAINT streams_pkey DO NOTHING;
    IF NOT FOUND THEN  -- a concurrent create won the race
        RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
            DETAIL = format('stream %L already exists', p_stream);
    END IF;
    INSERT INTO rheo.partitions (stream, "partition", high_watermark)
    SELECT p_stream, x, 0 FROM generate_series(0, p_count - 1) x;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.create_stream(text, int, timestamptz)', 'rheo_admin');
-- A page of a group's dead letters in (partition, sequence) order; after
-- is the event id of the previous page's last dead letter.
CREATE OR REPLACE FUNCTION rheo.dead_letters(stream text, group_name text, max_count int DEFAULT 100,
                                             after text DEFAULT NULL)
RETURNS TABLE (event_id text, "partition" int, sequence bigint, attempt int, reason text,
               dead_lettered_at timestamptz, type text, key text, payload jsonb,
               metadata jsonb, ts timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_max_count  ALIAS FOR $3;
    p_after      ALIAS FOR $4;
    v_group      record;
    v_after_p    int := -1;
    v_after_s    bigint := 0;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    IF p_after IS NOT NULL THEN
        SELECT dl."partition", dl.sequence INTO v_after_p, v_after_s
          FROM rheo.events e
          JOIN rheo.dead_letters dl ON dl.group_id = v_group.group_id
                                   AND dl."partition" = e."partition" AND dl.sequence = e.sequence
         WHERE e.id = p_after AND e.stream = p_stream;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'cursor_not_found' USING ERRCODE = 'RH010',
                DETAIL = format('event %L is not among the dead letters of group %L', p_after, p_group_name);
        END IF;
    END IF;
    RETURN QUERY
        SELECT e.id, dl."partition", dl.sequence, dl.attempt, dl.reason, dl.dead_lettered_at,
               e.type, e.key, e.payload, e.metadata, e.ts
          FROM rheo.dead_letters dl
         CROSS JOIN LATERAL (SELECT ev.* FROM rheo.events ev
                              WHERE ev.stream = p_stream AND ev."partition" = dl."partition"
                                AND ev.sequence = dl.sequence LIMIT 1) AS e
         WHERE dl.group_id = v_group.group_id
           AND (dl."partition", dl.sequence) > (v_after_p, v_after_s)
         ORDER BY dl."partition", dl.sequence
         LIMIT p_max_count;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.dead_letters(text, text, int, text)', 'rheo_reader');
-- Removes a group with its deliveries, dead letters and cursors: its
-- leases become stale. The log is untouched.
CREATE OR REPLACE FUNCTION rheo.drop_group(stream text, group_name text, confirm boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_confirm    ALIAS FOR $3;
    v_group      record;
BEGIN
    IF p_confirm IS NOT TRUE THEN
        RAISE EXCEPTION 'confirm_required' USING ERRCODE = 'RH008',
            DETAIL = 'drop_group removes the group with its leases, retries and dead letters: call it with confirm => true';
    END IF;
    v_group := rheo._group(p_stream, p_group_name);

    -- Cursors, then deliveries in primary key order, as replay takes them
    -- (docs/design.md, "Locks"): fetches in progress finish first, and
    -- settles in progress then find their lease gone.
    PERFORM 1 FROM rheo.cursors c
      WHERE c.group_id = v_group.group_id
      ORDER BY c."partition"
        FOR UPDATE;
    PERFORM 1 FROM rheo.deliveries d
      WHERE d.group_id = v_group.group_id
      ORDER BY d."partition", d.sequence
        FOR UPDATE;
    DELETE FROM rheo.deliveries AS d WHERE d.group_id = v_group.group_id;
    DELETE FROM rheo.dead_letters AS dl WHERE dl.group_id = v_group.group_id;
    DELETE FROM rheo.key_wakeups AS w WHERE w.group_id = v_group.group_id;
    DELETE FROM rheo.cursors AS c WHERE c.group_id = v_group.group_id;
    DELETE FROM rheo.groups AS g WHERE g.group_id = v_group.group_id;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.drop_group(text, text, boolean)', 'rheo_admin');
-- Removes a stream, its groups and every event, and returns how many
-- events it deleted. With prune, the only way events leave the log. The
-- name can be created anew, with sequences from 1.
--
-- One transaction, whatever the stream's size: prune a long stream first
-- to keep it short.
CREATE OR REPLACE FUNCTION rheo.drop_stream(stream text, confirm boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream  ALIAS FOR $1;
    p_confirm ALIAS FOR $2;
    v_deleted bigint;
BEGIN
    IF p_confirm IS NOT TRUE THEN
        RAISE EXCEPTION 'confirm_required' USING ERRCODE = 'RH008',
            DETAIL = 'drop_stream deletes the stream with every event and group: call it with confirm => true';
    END IF;
    -- The stream's row first: prunes, create_group and set_retention of
    -- the stream wait for the drop, and then find no stream. FOR NO KEY
    -- UPDATE, not FOR UPDATE: an append in progress may still check its
    -- foreign key to the row (FOR KEY SHARE) while it holds a partition
    -- this drop waits for. The delete at the end takes the row whole,
    -- once no append is left that could.
    PERFORM 1 FROM rheo.streams s WHERE s.stream = p_stream FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
    -- Then the allocators, which waits for the appends in progress to
    -- commit and holds later ones back, so that the events deleted below
    -- are all there are; then the groups' cursors and deliveries, in the
    -- order every function takes them (docs/design.md, "Locks").
    PERFORM 1 FROM rheo.partitions pt WHERE pt.stream = p_stream ORDER BY pt."partition" FOR UPDATE;
    PERFORM 1 FROM rheo.cursors c JOIN rheo.groups g ON g.group_id = c.group_id
      WHERE g.stream = p_stream
      ORDER BY c.group_id, c."partition"
        FOR UPDATE OF c;
    PERFORM 1 FROM rheo.deliveries d JOIN rheo.groups g ON g.group_id = d.group_id
      WHERE g.stream = p_stream
      ORDER BY d.group_id, d."partition", d.sequence
        FOR UPDATE OF d;

    DELETE FROM rheo.deliveries AS d USING rheo.groups g WHERE g.group_id = d.group_id AND g.stream = p_stream;
    DELETE FROM rheo.dead_letters AS dl USING rheo.groups g WHERE g.group_id = dl.group_id AND g.stream = p_stream;
    DELETE FROM rheo.key_wakeups AS w USING rheo.groups g WHERE g.group_id = w.group_id AND g.stream = p_stream;
    DELETE FROM rheo.cursors AS c USING rheo.groups g WHERE g.group_id = c.group_id AND g.stream = p_stream;
    DELETE FROM rheo.groups AS g WHERE g.stream = p_stream;
    DELETE FROM rheo.events AS e WHERE e.stream = p_stream;
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    DELETE FROM rheo.time_marks AS m WHERE m.stream = p_stream;
    DELETE FROM rheo.partitions AS pt WHERE pt.stream = p_stream;
    DELETE FROM rheo.streams AS s WHERE s.stream = p_stream;
    RETURN v_deleted;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.drop_stream(text, boolean)', 'rheo_admin');
-- Claims up to max_count events of a group for one consumer.
--
-- Claimable in a partition: deliveries whose retry delay has passed or
-- whose lease expired (below the attempt limit), then events past the
-- cursor. The cost is O(leases returned + deliveries due now), never
-- O(history) nor O(leases in flight): new events come from an index range
-- scan from the cursor, deliveries due from the index of their due time.
--
-- Concurrent fetchers of one group lock the cursor rows of the partitions
-- they claim from with SKIP LOCKED, so they spread over partitions instead
-- of queueing; only a fetcher that could lock no partition with work waits
-- for one, holding no other lock. The locks are FOR NO KEY UPDATE, so
-- that a prune, which holds a partition's cursors FOR KEY SHARE, does not
-- keep fetches out of it; replay, reset_group and drop lock them FOR
-- UPDATE and do. The locks last until the calling transaction ends.
--
-- The group's ordering (SPEC §8) changes what is claimable: under 'key'
-- an event waits, stored once as a blocked delivery, while an earlier
-- one of its key is not terminal, and settles leave wakeups that release
-- it; under 'partition' a partition offers its earliest delivery in
-- progress, or else one new event. Neither reads the events blocked, so
-- the cost stays as above (docs/design.md, "Ordering").
CREATE OR REPLACE FUNCTION rheo.fetch(stream text, group_name text, max_count int DEFAULT 10,
                                      consumer_id text DEFAULT NULL, lease_ms int DEFAULT 30000,
                                      partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS SETOF rheo.lease
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Every statement probes an index. A table scan of deliveries would read
-- every deleted row not yet vacuumed, and the planner picks one when
-- statistics are missing or stale (a new table has none); generic plans
-- are planned once per session and do not depend on the values. A generic
-- plan estimates its LIMITs at a tenth of the table, so on a large log its
-- cost passes jit_above_cost, and JIT compilation, redone at every call,
-- took 29 ms of a 32 ms fetch on a 10M-event stream: no JIT.
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
DECLARE
    p_stream      ALIAS FOR $1;
    p_group_name  ALIAS FOR $2;
    p_max_count   ALIAS FOR $3;
    p_consumer_id ALIAS FOR $4;
    p_lease_ms    ALIAS FOR $5;
    p_partitions  ALIAS FOR $6;
    p_clock       ALIAS FOR $7;
    v_group       record;
    v_scope       int[];
    v_now         timestamptz;
    v_expires     timestamptz;
    v_consumer    text;
    v_candidates  int[];
    v_locked      int[];
    v_next        bigint[];
    v_reclaim     int[];
    v_fresh       int[];
    v_avail       int[];
    v_quota       int[];
    v_k           int;
    v_total       int;
    v_level       int;
    v_below       int;
    v_rest        int;
    v_start       int;
    v_left        int;
    v_a           int;
    v_p           int;
    v_key         boolean;
    v_part        boolean;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    v_key := v_group.ordering = 'key';
    v_part := v_group.ordering = 'partition';
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('lease_ms must be >= 1, got %s', coalesce(p_lease_ms::text, 'NULL'));
    END IF;
    IF octet_length(p_consumer_id) > 1024 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('consumer_id must be at most 1024 bytes, got %s bytes', octet_length(p_consumer_id));
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    IF cardinality(v_scope) = 0 THEN
        RETURN;
    END IF;

    v_now := coalesce(p_clock, now());
    v_expires := v_now + make_interval(secs => p_lease_ms / 1000.0);
    v_consumer := coalesce(p_consumer_id, 'consumer-' || gen_random_uuid());

    -- Lock the cursor rows of the partitions with work, and read what
    -- each can give: events past the cursor, and deliveries due again
    -- (retry delay passed, or lease expired below the attempt limit),
    -- each capped at max_count. A lease expired at the attempt limit is
    -- work too: this fetch dead-letters it below. A row changed by a
    -- fetch that committed meanwhile is read again after it is locked.
    --
    -- In 'key' mode, keys with a wakeup are work too (below).
    --
    -- Deliveries are found by the index of their due time, so the leases
    -- in flight, however many, are not read, nor the events blocked behind
    -- their keys, which are due at 'infinity'. They are counted up to
    -- max_count + 1: up to max_count, those are all the deliveries due in
    -- the partition.
    SELECT array_agg(l.part ORDER BY l.part), array_agg(l.next_sequence ORDER BY l.part),
           array_agg(l.fresh ORDER BY l.part), array_agg(l.reclaim ORDER BY l.part)
      INTO v_locked, v_next, v_fresh, v_reclaim
      FROM (SELECT c."partition" AS part, c.next_sequence,
                   greatest(0, least(p_max_count::bigint, pt.high_watermark - c.next_sequence + 1))::int AS fresh,
                   (SELECT count(*)::int
                      FROM (SELECT 1 FROM rheo.deliveries d
                             WHERE d.group_id = c.group_id AND d."partition" = c."partition"
                               AND d.expires_at <= v_now
                               AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
                             ORDER BY d.expires_at
                             LIMIT p_max_count::bigint + 1) AS r) AS reclaim
              FROM rheo.cursors c
              JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
             WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
               AND (c.next_sequence <= pt.high_watermark
                    OR EXISTS (SELECT 1 FROM rheo.deliveries d
                                WHERE d.group_id = c.group_id AND d."partition" = c."partition"
                                  AND d.expires_at <= v_now)
                    OR (v_key AND EXISTS (SELECT 1 FROM rheo.key_wakeups w
                                           WHERE w.group_id = c.group_id AND w."partition" = c."partition")))
             ORDER BY c."partition"
               FOR NO KEY UPDATE OF c SKIP LOCKED) AS l;
    IF v_locked IS NULL THEN
        -- Every partition with work, if any, is being claimed by another
        -- fetcher (or replayed or reset): wait for one rather than report
        -- nothing. This is the only wait of a fetch, and it holds no lock
        -- of Rheo's while it waits, so it cannot close a cycle of waits
        -- (docs/design.md, "Locks").
        SELECT array_agg(c."partition" ORDER BY c."partition") INTO v_candidates
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
           AND (c.next_sequence <= pt.high_watermark
                OR EXISTS (SELECT 1 FROM rheo.deliveries d
                            WHERE d.group_id = c.group_id AND d."partition" = c."partition"
                              AND d.expires_at <= v_now)
                OR (v_key AND EXISTS (SELECT 1 FROM rheo.key_wakeups w
                                       WHERE w.group_id = c.group_id AND w."partition" = c."partition")));
        IF v_candidates IS NULL THEN
            RETURN;
        END IF;
        v_p := v_candidates[1 + (nextval('rheo.fetch_rotation') % cardinality(v_candidates))::int];
        SELECT ARRAY[c."partition"], ARRAY[c.next_sequence],
               ARRAY[greatest(0, least(p_max_count::bigint, pt.high_watermark - c.next_sequence + 1))::int],
               ARRAY[(SELECT count(*)::int
                        FROM (SELECT 1 FROM rheo.deliveries d
                               WHERE d.group_id = c.group_id AND d."partition" = c."partition"
                                 AND d.expires_at <= v_now
                                 AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
                               ORDER BY d.expires_at
                               LIMIT p_max_count::bigint + 1) AS r)]
          INTO v_locked, v_next, v_fresh, v_reclaim
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         WHERE c.group_id = v_group.group_id AND c."partition" = v_p
           FOR NO KEY UPDATE OF c;
        IF v_locked IS NULL THEN  -- the group was dropped while this fetch waited
            RETURN;
        END IF;
    END IF;

    -- A lease that expired at the attempt limit is dead-lettered rather
    -- than leased again, so a handler that always crashes cannot loop.
    -- Only in the partitions locked above: one whose cursor another
    -- fetcher holds is that fetcher's to clear, and one that a replay or
    -- reset holds, theirs. Delivery rows are taken with SKIP LOCKED here
    -- and below: a row locked by a settle in progress is that settle's to
    -- finish, and a fetch never waits for one. The rows found are then
    -- deleted by their physical address (ctid), so that they are looked
    -- up once, not once per row by a join. A dead letter is terminal: one
    -- with later events of its key blocked behind it leaves a wakeup of
    -- the key, which the 'key' mode takes below, within this fetch.
    WITH due AS MATERIALIZED (
        SELECT x.ctid AS tid FROM rheo.deliveries x
         WHERE x.group_id = v_group.group_id AND x."partition" = ANY (v_locked)
           AND x.expires_at <= v_now
           AND x.state = 'leased' AND x.attempt >= v_group.max_attempts
           FOR UPDATE SKIP LOCKED
    ), expired AS (
        DELETE FROM rheo.deliveries AS d
         WHERE d.ctid = ANY (ARRAY(SELECT due.tid FROM due))
        RETURNING d."partition", d.sequence, d.attempt, d.key, d.has_waiters
    ), woken AS (
        INSERT INTO rheo.key_wakeups (group_id, "partition", key)
        SELECT v_group.group_id, x."partition", x.key FROM expired x WHERE x.has_waiters
    )
    INSERT INTO rheo.dead_letters (group_id, "partition", sequence, attempt, reason, dead_lettered_at)
    SELECT v_group.group_id, x."partition", x.sequence, x.attempt, 'lease_expired', v_now
      FROM expired x;

    IF v_key THEN
        -- Every probe of a key's deliveries names the group and the
        -- partition as group_id::bigint and "partition"::bigint, the
        -- expressions of deliveries_key_idx, which the primary key cannot
        -- match: so the plan, generic and maybe made on an empty table,
        -- cannot take the primary key and filter on the key, which would
        -- read the events blocked behind a key.
        --
        -- 'key': take the wakeups of the partitions locked, and look at
        -- each key's earliest delivery not terminal. Blocked: its turn has
        -- come; it becomes pending, due now, and is claimed below like a
        -- retry (it keeps waiters when later ones of its key remain).
        -- Leased or pending without waiters: it is marked as having some,
        -- so that its settle wakes the key; when a settle holds it (SKIP
        -- LOCKED), the wakeup is kept for the next fetch, which sees how
        -- that settle ended. With waiters already, or no delivery left,
        -- the wakeup has done its work. The cost follows the wakeups (one
        -- per settle of a key's earliest delivery, at most), not the
        -- events blocked.
        WITH taken AS (
            DELETE FROM rheo.key_wakeups AS w
             WHERE w.group_id = v_group.group_id AND w."partition" = ANY (v_locked)
            RETURNING w."partition", w.key
        ), earliest AS MATERIALIZED (
            SELECT k.part, k.key, f.tid, f.state, f.has_waiters
              FROM (SELECT DISTINCT t."partition" AS part, t.key FROM taken t) AS k
             CROSS JOIN LATERAL (SELECT x.ctid AS tid, x.state, x.has_waiters FROM rheo.deliveries x
                                  WHERE x.group_id::bigint = v_group.group_id::bigint AND x."partition"::bigint = k.part::bigint
                                    AND x.key = k.key
                                  ORDER BY x.sequence
                                  LIMIT 1) AS f
        ), marking AS MATERIALIZED (
            SELECT x.ctid AS tid FROM rheo.deliveries x
             WHERE x.ctid = ANY (ARRAY(SELECT f.tid FROM earliest f
                                        WHERE f.state <> 'blocked' AND NOT f.has_waiters))
               FOR UPDATE SKIP LOCKED
        ), marked AS (
            UPDATE rheo.deliveries AS d SET has_waiters = true
             WHERE d.ctid = ANY (ARRAY(SELECT m.tid FROM marking m))
        ), kept AS (
            INSERT INTO rheo.key_wakeups (group_id, "partition", key)
            SELECT v_group.group_id, f.part, f.key FROM earliest f
             WHERE f.state <> 'blocked' AND NOT f.has_waiters
               AND f.tid <> ALL (ARRAY(SELECT m.tid FROM marking m))
        ), released AS (
            UPDATE rheo.deliveries AS d
               SET state = 'pending', expires_at = v_now,
                   has_waiters = EXISTS (SELECT 1 FROM rheo.deliveries y
                                          WHERE y.group_id::bigint = d.group_id::bigint AND y."partition"::bigint = d."partition"::bigint
                                            AND y.key = d.key AND y.sequence > d.sequence)
             WHERE d.ctid = ANY (ARRAY(SELECT f.tid FROM earliest f WHERE f.state = 'blocked'))
            RETURNING d."partition"
        )
        -- The released deliveries are due now: count them with the others.
        SELECT array_agg(least(p_max_count::bigint + 1, x.r + coalesce(n.released, 0))::int ORDER BY x.ord)
          INTO v_reclaim
          FROM unnest(v_locked, v_reclaim) WITH ORDINALITY AS x(part, r, ord)
          LEFT JOIN (SELECT r."partition" AS part, count(*) AS released
                       FROM released r GROUP BY r."partition") AS n ON n.part = x.part;
    ELSIF v_part THEN
        -- 'partition': a partition offers its earliest delivery not
        -- terminal, when it is due, and else, when it has none, the next
        -- event. Counted after the dead letters above, so that one made
        -- on expiry lets the next in within this fetch.
        SELECT array_agg(CASE WHEN h.sequence IS NULL THEN least(1, x.f) ELSE 0 END ORDER BY x.ord),
               array_agg(CASE WHEN h.expires_at <= v_now AND (h.state = 'pending' OR h.attempt < v_group.max_attempts)
                              THEN 1 ELSE 0 END ORDER BY x.ord)
          INTO v_fresh, v_reclaim
          FROM unnest(v_locked, v_fresh) WITH ORDINALITY AS x(part, f, ord)
          LEFT JOIN LATERAL (SELECT d.sequence, d.state, d.attempt, d.expires_at FROM rheo.deliveries d
                              WHERE d.group_id = v_group.group_id AND d."partition" = x.part
                              ORDER BY d.sequence
                              LIMIT 1) AS h ON true;
    END IF;
    IF p_max_count = 0 THEN
        RETURN;
    END IF;

    -- Quotas, as if dealt round-robin, one lease per partition per round
    -- from a rotating starting partition, until max_count or no work is
    -- left; computed in closed form rather than lease by lease. After
    -- v_level full rounds every partition has min(avail, v_level); the
    -- leases still left go, one each, to the partitions that have more,
    -- in rotation order.
    v_k := cardinality(v_locked);
    SELECT array_agg(least(p_max_count, x.r + x.f) ORDER BY x.ord) INTO v_avail
      FROM unnest(v_reclaim, v_fresh) WITH ORDINALITY AS x(r, f, ord);
    SELECT sum(a) INTO v_total FROM unnest(v_avail) AS a;
    IF v_total <= p_max_count THEN
        v_quota := v_avail;
    ELSE
        -- The highest level whose full rounds fit in max_count: raising
        -- the level from one partition's avail to the next costs one
        -- lease per partition not yet exhausted.
        v_level := 0;
        v_below := 0;  -- leases dealt up to v_level
        v_rest := v_k; -- partitions with avail above v_level
        FOR v_a IN SELECT a FROM unnest(v_avail) AS a ORDER BY a LOOP
            EXIT WHEN v_below + (v_a - v_level) * v_rest > p_max_count;
            v_below := v_below + (v_a - v_level) * v_rest;
            v_level := v_a;
            v_rest := v_rest - 1;
        END LOOP;
        v_level := v_level + (p_max_count - v_below) / v_rest;
        SELECT array_agg(least(a, v_level) ORDER BY ord) INTO v_quota
          FROM unnest(v_avail) WITH ORDINALITY AS x(a, ord);
        SELECT p_max_count - sum(q) INTO v_left FROM unnest(v_quota) AS q;
        v_start := (nextval('rheo.fetch_rotation') % v_k)::int;
        FOR i IN 0 .. v_k - 1 LOOP
            EXIT WHEN v_left = 0;
            v_p := 1 + (v_start + i) % v_k;  -- +1: arrays start at 1
            IF v_avail[v_p] > v_quota[v_p] THEN
                v_quota[v_p] := v_quota[v_p] + 1;
                v_left := v_left - 1;
            END IF;
        END LOOP;
    END IF;

    -- Claim every partition's quota in one statement: deliveries due
    -- again first (attempt + 1, a new lease id), then new events by an
    -- index range scan from the cursor, which moves past them. Within a
    -- partition the deliveries due again all precede the cursor, so the
    -- result is in (partition, sequence) order. A delivery row locked by
    -- a settle in progress is that settle's to finish (SKIP LOCKED), so
    -- the claim may return fewer leases than planned. The deliveries due
    -- again are updated by ctid, as above.
    IF v_key THEN
        -- The same claim under 'key' (docs/design.md, "Ordering"): a due
        -- delivery behind an earlier one of its key in progress is
        -- blocked again instead of leased, and new events past the cursor
        -- are leased or stored as blocked. A statement of its own, so
        -- that the claims of the other orderings run the plan they ran
        -- before orderings existed.
        RETURN QUERY
        WITH RECURSIVE plan AS (
            SELECT x.part, x.next_sequence, least(x.quota, x.reclaim) AS reclaim,
                   x.quota - least(x.quota, x.reclaim) AS fresh, x.reclaim <= p_max_count AS due_known
              FROM unnest(v_locked, v_next, v_quota, v_reclaim) AS x(part, next_sequence, quota, reclaim)
             WHERE x.quota > 0
        ), candidates AS (
            -- The deliveries due again with the lowest sequences. When a
            -- partition has at most max_count of them, they are read by the
            -- index of their due time and sorted; when it has more, they are
            -- many, and the primary key finds the lowest soon (unless they
            -- are few among many more leases in flight: that costs a read of
            -- the leases in flight below them).
            SELECT d.tid
              FROM plan p
             CROSS JOIN LATERAL (SELECT y.tid
                                   FROM (SELECT x.ctid AS tid, x.sequence FROM rheo.deliveries x
                                          WHERE x.group_id = v_group.group_id AND x."partition" = p.part
                                            AND x.expires_at <= v_now
                                            AND (x.state = 'pending' OR x.attempt < v_group.max_attempts)
                                          ORDER BY x.expires_at
                                          LIMIT p_max_count) AS y
                                  ORDER BY y.sequence
                                  LIMIT p.reclaim) AS d
             WHERE p.reclaim > 0 AND p.due_known
            UNION ALL
            SELECT d.tid
              FROM plan p
             CROSS JOIN LATERAL (SELECT x.ctid AS tid FROM rheo.deliveries x
                                  WHERE x.group_id = v_group.group_id AND x."partition" = p.part
                                    AND x.expires_at <= v_now
                                    AND (x.state = 'pending' OR x.attempt < v_group.max_attempts)
                                  ORDER BY x.sequence
                                  LIMIT p.reclaim) AS d
             WHERE p.reclaim > 0 AND NOT p.due_known
        ), picked AS MATERIALIZED (
            -- Locked with SKIP LOCKED, and the conditions checked again on the
            -- row as it is once locked.
            SELECT d.ctid AS tid, d."partition" AS part, d.sequence, d.key FROM rheo.deliveries d
             WHERE d.ctid = ANY (ARRAY(SELECT c.tid FROM candidates c))
               AND d.expires_at <= v_now
               AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
               FOR UPDATE SKIP LOCKED
        ), ahead AS MATERIALIZED (
            -- 'key': the picked deliveries with an earlier delivery of their
            -- key not terminal (a replay, or leases from before the ordering
            -- was set, can leave such), and the nearest such one. They are
            -- blocked instead of leased.
            SELECT pk.tid, pk.part, pk.key, b.state, b.has_waiters
              FROM picked pk
             CROSS JOIN LATERAL (SELECT x.state, x.has_waiters FROM rheo.deliveries x
                                  WHERE x.group_id::bigint = v_group.group_id::bigint AND x."partition"::bigint = pk.part::bigint
                                    AND x.key = pk.key AND x.sequence < pk.sequence
                                  ORDER BY x.sequence DESC
                                  LIMIT 1) AS b
        ), reclaimed AS (
            UPDATE rheo.deliveries AS d
               SET state = 'leased', lease_id = gen_random_uuid(), consumer_id = v_consumer,
                   attempt = d.attempt + 1, leased_at = v_now, expires_at = v_expires
             WHERE d.ctid = ANY (ARRAY(SELECT pk.tid FROM picked pk
                                        WHERE NOT EXISTS (SELECT 1 FROM ahead a WHERE a.tid = pk.tid)))
            RETURNING d."partition", d.sequence, d.lease_id, d.attempt
        ), reblocked AS (
            UPDATE rheo.deliveries AS d
               SET state = 'blocked', lease_id = NULL, consumer_id = NULL, expires_at = 'infinity'
             WHERE d.ctid = ANY (ARRAY(SELECT a.tid FROM ahead a))
        ), key_walk AS (
            -- 'key': the events past the cursor, leased or blocked, read
            -- in a window of twice the quota from the cursor, and again in
            -- a window twice the last while one read whole leases fewer
            -- than the quota: so a fetch reads about what it leases when
            -- few events are blocked, walks past a long backlog in a few
            -- windows, and returns nothing only when nothing is claimable.
            -- Each blocked event is stored and passed once.
            --
            -- In a window, an event is blocked when an earlier event of
            -- its key is not terminal: an earlier one in the window
            -- (row_number), or a delivery found by the key's index (probed
            -- once per key, as of this statement). It is cut after the
            -- quota's last lease. has_waiters: later events of its key are
            -- in the window. wake: blocked behind a delivery not marked as
            -- having waiters, which the next fetch marks (or finds settled).
            -- more: the window was read whole and leases too few, so the
            -- next one is read; only the rows of a partition's last window
            -- are kept. A seed row per partition starts the walk.
            SELECT p.part, p.next_sequence AS next, p.fresh, 2 * p.fresh::bigint AS size,
                   true AS seed, true AS more, true AS driver,
                   NULL::bigint AS sequence, NULL::text AS id, NULL::text AS key, NULL::text AS type,
                   NULL::jsonb AS payload, NULL::jsonb AS metadata, NULL::timestamptz AS ts,
                   false AS blocked, false AS has_waiters, false AS wake
              FROM plan p
             WHERE p.fresh > 0
            UNION ALL
            SELECT k.part, k.next, k.fresh, s.size, false, w.more, w.sequence = k.next + s.size - 1,
                   w.sequence, w.id, w.key, w.type, w.payload, w.metadata, w.ts, w.blocked, w.has_waiters, w.wake
              FROM key_walk k
             CROSS JOIN LATERAL (SELECT CASE WHEN k.seed THEN k.size ELSE 2 * k.size END AS size) AS s
             CROSS JOIN LATERAL (
                    SELECT z.sequence, z.id, z.key, z.type, z.payload, z.metadata, z.ts, z.blocked, z.has_waiters,
                           z.wake, z.n_read = s.size AND z.n_leasable < k.fresh AS more
                      FROM (SELECT y.*,
                                   count(*) FILTER (WHERE NOT y.blocked) OVER (ORDER BY y.sequence) AS n_leased,
                                   count(*) FILTER (WHERE NOT y.blocked) OVER () AS n_leasable,
                                   count(*) OVER () AS n_read
                              FROM (SELECT e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts,
                                           e.key IS NOT NULL AND (e.rn > 1 OR b.state IS NOT NULL) AS blocked,
                                           e.key IS NOT NULL AND e.rn < e.cnt AS has_waiters,
                                           coalesce(b.state <> 'blocked' AND NOT b.has_waiters, false) AS wake
                                      FROM (SELECT r.*,
                                                   row_number() OVER (PARTITION BY r.key ORDER BY r.sequence) AS rn,
                                                   count(*) OVER (PARTITION BY r.key) AS cnt
                                              FROM (SELECT ev.sequence, ev.id, ev.key, ev.type, ev.payload,
                                                           ev.metadata, ev.ts
                                                      FROM rheo.events ev
                                                     WHERE ev.stream = p_stream AND ev."partition" = k.part
                                                       AND ev.sequence >= k.next
                                                     ORDER BY ev.sequence
                                                     LIMIT s.size) AS r) AS e
                                      LEFT JOIN LATERAL (SELECT x.state, x.has_waiters FROM rheo.deliveries x
                                                          WHERE x.group_id::bigint = v_group.group_id::bigint
                                                            AND x."partition"::bigint = k.part::bigint
                                                            AND x.key = e.key AND x.sequence < e.sequence
                                                            AND e.rn = 1
                                                          ORDER BY x.sequence DESC
                                                          LIMIT 1) AS b ON true) AS y) AS z
                     WHERE z.n_leased < k.fresh OR (z.n_leased = k.fresh AND NOT z.blocked)) AS w
             WHERE k.driver AND k.more
        ), fresh AS (
            -- The lease ids are made here, so that the result can be read from
            -- this CTE rather than joined back to the INSERT's RETURNING.
            SELECT k.part, k.sequence, gen_random_uuid() AS lease_id, k.id, k.key, k.type, k.payload, k.metadata, k.ts,
                   k.blocked, k.has_waiters, k.wake
              FROM key_walk k
             WHERE NOT k.seed AND NOT k.more
        ), inserted AS (
            INSERT INTO rheo.deliveries
                   (group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at, ts,
                    key, has_waiters)
            SELECT v_group.group_id, f.part, f.sequence,
                   CASE WHEN f.blocked THEN 'blocked' ELSE 'leased' END,
                   CASE WHEN f.blocked THEN NULL ELSE f.lease_id END,
                   CASE WHEN f.blocked THEN NULL ELSE v_consumer END,
                   CASE WHEN f.blocked THEN 0 ELSE 1 END,
                   CASE WHEN f.blocked THEN NULL ELSE v_now END,
                   CASE WHEN f.blocked THEN 'infinity' ELSE v_expires END,
                   f.ts, f.key, f.has_waiters
              FROM fresh f
        ), woken AS (
            INSERT INTO rheo.key_wakeups (group_id, "partition", key)
            SELECT DISTINCT v_group.group_id, w.part, w.key
              FROM (SELECT f.part, f.key FROM fresh f WHERE f.wake
                    UNION ALL
                    SELECT a.part, a.key FROM ahead a WHERE a.state <> 'blocked' AND NOT a.has_waiters) AS w
        ), advanced AS (
            -- Sequences are contiguous and visible in order, so the claimed
            -- ones are exactly next .. next + count - 1.
            UPDATE rheo.cursors AS c
               SET next_sequence = n.next_sequence + n.taken
              FROM (SELECT p.part, p.next_sequence, count(*) AS taken
                      FROM plan p JOIN fresh f ON f.part = p.part
                     GROUP BY p.part, p.next_sequence) AS n
             WHERE c.group_id = v_group.group_id AND c."partition" = n.part
        )
        SELECT r.lease_id, r.lease_id::text, p_stream, p_group_name, v_consumer, r.attempt,
               v_now, v_expires, e.id, r."partition", r.sequence, e.key, e.type, e.payload, e.metadata, e.ts
          FROM reclaimed r
         CROSS JOIN LATERAL (SELECT ev.* FROM rheo.events ev
                              WHERE ev.stream = p_stream AND ev."partition" = r."partition"
                                AND ev.sequence = r.sequence LIMIT 1) AS e
        UNION ALL
        SELECT f.lease_id, f.lease_id::text, p_stream, p_group_name, v_consumer, 1,
               v_now, v_expires, f.id, f.part, f.sequence, f.key, f.type, f.payload, f.metadata, f.ts
          FROM fresh f
         WHERE NOT f.blocked
         ORDER BY 10, 11;  -- partition, sequence
        RETURN;
    END IF;
    RETURN QUERY
    WITH plan AS (
        SELECT x.part, x.next_sequence, least(x.quota, x.reclaim) AS reclaim,
               x.quota - least(x.quota, x.reclaim) AS fresh, x.reclaim <= p_max_count AS due_known
          FROM unnest(v_locked, v_next, v_quota, v_reclaim) AS x(part, next_sequence, quota, reclaim)
         WHERE x.quota > 0
    ), candidates AS (
        -- The deliveries due again with the lowest sequences. When a
        -- partition has at most max_count of them, they are read by the
        -- index of their due time and sorted; when it has more, they are
        -- many, and the primary key finds the lowest soon (unless they
        -- are few among many more leases in flight: that costs a read of
        -- the leases in flight below them).
        SELECT d.tid
          FROM plan p
         CROSS JOIN LATERAL (SELECT y.tid
                               FROM (SELECT x.ctid AS tid, x.sequence FROM rheo.deliveries x
                                      WHERE x.group_id = v_group.group_id AND x."partition" = p.part
                                        AND x.expires_at <= v_now
                                        AND (x.state = 'pending' OR x.attempt < v_group.max_attempts)
                                      ORDER BY x.expires_at
                                      LIMIT p_max_count) AS y
                              ORDER BY y.sequence
                              LIMIT p.reclaim) AS d
         WHERE p.reclaim > 0 AND p.due_known AND NOT v_part
        UNION ALL
        SELECT d.tid
          FROM plan p
         CROSS JOIN LATERAL (SELECT x.ctid AS tid FROM rheo.deliveries x
                              WHERE x.group_id = v_group.group_id AND x."partition" = p.part
                                AND x.expires_at <= v_now
                                AND (x.state = 'pending' OR x.attempt < v_group.max_attempts)
                              ORDER BY x.sequence
                              LIMIT p.reclaim) AS d
         WHERE p.reclaim > 0 AND NOT p.due_known AND NOT v_part
        UNION ALL
        -- 'partition': the earliest delivery, whatever its state; picked
        -- below only if it is still due.
        SELECT d.tid
          FROM plan p
         CROSS JOIN LATERAL (SELECT x.ctid AS tid FROM rheo.deliveries x
                              WHERE x.group_id = v_group.group_id AND x."partition" = p.part
                              ORDER BY x.sequence
                              LIMIT 1) AS d
         WHERE p.reclaim > 0 AND v_part
    ), picked AS MATERIALIZED (
        -- Locked with SKIP LOCKED, and the conditions checked again on the
        -- row as it is once locked.
        SELECT d.ctid AS tid FROM rheo.deliveries d
         WHERE d.ctid = ANY (ARRAY(SELECT c.tid FROM candidates c))
           AND d.expires_at <= v_now
           AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
           FOR UPDATE SKIP LOCKED
    ), reclaimed AS (
        UPDATE rheo.deliveries AS d
           SET state = 'leased', lease_id = gen_random_uuid(), consumer_id = v_consumer,
               attempt = d.attempt + 1, leased_at = v_now, expires_at = v_expires
         WHERE d.ctid = ANY (ARRAY(SELECT picked.tid FROM picked))
        RETURNING d."partition", d.sequence, d.lease_id, d.attempt
    ), fresh AS (
        -- The lease ids are made here, so that the result can be read from
        -- this CTE rather than joined back to the INSERT's RETURNING.
        SELECT p.part, e.sequence, gen_random_uuid() AS lease_id,
               e.id, e.key, e.type, e.payload, e.metadata, e.ts
          FROM plan p
         CROSS JOIN LATERAL (SELECT e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts
                               FROM rheo.events e
                              WHERE e.stream = p_stream AND e."partition" = p.part
                                AND e.sequence >= p.next_sequence
                              ORDER BY e.sequence
                              LIMIT p.fresh) AS e
         WHERE p.fresh > 0
    ), inserted AS (
        -- No key: only 'key' fetches read it (set_ordering copies it into
        -- the deliveries in progress when a group turns to 'key'), and
        -- without it the delivery skips deliveries_key_idx.
        INSERT INTO rheo.deliveries
               (group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at, ts)
        SELECT v_group.group_id, f.part, f.sequence, 'leased', f.lease_id, v_consumer, 1, v_now, v_expires, f.ts
          FROM fresh f
    ), advanced AS (
        -- Sequences are contiguous and visible in order, so the claimed
        -- ones are exactly next .. next + count - 1.
        UPDATE rheo.cursors AS c
           SET next_sequence = n.next_sequence + n.taken
          FROM (SELECT p.part, p.next_sequence, count(*) AS taken
                  FROM plan p JOIN fresh f ON f.part = p.part
                 GROUP BY p.part, p.next_sequence) AS n
         WHERE c.group_id = v_group.group_id AND c."partition" = n.part
    )
    SELECT r.lease_id, r.lease_id::text, p_stream, p_group_name, v_consumer, r.attempt,
           v_now, v_expires, e.id, r."partition", r.sequence, e.key, e.type, e.payload, e.metadata, e.ts
      FROM reclaimed r
     CROSS JOIN LATERAL (SELECT ev.* FROM rheo.events ev
                          WHERE ev.stream = p_stream AND ev."partition" = r."partition"
                            AND ev.sequence = r.sequence LIMIT 1) AS e
    UNION ALL
    SELECT f.lease_id, f.lease_id::text, p_stream, p_group_name, v_consumer, 1,
           v_now, v_expires, f.id, f.part, f.sequence, f.key, f.type, f.payload, f.metadata, f.ts
      FROM fresh f
     ORDER BY 10, 11;  -- partition, sequence
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.fetch(text, text, int, text, int, int[], timestamptz)', 'rheo_consumer');
-- A summary of a group's state at clock.
--
-- An event blocked behind its key ('key' ordering) is not terminal, so it
-- counts in lag and oldest_unsettled_ts, but it is neither in flight nor
-- a pending retry: it waits for an earlier event, not for a time.
--
-- One pass over the group's deliveries gives the counts and their oldest
-- event (deliveries carry their event's ts). The oldest event not offered
-- yet is found per partition from the time marks: the events from the
-- cursor to the end of its segment of 1024, then one row per full segment
-- after it, then the partition's own row for the segment in progress. So
-- a group far behind costs a row per 1024 events of its backlog, not the
-- backlog.
CREATE OR REPLACE FUNCTION rheo.group_info(stream text, group_name text, clock timestamptz DEFAULT NULL)
RETURNS TABLE (lag bigint, inflight bigint, pending_retry bigint, dead_letters bigint,
               oldest_unsettled_ts timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_clock      ALIAS FOR $3;
    v_group      record;
    v_now        timestamptz := coalesce(p_clock, now());
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    PERFORM rheo._check_time('clock', p_clock);
    RETURN QUERY
    WITH delivered AS (
        SELECT count(*) FILTER (WHERE d.state = 'leased' AND d.expires_at > v_now) AS inflight,
               count(*) FILTER (WHERE d.state <> 'blocked'
                                  AND NOT (d.state = 'leased' AND d.expires_at > v_now)) AS pending_retry,
               min(d.ts) AS oldest
          FROM rheo.deliveries d
         WHERE d.group_id = v_group.group_id
    ), unoffered AS (
        SELECT min(least(head.ts, marks.ts, tail.ts)) AS oldest
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         -- k: the first multiple of 1024 at or after the cursor, the end of
         -- its segment; the last mark: the highest multiple of 1024 allocated.
         CROSS JOIN LATERAL (SELECT (c.next_sequence + 1023) / 1024 * 1024 AS k,
                                    pt.high_watermark / 1024 * 1024 AS last_mark) AS b
         CROSS JOIN LATERAL (SELECT min(e.ts) AS ts FROM rheo.events e
                              WHERE e.stream = p_stream AND e."partition" = c."partition"
                                AND e.sequence >= c.next_sequence
                                AND e.sequence <= least(b.k, pt.high_watermark)) AS head
         CROSS JOIN LATERAL (SELECT min(m.min_ts) AS ts FROM rheo.time_marks m
                              WHERE m.stream = p_stream AND m."partition" = c."partition"
                                AND m.sequence > b.k AND m.sequence <= b.last_mark) AS marks
         CROSS JOIN LATERAL (SELECT CASE WHEN b.last_mark >= b.k THEN pt.tail_min_ts END AS ts) AS tail
         WHERE c.group_id = v_group.group_id AND c.next_sequence <= pt.high_watermark
    )
    SELECT (SELECT coalesce(sum(l.lag), 0)::bigint FROM rheo.lag(p_stream, p_group_name) l),
           dl.inflight, dl.pending_retry,
           (SELECT count(*) FROM rheo.dead_letters x WHERE x.group_id = v_group.group_id),
           least(dl.oldest, u.oldest)
      FROM delivered dl, unoffered u;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.group_info(text, text, timestamptz)', 'rheo_reader');
-- Per group and partition progress, for psql dashboards (as of now()).
--
-- A view reads its tables with its owner's privileges but calls functions
-- with the caller's, so the frontier is written out here rather than
-- taken from rheo._frontier, which rheo_reader may not execute.
CREATE OR REPLACE VIEW rheo.group_status AS
SELECT g.stream,
       g.group_name,
       c."partition",
       f.frontier,
       pt.high_watermark,
       greatest(0, pt.high_watermark - f.frontier) AS lag,
       (SELECT count(*) FROM rheo.deliveries d
         WHERE d.group_id = g.group_id AND d."partition" = c."partition"
           AND d.state = 'leased' AND d.expires_at > now()) AS inflight,
       (SELECT count(*) FROM rheo.dead_letters dl
         WHERE dl.group_id = g.group_id AND dl."partition" = c."partition") AS dead_letters
  FROM rheo.groups g
  JOIN rheo.cursors c ON c.group_id = g.group_id
  JOIN rheo.partitions pt ON pt.stream = g.stream AND pt."partition" = c."partition"
 CROSS JOIN LATERAL (SELECT coalesce((SELECT d.sequence FROM rheo.deliveries d
                                       WHERE d.group_id = g.group_id AND d."partition" = c."partition"
                                       ORDER BY d.sequence LIMIT 1),
                                     c.next_sequence) - 1 AS frontier) AS f;

SELECT rheo._access('ALL', 'TABLE rheo.group_status');
SELECT rheo._access('SELECT', 'TABLE rheo.group_status', 'rheo_reader');
-- Events are immutable: UPDATE and TRUNCATE always fail, INSERT succeeds
-- only inside rheo.append / rheo.append_batch, and DELETE only inside
-- rheo.prune and rheo.drop_stream.
--
-- Those functions are SECURITY DEFINER, so inside them current_user is
-- the owner of rheo.events (rheo_owner). No other role can become it:
-- rheo_owner cannot log in and is granted to no one, and no other
-- function of Rheo's inserts or deletes events. The guard therefore admits
-- an INSERT or a DELETE exactly when it is made as the table's owner,
-- whatever a session has set; a role granted INSERT or DELETE on the
-- table still gets immutable_event. (A superuser can always get around a
-- trigger; so can the owner, which is why nothing logs in as it.)
CREATE OR REPLACE FUNCTION rheo._events_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'DELETE')
       AND (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID)
           = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'immutable_event' USING ERRCODE = 'RH012',
        DETAIL = format('%s on rheo.events is not allowed: events are immutable, added only by rheo.append and rheo.append_batch and removed only by rheo.prune and rheo.drop_stream', TG_OP);
END
$$;

CREATE OR REPLACE TRIGGER events_immutable
    BEFORE INSERT OR UPDATE OR DELETE ON rheo.events
    FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard();

CREATE OR REPLACE TRIGGER events_no_truncate
    BEFORE TRUNCATE ON rheo.events
    FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard();

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._events_guard()');

-- The public log: readable in plain SQL by every Rheo role.
SELECT rheo._access('SELECT', 'TABLE rheo.events', 'rheo_reader');
-- Frontier, high watermark and lag per partition, ordered by partition.
-- Each row is two index lookups, whatever the history's size.
CREATE OR REPLACE FUNCTION rheo.lag(stream text, group_name text, partitions int[] DEFAULT NULL)
RETURNS TABLE ("partition" int, frontier bigint, high_watermark bigint, lag bigint)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_partitions ALIAS FOR $3;
    v_group      record;
    v_scope      int[];
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    RETURN QUERY
        SELECT c."partition", f.frontier, pt.high_watermark, greatest(0, pt.high_watermark - f.frontier)
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         CROSS JOIN LATERAL (SELECT rheo._frontier(c.group_id, c."partition", c.next_sequence) AS frontier) AS f
         WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
         ORDER BY c."partition";
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.lag(text, text, int[])', 'rheo_reader');
-- A group's deliveries in progress, the soonest due first: leases about
-- to lapse (or lapsed, not yet claimed again) and retries about to come
-- due. For operators and dashboards, who may not read rheo.deliveries
-- (docs/security.md). Events blocked behind their keys ('key' ordering)
-- are neither, and are left out: they are due at 'infinity', the end of
-- the index range read.
--
-- Each partition gives at most max_count of its deliveries through the
-- index of their due time, and the soonest max_count of those are
-- returned: the cost follows max_count and the partition count, not the
-- leases in flight.
CREATE OR REPLACE FUNCTION rheo.leases(stream text, group_name text, max_count int DEFAULT 100)
RETURNS TABLE (event_id text, "partition" int, sequence bigint, state text, consumer_id text, attempt int,
               leased_at timestamptz, expires_at timestamptz, reason text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_max_count  ALIAS FOR $3;
    v_group      record;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    RETURN QUERY
        SELECT e.id, d."partition", d.sequence, d.state, d.consumer_id, d.attempt, d.leased_at, d.expires_at, d.reason
          FROM rheo.cursors c
         CROSS JOIN LATERAL (SELECT x."partition", x.sequence, x.state, x.consumer_id, x.attempt, x.leased_at,
                                    x.expires_at, x.reason
                               FROM rheo.deliveries x
                              WHERE x.group_id = c.group_id AND x."partition" = c."partition"
                                AND x.expires_at < 'infinity'
                              ORDER BY x.expires_at
                              LIMIT p_max_count) AS d
         CROSS JOIN LATERAL (SELECT ev.id FROM rheo.events ev
                              WHERE ev.stream = p_stream AND ev."partition" = d."partition"
                                AND ev.sequence = d.sequence LIMIT 1) AS e
         WHERE c.group_id = v_group.group_id
         ORDER BY d.expires_at, d."partition", d.sequence
         LIMIT p_max_count;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.leases(text, text, int)', 'rheo_reader');
-- A stream's groups, ordered by name.
CREATE OR REPLACE FUNCTION rheo.list_groups(stream text)
RETURNS TABLE (group_name text, max_attempts int, created_at timestamptz, ordering text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream ALIAS FOR $1;
BEGIN
    PERFORM rheo._stream(p_stream);
    RETURN QUERY
        SELECT g.group_name, g.max_attempts, g.created_at, g.ordering
          FROM rheo.groups g
         WHERE g.stream = p_stream
         ORDER BY g.group_name;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.list_groups(text)', 'rheo_reader');
-- Every stream, ordered by name.
CREATE OR REPLACE FUNCTION rheo.list_streams()
RETURNS TABLE (stream text, partition_count int, created_at timestamptz)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.stream, s.partition_count, s.created_at FROM rheo.streams s ORDER BY s.stream
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.list_streams()', 'rheo_reader');
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
-- (docs/design.md, "Locks"): the stream's row, FOR NO KEY UPDATE, so
-- that prunes of the stream, drop_stream and create_group wait for each
-- other while appends' foreign key checks on it do not; the cursors
-- of the partition being pruned, for every group, so that no replay or
-- reset moves a cursor below what is deleted: FOR KEY SHARE, which a
-- fetch's FOR NO KEY UPDATE does not conflict with (a fetch only moves a
-- cursor forward, past what a prune deletes), and with force, which
-- moves cursors itself, FOR UPDATE, and then the deliveries it deletes; and last, the partitions' rows, to move their low watermarks,
-- which appends wait for no longer than this commit. Bounded by
-- max_count, each call is a short transaction: see docs/design.md,
-- "Retention", for its cost and what it leaves to vacuum.
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
    v_low       bigint;
    v_high      bigint;
    v_end       bigint;
    v_young     bigint;
    v_passed    bigint;
    v_parts     int[] := '{}';
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

    SELECT s.max_age INTO v_max_age FROM rheo.streams s WHERE s.stream = p_stream FOR NO KEY UPDATE;
    IF NOT FOUND THEN  -- dropped meanwhile
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
    IF v_max_age IS NULL OR p_max_count = 0 THEN
        RETURN 0;
    END IF;
    v_cutoff := coalesce(p_clock, now()) - v_max_age;
    v_left := p_max_count;

    FOR v_p IN 0 .. v_count - 1 LOOP
        EXIT WHEN v_left = 0;
        IF p_force THEN  -- it may move them
            PERFORM 1 FROM rheo.cursors c JOIN rheo.groups g ON g.group_id = c.group_id
              WHERE g.stream = p_stream AND c."partition" = v_p
              ORDER BY c.group_id
                FOR UPDATE OF c;
        ELSE
            PERFORM 1 FROM rheo.cursors c JOIN rheo.groups g ON g.group_id = c.group_id
              WHERE g.stream = p_stream AND c."partition" = v_p
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
            SELECT min(rheo._frontier(c.group_id, c."partition", c.next_sequence)) INTO v_passed
              FROM rheo.cursors c JOIN rheo.groups g ON g.group_id = c.group_id
             WHERE g.stream = p_stream AND c."partition" = v_p;
            v_end := least(v_end, coalesce(v_passed, v_end));
        END IF;
        CONTINUE WHEN v_end < v_low;

        IF p_force THEN
            -- Groups that have not settled all of the run lose it: their
            -- deliveries of it (locked in primary key order, as replay
            -- does), and their cursors move past it.
            PERFORM 1 FROM rheo.deliveries d JOIN rheo.groups g ON g.group_id = d.group_id
              WHERE g.stream = p_stream AND d."partition" = v_p AND d.sequence <= v_end
              ORDER BY d.group_id, d.sequence
                FOR UPDATE OF d;
            -- A delivery deleted with events of its key blocked behind it
            -- (beyond the run) leaves a wakeup of the key, as a settle does.
            WITH gone AS (
                DELETE FROM rheo.deliveries AS d USING rheo.groups g
                 WHERE g.group_id = d.group_id AND g.stream = p_stream AND d."partition" = v_p
                   AND d.sequence <= v_end
                RETURNING d.group_id, d.key, d.has_waiters
            )
            INSERT INTO rheo.key_wakeups (group_id, "partition", key)
            SELECT x.group_id, v_p, x.key FROM gone x WHERE x.has_waiters;
            UPDATE rheo.cursors AS c SET next_sequence = v_end + 1
              FROM rheo.groups g
             WHERE g.group_id = c.group_id AND g.stream = p_stream AND c."partition" = v_p
               AND c.next_sequence <= v_end;
        END IF;
        DELETE FROM rheo.dead_letters AS dl USING rheo.groups g
         WHERE g.group_id = dl.group_id AND g.stream = p_stream AND dl."partition" = v_p
           AND dl.sequence BETWEEN v_low AND v_end;
        DELETE FROM rheo.events AS e
         WHERE e.stream = p_stream AND e."partition" = v_p AND e.sequence BETWEEN v_low AND v_end;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        -- A mark summarises the 1024 events up to it: once they are all
        -- gone it goes too (rheo._first_at reads past missing marks).
        DELETE FROM rheo.time_marks AS m
         WHERE m.stream = p_stream AND m."partition" = v_p AND m.sequence <= v_end;
        v_deleted := v_deleted + v_n;
        v_left := v_left - v_n;
        v_parts := v_parts || v_p;
        v_lows := v_lows || (v_end + 1);
    END LOOP;

    -- In ascending partition order, as appends lock them.
    FOR i IN 1 .. cardinality(v_parts) LOOP
        UPDATE rheo.partitions AS pt SET low_watermark = v_lows[i]
         WHERE pt.stream = p_stream AND pt."partition" = v_parts[i];
    END LOOP;
    RETURN v_deleted;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.prune(text, int, boolean, timestamptz)', 'rheo_admin');
-- History search: rheo.query_page returns one page of a stream's events
-- matching a filter together with the cursor of the next page; rheo.query
-- returns the page's events as rows. See docs/query.md.
--
-- Order: (sequence, partition) ascending, or both descending. Each page
-- is, in every partition of the scope, the matching events past that
-- partition's position in the cursor, merged and cut at max_count. Within
-- a partition sequences become visible in commit order, so an event
-- committed after a page lands past its partition's position and is never
-- skipped; and positions only move over what the page examined, so
-- nothing is returned twice.
--
-- Every partition is probed through LATERAL ... ORDER BY sequence LIMIT
-- max_count, an index range scan the planner cannot turn into a scan of
-- the stream; the statement is built from fixed fragments for the filter
-- keys present, so that each plan is made for the values at hand (an
-- index on type or correlation id is only usable when the planner sees
-- the condition), and every value is passed as a parameter.
CREATE OR REPLACE FUNCTION rheo.query_page(stream text, filter jsonb DEFAULT '{}', max_count int DEFAULT 100,
                                           after text DEFAULT NULL, descending boolean DEFAULT false)
RETURNS TABLE (events rheo.events[], next_cursor text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream      ALIAS FOR $1;
    p_filter      ALIAS FOR $2;
    p_max_count   ALIAS FOR $3;
    p_after       ALIAS FOR $4;
    p_descending  ALIAS FOR $5;
    v_count       int;
    f             record;
    v_scope       int[];
    v_fingerprint text;
    v_hwm         bigint[];
    v_pos         bigint[];
    v_sql         text;
    v_events      rheo.events[];
    v_n           int;
    v_last        rheo.events;
BEGIN
    v_count := rheo._stream(p_stream);
    f := rheo._query_filter(p_filter, v_count);
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    IF p_descending IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'descending must not be NULL';
    END IF;

    IF f."partition" IS NULL THEN
        v_scope := ARRAY(SELECT generate_series(0, v_count - 1));
    ELSE
        v_scope := ARRAY[f."partition"];
    END IF;
    v_fingerprint := rheo._query_fingerprint(p_stream, p_filter, p_descending);

    -- The function is STABLE: every statement below reads the snapshot of
    -- the calling statement, so the high watermarks and the events agree.
    SELECT array_agg(pt.high_watermark ORDER BY pt."partition") INTO v_hwm
      FROM rheo.partitions pt
     WHERE pt.stream = p_stream AND pt."partition" = ANY (v_scope);

    IF p_after IS NOT NULL THEN
        v_pos := rheo._query_cursor_decode(p_after, v_fingerprint, cardinality(v_scope));
    ELSIF p_descending THEN
        -- Pin the walk to what is visible now: events appended later are
        -- above it and belong to no page of this walk.
        v_pos := ARRAY(SELECT least(h.hwm, coalesce(f.until_sequence, h.hwm)) + 1
                         FROM unnest(v_hwm) WITH ORDINALITY AS h(hwm, ord) ORDER BY h.ord);
    ELSE
        v_pos := array_fill(coalesce(f.after_sequence, 0), ARRAY[cardinality(v_scope)]);
    END IF;

    IF p_max_count = 0 THEN
        RETURN QUERY SELECT '{}'::rheo.events[], rheo._query_cursor_encode(v_fingerprint, v_pos);
        RETURN;
    END IF;

    -- $1 scope, $2 positions, $3 stream, $4 max_count, $5 type, $6 key,
    -- $7 payload, $8 metadata, $9 from, $10 to, $11 after_sequence,
    -- $12 until_sequence, $13 metadata correlation_id, $14 metadata
    -- causation_id. Each page is at most max_count events from each
    -- partition, merged.
    v_sql := 'SELECT array_agg(t.ev ORDER BY (t.ev).sequence' || CASE WHEN p_descending THEN ' DESC' ELSE '' END
          || ', (t.ev)."partition"' || CASE WHEN p_descending THEN ' DESC' ELSE '' END || ')'
          || ' FROM (SELECT l.ev FROM unnest($1::int[], $2::bigint[]) AS b(p, pos)'
          || ' CROSS JOIN LATERAL (SELECT ev FROM rheo.events ev'
          || ' WHERE ev.stream = $3 AND ev."partition" = b.p';
    IF p_descending THEN
        v_sql := v_sql || ' AND ev.sequence < b.pos';
        IF f.after_sequence IS NOT NULL THEN
            v_sql := v_sql || ' AND ev.sequence > $11';
        END IF;
    ELSE
        v_sql := v_sql || ' AND ev.sequence > b.pos';
        IF f.until_sequence IS NOT NULL THEN
            v_sql := v_sql || ' AND ev.sequence <= $12';
        END IF;
    END IF;
    IF f.type IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.type = $5';
    END IF;
    IF f.key IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.key = $6';
    END IF;
    IF f.payload IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.payload @> $7';
    END IF;
    IF f.metadata IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.metadata @> $8';
        -- Implied by the containment when the value is a string, and
        -- written out so that the lineage indexes can serve it.
        IF jsonb_typeof(f.metadata -> 'correlation_id') = 'string' THEN
            v_sql := v_sql || ' AND (ev.metadata ->> ''correlation_id'') = $13';
        END IF;
        IF jsonb_typeof(f.metadata -> 'causation_id') = 'string' THEN
            v_sql := v_sql || ' AND (ev.metadata ->> ''causation_id'') = $14';
        END IF;
    END IF;
    IF f.from_ts IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.ts >= $9';
    END IF;
    IF f.to_ts IS NOT NULL THEN
        v_sql := v_sql || ' AND ev.ts <= $10';
    END IF;
    v_sql := v_sql || CASE WHEN p_descending THEN ' ORDER BY ev.sequence DESC' ELSE ' ORDER BY ev.sequence' END
          || ' LIMIT $4) AS l'
          || CASE WHEN p_descending THEN ' ORDER BY (l.ev).sequence DESC, (l.ev)."partition" DESC'
                  ELSE ' ORDER BY (l.ev).sequence, (l.ev)."partition"' END
          || ' LIMIT $4) AS t';
    EXECUTE v_sql INTO v_events
      USING v_scope, v_pos, p_stream, p_max_count, f.type, f.key, f.payload, f.metadata,
            f.from_ts, f.to_ts, f.after_sequence, f.until_sequence,
            f.metadata ->> 'correlation_id', f.metadata ->> 'causation_id';
    v_events := coalesce(v_events, '{}');
    v_n := cardinality(v_events);

    -- Move each position over what this page examined. A short page
    -- examined everything visible in its bounds. A full page ending at
    -- (s, p) examined, ascending, every event up to (s, p) in the merge
    -- order; never past the high watermark, as later appends land there.
    -- Descending, every event from (s, p) down.
    IF v_n < p_max_count THEN
        IF p_descending THEN
            -- Below after_sequence + 1 nothing is left to match. least():
            -- after_sequence may be the largest bigint, and a position at
            -- it leaves nothing to match either.
            v_pos := array_fill(least(coalesce(f.after_sequence, 0), 9223372036854775806) + 1,
                                ARRAY[cardinality(v_scope)]);
        ELSE
            v_pos := ARRAY(SELECT greatest(x.pos, least(x.hwm, coalesce(f.until_sequence, x.hwm)))
                             FROM unnest(v_pos, v_hwm) WITH ORDINALITY AS x(pos, hwm, ord) ORDER BY x.ord);
        END IF;
    ELSE
        v_last := v_events[v_n];
        IF p_descending THEN
            v_pos := ARRAY(SELECT least(x.pos, CASE WHEN x.p >= v_last."partition" THEN v_last.sequence
                                                    ELSE v_last.sequence + 1 END)
                             FROM unnest(v_scope, v_pos) WITH ORDINALITY AS x(p, pos, ord) ORDER BY x.ord);
        ELSE
            v_pos := ARRAY(SELECT greatest(x.pos, least(x.hwm, CASE WHEN x.p <= v_last."partition" THEN v_last.sequence
                                                                    ELSE v_last.sequence - 1 END))
                             FROM unnest(v_scope, v_pos, v_hwm) WITH ORDINALITY AS x(p, pos, hwm, ord) ORDER BY x.ord);
        END IF;
    END IF;

    RETURN QUERY SELECT v_events, rheo._query_cursor_encode(v_fingerprint, v_pos);
END
$$;

-- The events of one page of a query, without its cursor (see
-- rheo.query_page).
CREATE OR REPLACE FUNCTION rheo.query(stream text, filter jsonb DEFAULT '{}', max_count int DEFAULT 100,
                                      after text DEFAULT NULL, descending boolean DEFAULT false)
RETURNS SETOF rheo.events
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT e.stream, e."partition", e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts
      FROM rheo.query_page($1, $2, $3, $4, $5) AS q
     CROSS JOIN LATERAL unnest(q.events) WITH ORDINALITY AS e
     ORDER BY e.ordinality
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.query_page(text, jsonb, int, text, boolean)', 'rheo_reader');
SELECT rheo._access('EXECUTE', 'FUNCTION rheo.query(text, jsonb, int, text, boolean)', 'rheo_reader');
-- Reads one partition of a stream in sequence order.
CREATE OR REPLACE FUNCTION rheo.read(stream text, after bigint DEFAULT 0, max_count int DEFAULT 100,
                                     "partition" int DEFAULT 0)
RETURNS SETOF rheo.events
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream    ALIAS FOR $1;
    p_after     ALIAS FOR $2;
    p_max_count ALIAS FOR $3;
    p_partition ALIAS FOR $4;
    v_count     int;
BEGIN
    v_count := rheo._stream(p_stream);
    IF p_after IS NULL OR p_max_count IS NULL OR p_partition IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'after, max_count and partition must not be NULL';
    END IF;
    IF p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', p_max_count);
    END IF;
    IF p_partition < 0 OR p_partition >= v_count THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = format('partition %s is outside 0..%s', p_partition, v_count - 1);
    END IF;
    RETURN QUERY
        SELECT e.* FROM rheo.events e
         WHERE e.stream = p_stream AND e."partition" = p_partition AND e.sequence > p_after
         ORDER BY e.sequence
         LIMIT p_max_count;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.read(text, bigint, int, int)', 'rheo_reader');
-- Dead-letters the event of a held lease now. A dead letter is terminal:
-- when later events of its key are blocked behind it ('key' ordering), it
-- leaves a wakeup of the key.
CREATE OR REPLACE FUNCTION rheo.reject(lease_id uuid, reason text DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_lease_id ALIAS FOR $1;
    p_reason   ALIAS FOR $2;
    p_clock    ALIAS FOR $3;
BEGIN
    IF p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_id must not be NULL';
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    WITH gone AS (
        DELETE FROM rheo.deliveries AS d
         WHERE d.lease_id = p_lease_id AND d.state = 'leased'
        RETURNING d.group_id, d."partition", d.sequence, d.attempt, d.key, d.has_waiters
    ), woken AS (
        INSERT INTO rheo.key_wakeups (group_id, "partition", key)
        SELECT g.group_id, g."partition", g.key FROM gone g WHERE g.has_waiters
    )
    INSERT INTO rheo.dead_letters (group_id, "partition", sequence, attempt, reason, dead_lettered_at)
    SELECT g.group_id, g."partition", g.sequence, g.attempt, coalesce(p_reason, 'rejected'), coalesce(p_clock, now())
      FROM gone g;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stale_lease' USING ERRCODE = 'RH004',
            DETAIL = format('lease %s is no longer held', p_lease_id);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.reject(uuid, text, timestamptz)', 'rheo_consumer');
-- Extends a held lease to clock + lease_ms and returns the new expiry.
CREATE OR REPLACE FUNCTION rheo.renew(lease_id uuid, lease_ms int DEFAULT 30000,
                                      clock timestamptz DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_lease_id ALIAS FOR $1;
    p_lease_ms ALIAS FOR $2;
    p_clock    ALIAS FOR $3;
    v_expires  timestamptz;
BEGIN
    IF p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_id must not be NULL';
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('lease_ms must be >= 1, got %s', coalesce(p_lease_ms::text, 'NULL'));
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    UPDATE rheo.deliveries AS d
       SET expires_at = coalesce(p_clock, now()) + make_interval(secs => p_lease_ms / 1000.0)
     WHERE d.lease_id = p_lease_id AND d.state = 'leased'
    RETURNING d.expires_at INTO v_expires;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stale_lease' USING ERRCODE = 'RH004',
            DETAIL = format('lease %s is no longer held', p_lease_id);
    END IF;
    RETURN v_expires;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.renew(uuid, int, timestamptz)', 'rheo_consumer');
-- Makes events claimable again for a group, without copying them. Exactly
-- one selector: from_sequence, event_ids or from_ts.
CREATE OR REPLACE FUNCTION rheo.replay(stream text, group_name text, from_sequence bigint DEFAULT NULL,
                                       event_ids text[] DEFAULT NULL, from_ts timestamptz DEFAULT NULL,
                                       partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream        ALIAS FOR $1;
    p_group_name    ALIAS FOR $2;
    p_from_sequence ALIAS FOR $3;
    p_event_ids     ALIAS FOR $4;
    p_from_ts       ALIAS FOR $5;
    p_partitions    ALIAS FOR $6;
    p_clock         ALIAS FOR $7;
    v_group         record;
    v_scope         int[];
    v_total         bigint := 0;
    v_p             int;
    v_first         bigint;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    IF num_nonnulls(p_from_sequence, p_event_ids, p_from_ts) <> 1 THEN
        RAISE EXCEPTION 'invalid_replay_opts' USING ERRCODE = 'RH009',
            DETAIL = 'give exactly one of from_sequence, event_ids and from_ts';
    END IF;
    -- At most the largest bigint less one, so that the cursor after it
    -- still fits.
    IF p_from_sequence < 0 OR p_from_sequence > 9223372036854775806 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('from_sequence must be between 0 and 9223372036854775806, got %s', p_from_sequence);
    END IF;
    PERFORM rheo._check_array('event_ids', p_event_ids);
    PERFORM rheo._check_time('clock', p_clock);
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);

    -- Lock the cursors in partition order: replay waits for fetches in
    -- progress, and they cannot claim what it is reopening.
    PERFORM 1 FROM rheo.cursors c
      WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
      ORDER BY c."partition"
        FOR UPDATE;

    IF p_event_ids IS NOT NULL THEN
        -- Terminal events only: below the cursor with no delivery in
        -- progress (acked), or dead-lettered. An event blocked behind its
        -- key has a delivery, so it is not among them. In 'key' mode the
        -- next fetch blocks a reopened event behind an earlier one of its
        -- key that is not terminal.
        WITH target AS (
            SELECT DISTINCT e."partition", e.sequence, e.ts, e.key
              FROM unnest(p_event_ids) AS u(id)
             CROSS JOIN LATERAL (SELECT ev."partition", ev.sequence, ev.ts, ev.key FROM rheo.events ev
                                  WHERE ev.id = u.id AND ev.stream = p_stream LIMIT 1) AS e
              JOIN rheo.cursors c ON c.group_id = v_group.group_id AND c."partition" = e."partition"
             WHERE e."partition" = ANY (v_scope)
               AND e.sequence < c.next_sequence
               AND NOT EXISTS (SELECT 1 FROM rheo.deliveries d
                                WHERE d.group_id = v_group.group_id AND d."partition" = e."partition"
                                  AND d.sequence = e.sequence)
        ), cleared AS (
            DELETE FROM rheo.dead_letters AS dl
             USING target t
             WHERE dl.group_id = v_group.group_id AND dl."partition" = t."partition" AND dl.sequence = t.sequence
        )
        -- attempt 0: the next lease is attempt 1.
        INSERT INTO rheo.deliveries (group_id, "partition", sequence, state, attempt, expires_at, ts, key)
        SELECT v_group.group_id, t."partition", t.sequence, 'pending', 0, coalesce(p_clock, now()), t.ts, t.key
          FROM target t;
        GET DIAGNOSTICS v_total = ROW_COUNT;
        RETURN v_total;
    END IF;

    FOREACH v_p IN ARRAY v_scope LOOP
        IF p_from_sequence IS NOT NULL THEN
            v_total := v_total + rheo._rewind(v_group.group_id, p_stream, v_p, p_from_sequence);
        ELSE
            v_first := rheo._first_at(p_stream, v_p, p_from_ts);
            IF v_first IS NOT NULL THEN
                v_total := v_total + rheo._rewind(v_group.group_id, p_stream, v_p, v_first - 1);
            END IF;
        END IF;
    END LOOP;
    RETURN v_total;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.replay(text, text, bigint, text[], timestamptz, int[], timestamptz)', 'rheo_admin');
-- Drops a group's leases, pending retries, blocked events and dead
-- letters in the listed partitions and places its cursors as
-- create_group would. The log is untouched.
CREATE OR REPLACE FUNCTION rheo.reset_group(stream text, group_name text, confirm boolean DEFAULT false,
                                            start_after bigint DEFAULT NULL, start_at timestamptz DEFAULT NULL,
                                            partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream      ALIAS FOR $1;
    p_group_name  ALIAS FOR $2;
    p_confirm     ALIAS FOR $3;
    p_start_after ALIAS FOR $4;
    p_start_at    ALIAS FOR $5;
    p_partitions  ALIAS FOR $6;
    p_clock       ALIAS FOR $7;
    v_group       record;
    v_scope       int[];
BEGIN
    IF p_confirm IS NOT TRUE THEN
        RAISE EXCEPTION 'confirm_required' USING ERRCODE = 'RH008',
            DETAIL = 'reset_group drops leases, retries and dead letters: call it with confirm => true';
    END IF;
    v_group := rheo._group(p_stream, p_group_name);
    PERFORM rheo._check_start(p_start_after, p_start_at);
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    PERFORM rheo._check_time('clock', p_clock);

    PERFORM 1 FROM rheo.cursors c
      WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
      ORDER BY c."partition"
        FOR UPDATE;
    -- Deliveries are locked in primary key order before they are
    -- deleted, as every multi-row settle does (docs/design.md, "Locks").
    PERFORM 1 FROM rheo.deliveries d
      WHERE d.group_id = v_group.group_id AND d."partition" = ANY (v_scope)
      ORDER BY d."partition", d.sequence
        FOR UPDATE;
    DELETE FROM rheo.deliveries AS d
     WHERE d.group_id = v_group.group_id AND d."partition" = ANY (v_scope);
    DELETE FROM rheo.dead_letters AS dl
     WHERE dl.group_id = v_group.group_id AND dl."partition" = ANY (v_scope);
    DELETE FROM rheo.key_wakeups AS w
     WHERE w.group_id = v_group.group_id AND w."partition" = ANY (v_scope);
    PERFORM rheo._place_cursors(v_group.group_id, p_stream, v_scope, p_start_after, p_start_at);
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.reset_group(text, text, boolean, bigint, timestamptz, int[], timestamptz)', 'rheo_admin');
-- Gives a held lease back: claimable again after delay_ms, or
-- dead-lettered when the attempt limit is reached. A retry keeps the
-- delivery, so later events of its key stay blocked ('key' ordering); a
-- dead letter leaves a wakeup of the key when some are.
CREATE OR REPLACE FUNCTION rheo.retry(lease_id uuid, reason text DEFAULT NULL, delay_ms int DEFAULT 0,
                                      clock timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_lease_id ALIAS FOR $1;
    p_reason   ALIAS FOR $2;
    p_delay_ms ALIAS FOR $3;
    p_clock    ALIAS FOR $4;
    v_now      timestamptz := coalesce(p_clock, now());
    v_row      record;
BEGIN
    IF p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_id must not be NULL';
    END IF;
    IF p_delay_ms IS NULL OR p_delay_ms < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('delay_ms must be >= 0, got %s', coalesce(p_delay_ms::text, 'NULL'));
    END IF;
    -- IS NOT NULL first: a helper call costs some 5 us, a quarter of an ack.
    IF p_clock IS NOT NULL THEN
        PERFORM rheo._check_time('clock', p_clock);
    END IF;
    SELECT d.group_id, d."partition", d.sequence, d.attempt, d.key, d.has_waiters, g.max_attempts INTO v_row
      FROM rheo.deliveries d
      JOIN rheo.groups g ON g.group_id = d.group_id
     WHERE d.lease_id = p_lease_id AND d.state = 'leased'
       FOR UPDATE OF d;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stale_lease' USING ERRCODE = 'RH004',
            DETAIL = format('lease %s is no longer held', p_lease_id);
    END IF;

    IF v_row.attempt >= v_row.max_attempts THEN
        DELETE FROM rheo.deliveries AS d
         WHERE d.group_id = v_row.group_id AND d."partition" = v_row."partition" AND d.sequence = v_row.sequence;
        INSERT INTO rheo.dead_letters (group_id, "partition", sequence, attempt, reason, dead_lettered_at)
        VALUES (v_row.group_id, v_row."partition", v_row.sequence, v_row.attempt,
                coalesce(p_reason, 'max_attempts'), v_now);
        IF v_row.has_waiters THEN
            INSERT INTO rheo.key_wakeups (group_id, "partition", key)
            VALUES (v_row.group_id, v_row."partition", v_row.key);
        END IF;
        RETURN 'dead_lettered';
    END IF;

    UPDATE rheo.deliveries AS d
       SET state = 'pending', lease_id = NULL, consumer_id = NULL, reason = p_reason,
           expires_at = v_now + make_interval(secs => p_delay_ms / 1000.0)
     WHERE d.group_id = v_row.group_id AND d."partition" = v_row."partition" AND d.sequence = v_row.sequence;
    RETURN 'retrying';
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.retry(uuid, text, int, timestamptz)', 'rheo_consumer');
-- Sets a group's ordering (SPEC §8): 'none', 'key' or 'partition'. It
-- takes effect from the group's next fetch; leases already handed out are
-- not taken back.
--
-- Leaving 'key', the events blocked behind their keys become pending and
-- due as of now() (the signature has no clock), attempt unchanged: that
-- is what the other modes would have made of them, and it keeps their
-- claim path free of blocked rows. Their wakeups go with them. Entering
-- 'key' copies the events' keys into the group's deliveries in progress
-- (the other orderings do not store them); the next fetch blocks what
-- must wait behind them.
--
-- Locks, in the order every function takes them (docs/design.md,
-- "Locks"): the group's cursors in partition order, so that fetches in
-- progress finish first and none sees half of the change, then the
-- deliveries it changes in primary key order.
CREATE OR REPLACE FUNCTION rheo.set_ordering(stream text, group_name text, ordering text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_ordering   ALIAS FOR $3;
    v_group      record;
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    PERFORM rheo._check_ordering(p_ordering);

    PERFORM 1 FROM rheo.cursors c
      WHERE c.group_id = v_group.group_id
      ORDER BY c."partition"
        FOR UPDATE;
    UPDATE rheo.groups AS g SET ordering = p_ordering WHERE g.group_id = v_group.group_id;
    IF p_ordering = 'key' AND v_group.ordering <> 'key' THEN
        -- Fetches under the other orderings do not copy the event's key
        -- into its delivery; the deliveries in progress get it now, so
        -- that the later events of their keys wait for them. Locked in
        -- primary key order first, as ack_batch locks them.
        PERFORM 1 FROM rheo.deliveries d
          WHERE d.group_id = v_group.group_id AND d.key IS NULL
          ORDER BY d."partition", d.sequence
            FOR UPDATE;
        UPDATE rheo.deliveries AS d SET key = e.key
          FROM rheo.events e
         WHERE d.group_id = v_group.group_id AND d.key IS NULL
           AND e.stream = p_stream AND e."partition" = d."partition" AND e.sequence = d.sequence
           AND e.key IS NOT NULL;
    END IF;
    IF p_ordering <> 'key' THEN
        PERFORM 1 FROM rheo.deliveries d
          WHERE d.group_id = v_group.group_id AND d.state = 'blocked'
          ORDER BY d."partition", d.sequence
            FOR UPDATE;
        UPDATE rheo.deliveries AS d
           SET state = 'pending', expires_at = now()
         WHERE d.group_id = v_group.group_id AND d.state = 'blocked';
        DELETE FROM rheo.key_wakeups AS w WHERE w.group_id = v_group.group_id;
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.set_ordering(text, text, text)', 'rheo_admin');
-- Sets how long a stream keeps its events: prune deletes those older
-- than max_age once every group has passed them. NULL keeps them forever.
CREATE OR REPLACE FUNCTION rheo.set_retention(stream text, max_age interval)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream  ALIAS FOR $1;
    p_max_age ALIAS FOR $2;
BEGIN
    PERFORM rheo._stream(p_stream);
    IF p_max_age <= interval '0' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_age must be positive, got %s', p_max_age);
    END IF;
    -- clock - max_age must stay a timestamp for every clock Rheo accepts.
    IF p_max_age > interval '10000 years' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_age must be at most 10000 years, got %s', p_max_age);
    END IF;
    UPDATE rheo.streams AS s SET max_age = p_max_age WHERE s.stream = p_stream;
    IF NOT FOUND THEN  -- dropped meanwhile
        RAISE EXCEPTION 'stream_not_found' USING ERRCODE = 'RH001',
            DETAIL = format('stream %L does not exist', p_stream);
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.set_retention(text, interval)', 'rheo_admin');
-- Each partition's retained range, and the stream's retention.
CREATE OR REPLACE FUNCTION rheo.stream_info(stream text)
RETURNS TABLE ("partition" int, low_watermark bigint, high_watermark bigint, max_age interval)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream ALIAS FOR $1;
BEGIN
    PERFORM rheo._stream(p_stream);
    RETURN QUERY
        SELECT pt."partition", pt.low_watermark, pt.high_watermark, s.max_age
          FROM rheo.partitions pt
          JOIN rheo.streams s ON s.stream = pt.stream
         WHERE pt.stream = p_stream
         ORDER BY pt."partition";
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo.stream_info(text)', 'rheo_reader');

$rheo_sql$;
    INSERT INTO rheo.function_set (id, sha256, installed_at) VALUES (true, '429d1629282dc61e9fd1901a718047784d52cae7b52d9871f379ab988107054d', now())
    ON CONFLICT (id) DO UPDATE SET sha256 = excluded.sha256, installed_at = excluded.installed_at;
    EXECUTE 'SET LOCAL ROLE ' || CASE v_role WHEN 'none' THEN 'NONE' ELSE quote_ident(v_role) END;
  END IF;
END

$rheo_do$;

DO $rheo_owner_release$
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members m
                JOIN pg_roles o ON o.oid = m.roleid AND o.rolname = 'rheo_owner'
                JOIN pg_roles r ON r.oid = m.member AND r.rolname = current_user
               WHERE m.grantor = r.oid AND NOT r.rolsuper) THEN
        REVOKE rheo_owner FROM CURRENT_USER;
    END IF;
END
$rheo_owner_release$;
