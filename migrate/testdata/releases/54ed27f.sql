-- Rheo PostgreSQL install: schema migrations 1 to 2, then the functions
-- (sha256 588ed8ccbcac0e11b834aae931ad5116ed5125d6f4e2095b5c12da7d54704d9e). Run it in one transaction; rerunning it changes nothing.

DO $$BEGIN PERFORM pg_advisory_xact_lock(8243950647153092466); END$$;

CREATE SCHEMA IF NOT EXISTS rheo;
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

-- Functions: _append.sql, _check_start.sql, _frontier.sql, _group.sql, _partitions.sql, _place_cursors.sql, _query_cursor.sql, _query_filter.sql, _rewind.sql, _stream.sql, _valid_name.sql, ack.sql, ack_batch.sql, append.sql, append_batch.sql, create_group.sql, create_stream.sql, dead_letters.sql, fetch.sql, group_info.sql, group_status.sql, immutability.sql, lag.sql, list_groups.sql, list_streams.sql, query.sql, read.sql, reject.sql, renew.sql, replay.sql, reset_group.sql, retry.sql
DO $rheo_do$
BEGIN
  IF NOT EXISTS (SELECT FROM rheo.function_set WHERE sha256 = '588ed8ccbcac0e11b834aae931ad5116ed5125d6f4e2095b5c12da7d54704d9e') THEN
    EXECUTE $rheo_sql$
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
    v_base      bigint;
    v_tries     int := 0;
    v_generated boolean;
BEGIN
    v_count := rheo._stream(p_stream);
    IF p_payloads IS NULL OR jsonb_typeof(p_payloads) <> 'array' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = 'payloads must be a JSON array of objects';
    END IF;
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
    IF p_partition < 0 OR p_partition >= v_count THEN
        RAISE EXCEPTION 'invalid_partition' USING ERRCODE = 'RH007',
            DETAIL = format('partition %s is outside 0..%s', p_partition, v_count - 1);
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
        -- Lock the allocators in partition order so that concurrent
        -- batches over several partitions cannot deadlock.
        v_bases := '{}';
        FOR i IN 1 .. cardinality(v_new_parts) LOOP
            UPDATE rheo.partitions AS pt
               SET high_watermark = pt.high_watermark + v_counts[i]
             WHERE pt.stream = p_stream AND pt."partition" = v_new_parts[i]
            RETURNING pt.high_watermark - v_counts[i] INTO v_base;
            v_bases := v_bases || v_base;
        END LOOP;

        PERFORM set_config('rheo.appending', 'on', true);
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
        PERFORM set_config('rheo.appending', 'off', true);
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
                    -- Lock the allocators in partition order (see above).
                    v_bases := '{}';
                    FOR i IN 1 .. cardinality(v_new_parts) LOOP
                        UPDATE rheo.partitions AS pt
                           SET high_watermark = pt.high_watermark + v_counts[i]
                         WHERE pt.stream = p_stream AND pt."partition" = v_new_parts[i]
                        RETURNING pt.high_watermark - v_counts[i] INTO v_base;
                        v_bases := v_bases || v_base;
                    END LOOP;
                    PERFORM set_config('rheo.appending', 'on', true);
                    INSERT INTO rheo.events (stream, "partition", sequence, id, key, payload, metadata, ts)
                    SELECT p_stream, u.part,
                           b.base + row_number() OVER (PARTITION BY u.part ORDER BY u.ord),
                           u.id, u.key, u.payload, p_metadata, v_ts
                      FROM unnest(v_ids, v_keys, v_parts, v_payloads, v_is_new)
                           WITH ORDINALITY AS u(id, key, part, payload, is_new, ord)
                      JOIN unnest(v_new_parts, v_bases) AS b(part, base) ON b.part = u.part
                     WHERE u.is_new;
                    PERFORM set_config('rheo.appending', 'off', true);
                END IF;
                EXIT;
            EXCEPTION WHEN unique_violation THEN
                -- A concurrent append stored one of these ids first and has
                -- committed: look again, now seeing it as a repeat.
                v_tries := v_tries + 1;
                IF v_tries >= 3 THEN
                    RAISE;
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
    IF $1 < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('start_after must be >= 0, got %s', $1);
    END IF;
END
$$;
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
-- Looks a group up, stream first: stream_not_found, then group_not_found.
CREATE OR REPLACE FUNCTION rheo._group(stream text, group_name text,
                                       OUT group_id int, OUT max_attempts int,
                                       OUT partition_count int)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
BEGIN
    partition_count := rheo._stream(p_stream);
    SELECT g.group_id, g.max_attempts INTO group_id, max_attempts
      FROM rheo.groups g
     WHERE g.stream = p_stream AND g.group_name = p_group_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'group_not_found' USING ERRCODE = 'RH002',
            DETAIL = format('group %L does not exist on stream %L', p_group_name, p_stream);
    END IF;
END
$$;
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
-- Places a group's cursors in the given partitions: after start_after, at
-- the first event with ts >= start_at (or past the high watermark when
-- there is none), or at the beginning.
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
       SET next_sequence = CASE
               WHEN p_start_after IS NOT NULL THEN p_start_after + 1
               WHEN p_start_at IS NOT NULL THEN coalesce(
                   (SELECT min(e.sequence) FROM rheo.events e
                     WHERE e.stream = p_stream AND e."partition" = c."partition" AND e.ts >= p_start_at),
                   (SELECT pt.high_watermark + 1 FROM rheo.partitions pt
                     WHERE pt.stream = p_stream AND pt."partition" = c."partition"))
               ELSE 1
           END
     WHERE c.group_id = p_group_id AND c."partition" = ANY (p_partitions);
END
$$;
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
    WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_time_zone_displacement_value THEN
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
-- Rewinds a group in one partition so every event after sequence n is
-- claimable again from attempt 1: its leases become stale and its dead
-- letters are cleared. It never moves the cursor forward. Returns how
-- many already-offered events became claimable again. The caller holds
-- the cursor row's lock.
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
BEGIN
    SELECT c.next_sequence, pt.high_watermark INTO v_next, v_high
      FROM rheo.cursors c
      JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
     WHERE c.group_id = p_group_id AND c."partition" = p_partition;
    IF v_next <= p_n + 1 THEN
        RETURN 0;
    END IF;
    DELETE FROM rheo.deliveries AS d
     WHERE d.group_id = p_group_id AND d."partition" = p_partition AND d.sequence > p_n;
    DELETE FROM rheo.dead_letters AS dl
     WHERE dl.group_id = p_group_id AND dl."partition" = p_partition AND dl.sequence > p_n;
    UPDATE rheo.cursors AS c
       SET next_sequence = p_n + 1
     WHERE c.group_id = p_group_id AND c."partition" = p_partition;
    -- Offered: below the cursor and existing (a cursor placed past the
    -- high watermark has offered nothing beyond it).
    RETURN greatest(0, least(v_next - 1, v_high) - p_n);
END
$$;
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
-- Whether a stream or group name is well formed (SPEC §1).
CREATE OR REPLACE FUNCTION rheo._valid_name(name text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce($1 ~ '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$', false)
$$;
-- Settles a held lease as done. The delivery row is deleted: the frontier
-- is derived from what remains, so an ack writes nothing else.
CREATE OR REPLACE FUNCTION rheo.ack(lease_id uuid, clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
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
BEGIN
    IF p_lease_id IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_id must not be NULL';
    END IF;
    DELETE FROM rheo.deliveries AS d WHERE d.lease_id = p_lease_id AND d.state = 'leased';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stale_lease' USING ERRCODE = 'RH004',
            DETAIL = format('lease %s is no longer held', p_lease_id);
    END IF;
END
$$;
-- Acks each lease independently: stale ones (and repeats within the
-- array) report ok = false instead of failing the call.
CREATE OR REPLACE FUNCTION rheo.ack_batch(lease_ids uuid[], clock timestamptz DEFAULT NULL)
RETURNS TABLE (lease_id uuid, ok boolean)
LANGUAGE plpgsql
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
BEGIN
    IF p_lease_ids IS NULL THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011', DETAIL = 'lease_ids must not be NULL';
    END IF;
    RETURN QUERY
    WITH settled AS (
        DELETE FROM rheo.deliveries AS d
         WHERE d.lease_id = ANY (p_lease_ids) AND d.state = 'leased'
        RETURNING d.lease_id
    )
    SELECT u.id,
           s.lease_id IS NOT NULL AND row_number() OVER (PARTITION BY u.id ORDER BY u.ord) = 1
      FROM unnest(p_lease_ids) WITH ORDINALITY AS u(id, ord)
      LEFT JOIN settled s ON s.lease_id = u.id
     ORDER BY u.ord;
END
$$;
-- Appends one event to a stream (see rheo._append for the rules).
CREATE OR REPLACE FUNCTION rheo.append(stream text, payload jsonb, key text DEFAULT NULL,
                                       "partition" int DEFAULT NULL, id text DEFAULT NULL,
                                       metadata jsonb DEFAULT '{}', ts timestamptz DEFAULT NULL,
                                       clock timestamptz DEFAULT NULL)
RETURNS rheo.events
LANGUAGE plpgsql
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
-- Appends a batch atomically, returning the events in input order.
CREATE OR REPLACE FUNCTION rheo.append_batch(stream text, payloads jsonb, keys text[] DEFAULT NULL,
                                             ids text[] DEFAULT NULL, "partition" int DEFAULT NULL,
                                             metadata jsonb DEFAULT '{}', clock timestamptz DEFAULT NULL)
RETURNS SETOF rheo.events
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT * FROM rheo._append($1, $2, $3, $4, $5, $6, NULL, $7);
END
$$;
-- Creates a consumer group with a cursor per partition.
CREATE OR REPLACE FUNCTION rheo.create_group(stream text, group_name text, max_attempts int DEFAULT 5,
                                             start_after bigint DEFAULT NULL, start_at timestamptz DEFAULT NULL,
                                             partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
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
    v_count        int;
    v_scope        int[];
    v_group_id     int;
BEGIN
    v_count := rheo._stream(p_stream);
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

    INSERT INTO rheo.groups (stream, group_name, max_attempts, created_at)
    VALUES (p_stream, p_group_name, p_max_attempts, coalesce(p_clock, now()))
    ON CONFLICT ON CONSTRAINT groups_stream_group_name_key DO NOTHING
    RETURNING groups.group_id INTO v_group_id;
    IF v_group_id IS NULL THEN  -- a concurrent create won the race
        RAISE EXCEPTION 'already_exists' USING ERRCODE = 'RH003',
            DETAIL = format('group %L already exists on stream %L', p_group_name, p_stream);
    END IF;
    INSERT INTO rheo.cursors (group_id, "partition", next_sequence)
    SELECT v_group_id, x, 1 FROM generate_series(0, v_count - 1) x;
    IF p_start_after IS NOT NULL OR p_start_at IS NOT NULL THEN
        PERFORM rheo._place_cursors(v_group_id, p_stream, v_scope, p_start_after, p_start_at);
    END IF;
END
$$;
-- Creates a stream and its partitions' sequence allocators.
CREATE OR REPLACE FUNCTION rheo.create_stream(stream text, partition_count int DEFAULT 1,
                                              clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
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
    IF p_count < 1 THEN
        RAISE EXCEPTION 'invalid_partition_count' USING ERRCODE = 'RH006',
            DETAIL = format('partition_count must be >= 1, got %s', p_count);
    END IF;

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
-- A page of a group's dead letters in (partition, sequence) order; after
-- is the event id of the previous page's last dead letter.
CREATE OR REPLACE FUNCTION rheo.dead_letters(stream text, group_name text, max_count int DEFAULT 100,
                                             after text DEFAULT NULL)
RETURNS TABLE (event_id text, "partition" int, sequence bigint, attempt int, reason text,
               dead_lettered_at timestamptz, type text, key text, payload jsonb,
               metadata jsonb, ts timestamptz)
LANGUAGE plpgsql STABLE
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
-- Claims up to max_count events of a group for one consumer.
--
-- Claimable in a partition: deliveries whose retry delay has passed or
-- whose lease expired (below the attempt limit), then events past the
-- cursor. The cost is O(leases returned + deliveries in progress), never
-- O(history): new events come from an index range scan from the cursor.
--
-- Concurrent fetchers of one group lock the cursor rows of the partitions
-- they claim from with SKIP LOCKED, so they spread over partitions instead
-- of queueing; only a fetcher that could lock no partition with work waits
-- for one. The locks last until the calling transaction ends.
CREATE OR REPLACE FUNCTION rheo.fetch(stream text, group_name text, max_count int DEFAULT 10,
                                      consumer_id text DEFAULT NULL, lease_ms int DEFAULT 30000,
                                      partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS SETOF rheo.lease
LANGUAGE plpgsql
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
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    IF p_max_count IS NULL OR p_max_count < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('max_count must be >= 0, got %s', coalesce(p_max_count::text, 'NULL'));
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms < 1 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('lease_ms must be >= 1, got %s', coalesce(p_lease_ms::text, 'NULL'));
    END IF;
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);
    IF cardinality(v_scope) = 0 THEN
        RETURN;
    END IF;

    v_now := coalesce(p_clock, now());
    v_expires := v_now + make_interval(secs => p_lease_ms / 1000.0);
    v_consumer := coalesce(p_consumer_id, 'consumer-' || gen_random_uuid());

    -- A lease that expired at the attempt limit is dead-lettered rather
    -- than leased again, so a handler that always crashes cannot loop.
    -- Delivery rows are taken with SKIP LOCKED here and below: a row
    -- locked by a settle in progress is that settle's to finish, and a
    -- fetch that never waits for delivery rows cannot deadlock with
    -- settles that lock them in another order. The rows found are then
    -- deleted by their physical address (ctid), so that the leases in
    -- progress are scanned once, not once per lease by a join.
    WITH due AS MATERIALIZED (
        SELECT x.ctid AS tid FROM rheo.deliveries x
         WHERE x.group_id = v_group.group_id AND x."partition" = ANY (v_scope)
           AND x.state = 'leased' AND x.expires_at <= v_now
           AND x.attempt >= v_group.max_attempts
           FOR UPDATE SKIP LOCKED
    ), expired AS (
        DELETE FROM rheo.deliveries AS d
         WHERE d.ctid = ANY (ARRAY(SELECT due.tid FROM due))
        RETURNING d."partition", d.sequence, d.attempt
    )
    INSERT INTO rheo.dead_letters (group_id, "partition", sequence, attempt, reason, dead_lettered_at)
    SELECT v_group.group_id, x."partition", x.sequence, x.attempt, 'lease_expired', v_now
      FROM expired x;
    IF p_max_count = 0 THEN
        RETURN;
    END IF;

    -- Lock the cursor rows of the partitions with work, and read what
    -- each can give: events past the cursor, and deliveries due again
    -- (retry delay passed, or lease expired below the attempt limit),
    -- each capped at max_count. A row changed by a fetch that committed
    -- meanwhile is read again after it is locked.
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
                             LIMIT p_max_count) AS r) AS reclaim
              FROM rheo.cursors c
              JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
             WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
               AND (c.next_sequence <= pt.high_watermark
                    OR EXISTS (SELECT 1 FROM rheo.deliveries d
                                WHERE d.group_id = c.group_id AND d."partition" = c."partition"
                                  AND d.expires_at <= v_now
                                  AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)))
             ORDER BY c."partition"
               FOR UPDATE OF c SKIP LOCKED) AS l;
    IF v_locked IS NULL THEN
        -- Every partition with work, if any, is being claimed by another
        -- fetcher: wait for one rather than report nothing. Holding no
        -- other cursor lock while waiting keeps this free of deadlocks.
        SELECT array_agg(c."partition" ORDER BY c."partition") INTO v_candidates
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
           AND (c.next_sequence <= pt.high_watermark
                OR EXISTS (SELECT 1 FROM rheo.deliveries d
                            WHERE d.group_id = c.group_id AND d."partition" = c."partition"
                              AND d.expires_at <= v_now
                              AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)));
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
                               LIMIT p_max_count) AS r)]
          INTO v_locked, v_next, v_fresh, v_reclaim
          FROM rheo.cursors c
          JOIN rheo.partitions pt ON pt.stream = p_stream AND pt."partition" = c."partition"
         WHERE c.group_id = v_group.group_id AND c."partition" = v_p
           FOR UPDATE OF c;
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
    RETURN QUERY
    WITH plan AS (
        SELECT x.part, x.next_sequence, least(x.quota, x.reclaim) AS reclaim,
               x.quota - least(x.quota, x.reclaim) AS fresh
          FROM unnest(v_locked, v_next, v_quota, v_reclaim) AS x(part, next_sequence, quota, reclaim)
         WHERE x.quota > 0
    ), picked AS MATERIALIZED (
        SELECT d.tid
          FROM plan p
         CROSS JOIN LATERAL (SELECT d.ctid AS tid FROM rheo.deliveries d
                              WHERE d.group_id = v_group.group_id AND d."partition" = p.part
                                AND d.expires_at <= v_now
                                AND (d.state = 'pending' OR d.attempt < v_group.max_attempts)
                              ORDER BY d.sequence
                              LIMIT p.reclaim
                                FOR UPDATE SKIP LOCKED) AS d
         WHERE p.reclaim > 0
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
        INSERT INTO rheo.deliveries
               (group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at)
        SELECT v_group.group_id, f.part, f.sequence, 'leased', f.lease_id, v_consumer, 1, v_now, v_expires
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
-- A summary of a group's state at clock.
CREATE OR REPLACE FUNCTION rheo.group_info(stream text, group_name text, clock timestamptz DEFAULT NULL)
RETURNS TABLE (lag bigint, inflight bigint, pending_retry bigint, dead_letters bigint,
               oldest_unsettled_ts timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream     ALIAS FOR $1;
    p_group_name ALIAS FOR $2;
    p_clock      ALIAS FOR $3;
    v_group      record;
    v_now        timestamptz := coalesce(p_clock, now());
BEGIN
    v_group := rheo._group(p_stream, p_group_name);
    RETURN QUERY
    SELECT (SELECT coalesce(sum(l.lag), 0)::bigint FROM rheo.lag(p_stream, p_group_name) l),
           (SELECT count(*) FROM rheo.deliveries d
             WHERE d.group_id = v_group.group_id AND d.state = 'leased' AND d.expires_at > v_now),
           (SELECT count(*) FROM rheo.deliveries d
             WHERE d.group_id = v_group.group_id AND NOT (d.state = 'leased' AND d.expires_at > v_now)),
           (SELECT count(*) FROM rheo.dead_letters dl WHERE dl.group_id = v_group.group_id),
           -- Non-terminal: deliveries in progress and events not offered
           -- yet. The second part reads the unoffered backlog's ts.
           least((SELECT min(e.ts) FROM rheo.deliveries d
                   CROSS JOIN LATERAL (SELECT ev.ts FROM rheo.events ev
                                        WHERE ev.stream = p_stream AND ev."partition" = d."partition"
                                          AND ev.sequence = d.sequence LIMIT 1) AS e
                   WHERE d.group_id = v_group.group_id),
                 (SELECT min(e.ts) FROM rheo.cursors c
                    JOIN rheo.events e ON e.stream = p_stream AND e."partition" = c."partition"
                                      AND e.sequence >= c.next_sequence
                   WHERE c.group_id = v_group.group_id));
END
$$;
-- Per group and partition progress, for psql dashboards (as of now()).
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
 CROSS JOIN LATERAL (SELECT rheo._frontier(g.group_id, c."partition", c.next_sequence) AS frontier) AS f;
-- Events are immutable: UPDATE, DELETE and TRUNCATE always fail, and
-- INSERT succeeds only inside rheo.append / rheo.append_batch, which set
-- the transaction-local flag rheo.appending around their insert.
CREATE OR REPLACE FUNCTION rheo._events_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' AND current_setting('rheo.appending', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'immutable_event' USING ERRCODE = 'RH012',
        DETAIL = format('%s on rheo.events is not allowed: events are immutable and added only by rheo.append and rheo.append_batch', TG_OP);
END
$$;

CREATE OR REPLACE TRIGGER events_immutable
    BEFORE INSERT OR UPDATE OR DELETE ON rheo.events
    FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard();

CREATE OR REPLACE TRIGGER events_no_truncate
    BEFORE TRUNCATE ON rheo.events
    FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard();
-- Frontier, high watermark and lag per partition, ordered by partition.
-- Each row is two index lookups, whatever the history's size.
CREATE OR REPLACE FUNCTION rheo.lag(stream text, group_name text, partitions int[] DEFAULT NULL)
RETURNS TABLE ("partition" int, frontier bigint, high_watermark bigint, lag bigint)
LANGUAGE plpgsql STABLE
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
-- A stream's groups, ordered by name.
CREATE OR REPLACE FUNCTION rheo.list_groups(stream text)
RETURNS TABLE (group_name text, max_attempts int, created_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream ALIAS FOR $1;
BEGIN
    PERFORM rheo._stream(p_stream);
    RETURN QUERY
        SELECT g.group_name, g.max_attempts, g.created_at
          FROM rheo.groups g
         WHERE g.stream = p_stream
         ORDER BY g.group_name;
END
$$;
-- Every stream, ordered by name.
CREATE OR REPLACE FUNCTION rheo.list_streams()
RETURNS TABLE (stream text, partition_count int, created_at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.stream, s.partition_count, s.created_at FROM rheo.streams s ORDER BY s.stream
$$;
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
            v_pos := array_fill(coalesce(f.after_sequence, 0) + 1, ARRAY[cardinality(v_scope)]);
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
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT e.stream, e."partition", e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts
      FROM rheo.query_page($1, $2, $3, $4, $5) AS q
     CROSS JOIN LATERAL unnest(q.events) WITH ORDINALITY AS e
     ORDER BY e.ordinality
$$;
-- Reads one partition of a stream in sequence order.
CREATE OR REPLACE FUNCTION rheo.read(stream text, after bigint DEFAULT 0, max_count int DEFAULT 100,
                                     "partition" int DEFAULT 0)
RETURNS SETOF rheo.events
LANGUAGE plpgsql STABLE
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
-- Dead-letters the event of a held lease now.
CREATE OR REPLACE FUNCTION rheo.reject(lease_id uuid, reason text DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
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
    WITH gone AS (
        DELETE FROM rheo.deliveries AS d
         WHERE d.lease_id = p_lease_id AND d.state = 'leased'
        RETURNING d.group_id, d."partition", d.sequence, d.attempt
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
-- Extends a held lease to clock + lease_ms and returns the new expiry.
CREATE OR REPLACE FUNCTION rheo.renew(lease_id uuid, lease_ms int DEFAULT 30000,
                                      clock timestamptz DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql
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
-- Makes events claimable again for a group, without copying them. Exactly
-- one selector: from_sequence, event_ids or from_ts.
CREATE OR REPLACE FUNCTION rheo.replay(stream text, group_name text, from_sequence bigint DEFAULT NULL,
                                       event_ids text[] DEFAULT NULL, from_ts timestamptz DEFAULT NULL,
                                       partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
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
    IF p_from_sequence < 0 THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('from_sequence must be >= 0, got %s', p_from_sequence);
    END IF;
    v_scope := rheo._partitions(p_partitions, v_group.partition_count);

    -- Lock the cursors in partition order: replay waits for fetches in
    -- progress, and they cannot claim what it is reopening.
    PERFORM 1 FROM rheo.cursors c
      WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
      ORDER BY c."partition"
        FOR UPDATE;

    IF p_event_ids IS NOT NULL THEN
        -- Terminal events only: below the cursor with no delivery in
        -- progress (acked), or dead-lettered.
        WITH target AS (
            SELECT DISTINCT e."partition", e.sequence
              FROM unnest(p_event_ids) AS u(id)
             CROSS JOIN LATERAL (SELECT ev."partition", ev.sequence FROM rheo.events ev
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
        INSERT INTO rheo.deliveries (group_id, "partition", sequence, state, attempt, expires_at)
        SELECT v_group.group_id, t."partition", t.sequence, 'pending', 0, coalesce(p_clock, now())
          FROM target t;
        GET DIAGNOSTICS v_total = ROW_COUNT;
        RETURN v_total;
    END IF;

    FOREACH v_p IN ARRAY v_scope LOOP
        IF p_from_sequence IS NOT NULL THEN
            v_total := v_total + rheo._rewind(v_group.group_id, p_stream, v_p, p_from_sequence);
        ELSE
            SELECT min(e.sequence) INTO v_first
              FROM rheo.events e
             WHERE e.stream = p_stream AND e."partition" = v_p AND e.ts >= p_from_ts;
            IF v_first IS NOT NULL THEN
                v_total := v_total + rheo._rewind(v_group.group_id, p_stream, v_p, v_first - 1);
            END IF;
        END IF;
    END LOOP;
    RETURN v_total;
END
$$;
-- Drops a group's leases, pending retries and dead letters in the listed
-- partitions and places its cursors as create_group would. The log is
-- untouched.
CREATE OR REPLACE FUNCTION rheo.reset_group(stream text, group_name text, confirm boolean DEFAULT false,
                                            start_after bigint DEFAULT NULL, start_at timestamptz DEFAULT NULL,
                                            partitions int[] DEFAULT NULL, clock timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p_stream      ALIAS FOR $1;
    p_group_name  ALIAS FOR $2;
    p_confirm     ALIAS FOR $3;
    p_start_after ALIAS FOR $4;
    p_start_at    ALIAS FOR $5;
    p_partitions  ALIAS FOR $6;
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

    PERFORM 1 FROM rheo.cursors c
      WHERE c.group_id = v_group.group_id AND c."partition" = ANY (v_scope)
      ORDER BY c."partition"
        FOR UPDATE;
    DELETE FROM rheo.deliveries AS d
     WHERE d.group_id = v_group.group_id AND d."partition" = ANY (v_scope);
    DELETE FROM rheo.dead_letters AS dl
     WHERE dl.group_id = v_group.group_id AND dl."partition" = ANY (v_scope);
    PERFORM rheo._place_cursors(v_group.group_id, p_stream, v_scope, p_start_after, p_start_at);
END
$$;
-- Gives a held lease back: claimable again after delay_ms, or
-- dead-lettered when the attempt limit is reached.
CREATE OR REPLACE FUNCTION rheo.retry(lease_id uuid, reason text DEFAULT NULL, delay_ms int DEFAULT 0,
                                      clock timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
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
    SELECT d.group_id, d."partition", d.sequence, d.attempt, g.max_attempts INTO v_row
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
        RETURN 'dead_lettered';
    END IF;

    UPDATE rheo.deliveries AS d
       SET state = 'pending', lease_id = NULL, consumer_id = NULL, reason = p_reason,
           expires_at = v_now + make_interval(secs => p_delay_ms / 1000.0)
     WHERE d.group_id = v_row.group_id AND d."partition" = v_row."partition" AND d.sequence = v_row.sequence;
    RETURN 'retrying';
END
$$;

$rheo_sql$;
    INSERT INTO rheo.function_set (id, sha256, installed_at) VALUES (true, '588ed8ccbcac0e11b834aae931ad5116ed5125d6f4e2095b5c12da7d54704d9e', now())
    ON CONFLICT (id) DO UPDATE SET sha256 = excluded.sha256, installed_at = excluded.installed_at;
  END IF;
END

$rheo_do$;
