-- Rheo on a Citus cluster (docs/citus.md): run by rheo-migrate after the
-- schema migrations and the functions, in a database with the citus
-- extension; it changes nothing where Rheo is distributed already, and
-- nothing at all without citus.
--
-- Every table that holds one stream's rows is hash-distributed by the
-- stream and co-located with rheo.events, so that one stream's rows, and
-- every join and lock of one call, live on one node. The small global
-- tables (the stream catalog, the install's bookkeeping) are reference
-- tables, copied to every node. The functions exist on every node.
DO $rheo_citus$
DECLARE
    v_table text;
    v_fn    regprocedure;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus') THEN
        RETURN;
    END IF;
    -- The immutability guard of rheo.events is a trigger: Citus runs
    -- triggers of distributed tables on their shards once allowed to.
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    -- Tables with foreign keys to reference tables are made over one
    -- connection per node.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);

    IF NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = 'rheo.events'::regclass) THEN
        -- An install made before citus was created (docs/citus.md,
        -- "Converting an install") has its schema on the coordinator
        -- only. Citus copies it to the workers with the tables, under
        -- the role running this, and then grants on the functions as
        -- their owner, who may not use that copy: make the copy the
        -- owner's first.
        -- (Rheo's roles are on every node already: migrate's
        -- createRolesSQL.)
        PERFORM run_command_on_workers(format('SET citus.enable_ddl_propagation = off; '
                                              'CREATE SCHEMA IF NOT EXISTS rheo; ALTER SCHEMA rheo OWNER TO %I',
                                              (SELECT pg_get_userbyid(n.nspowner) FROM pg_namespace n
                                                WHERE n.nspname = 'rheo')));
        -- Unique keys and foreign keys of distributed tables include the
        -- distribution column. The stream comes last, so that the lookups
        -- by group, partition and sequence use the keys as they did.
        ALTER TABLE rheo.cursors DROP CONSTRAINT IF EXISTS cursors_group_id_fkey;
        ALTER TABLE rheo.partitions DROP CONSTRAINT IF EXISTS partitions_stream_fkey;
        ALTER TABLE rheo.groups DROP CONSTRAINT IF EXISTS groups_stream_fkey;
        ALTER TABLE rheo.groups DROP CONSTRAINT groups_pkey,
            ADD CONSTRAINT groups_pkey PRIMARY KEY (group_id, stream);
        ALTER TABLE rheo.cursors DROP CONSTRAINT cursors_pkey,
            ADD CONSTRAINT cursors_pkey PRIMARY KEY (group_id, "partition", stream);
        ALTER TABLE rheo.deliveries DROP CONSTRAINT deliveries_pkey,
            ADD CONSTRAINT deliveries_pkey PRIMARY KEY (group_id, "partition", sequence, stream);
        ALTER TABLE rheo.dead_letters DROP CONSTRAINT dead_letters_pkey,
            ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (group_id, "partition", sequence, stream);
        DROP INDEX rheo.deliveries_lease_id_key;
        CREATE UNIQUE INDEX deliveries_lease_id_key ON rheo.deliveries (lease_id, stream);

        FOREACH v_table IN ARRAY ARRAY['streams', 'schema_version', 'role_prefix', 'function_set'] LOOP
            PERFORM create_reference_table(format('rheo.%I', v_table));
        END LOOP;
        -- Citus moves the events of a converted install into the shards
        -- with plain writes, which the immutability guard refuses: it
        -- is off until they are there, inside this transaction only.
        ALTER TABLE rheo.events DISABLE TRIGGER events_immutable;
        PERFORM create_distributed_table('rheo.events', 'stream');
        ALTER TABLE rheo.events ENABLE TRIGGER events_immutable;
        FOREACH v_table IN ARRAY ARRAY['partitions', 'time_marks', 'groups', 'cursors', 'deliveries', 'dead_letters',
                                       'key_wakeups'] LOOP
            PERFORM create_distributed_table(format('rheo.%I', v_table), 'stream', colocate_with => 'rheo.events');
        END LOOP;

        -- No foreign key to the stream catalog: Citus would serialize
        -- every write of a table referencing a reference table (each
        -- append's partition row, each group) on a lock of the catalog's
        -- shard taken on several nodes, which costs a round trip and
        -- deadlocks calls that lock a stream's catalog row (create_group,
        -- prune, drop_stream) across nodes. The functions keep the rows
        -- together: create_stream writes both, drop_stream deletes both.
        ALTER TABLE rheo.cursors ADD CONSTRAINT cursors_group_id_fkey
            FOREIGN KEY (group_id, stream) REFERENCES rheo.groups (group_id, stream);
    END IF;

    ALTER TABLE rheo.partitions DROP CONSTRAINT IF EXISTS partitions_stream_fkey;
    ALTER TABLE rheo.groups DROP CONSTRAINT IF EXISTS groups_stream_fkey;
    -- The row the stream-wide operations lock (migration 9), on the
    -- stream's node: a row of the reference catalog would be locked on
    -- several.
    IF NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = 'rheo.stream_locks'::regclass) THEN
        PERFORM create_distributed_table('rheo.stream_locks', 'stream', colocate_with => 'rheo.events');
    END IF;

    -- Every function exists on every node, where the calls' statements
    -- and the helpers they call run. A public function whose first
    -- argument is the stream is distributed by it, co-located with the
    -- events: Citus runs a call of it made outside an explicit
    -- transaction whole on the node that holds the stream.
    FOR v_fn IN
        SELECT p.oid::regprocedure
          FROM pg_proc p
         WHERE p.pronamespace = 'rheo'::regnamespace
           AND NOT EXISTS (SELECT FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid
                             AND (o.distribution_argument_index IS NOT NULL
                                  OR p.proname LIKE '\_%' OR p.pronargs = 0
                                  OR p.proargnames[1] IS DISTINCT FROM 'stream'))
         ORDER BY 1
    LOOP
        IF (SELECT p.proname NOT LIKE '\_%' AND p.proargnames[1] = 'stream' AND p.proargtypes[0] = 'text'::regtype
              FROM pg_proc p WHERE p.oid = v_fn) THEN
            PERFORM create_distributed_function(v_fn, 'stream', colocate_with => 'rheo.events');
        ELSE
            PERFORM create_distributed_function(v_fn);
        END IF;
    END LOOP;
END
$rheo_citus$;

-- The claims and the settles (docs/decisions.md, "Settles on Citus").
-- rheo._distributed() turns true, which chooses the statements Citus can
-- route in rheo.fetch (rheo._fetch_citus) and the settles; the settles find a lease's stream
-- among those with the hash its lease id begins with, by an index of the
-- stream catalog. Their statements are planned for each call's values:
-- Citus routes a generic plan only for the simplest statements. Again
-- after every install of the functions, which resets them.
DO $rheo_citus_claims$
DECLARE
    v_fn regprocedure;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus') THEN
        RETURN;
    END IF;
    IF NOT rheo._distributed() THEN
        CREATE OR REPLACE FUNCTION rheo._distributed()
        RETURNS boolean
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS $fn$
            SELECT true
        $fn$;
    END IF;
    -- The statements of the claims and settles on a stream's shards,
    -- on the node that holds them (docs/citus.md, "Statements on the
    -- shards"): planned by PostgreSQL alone, where Citus would plan a
    -- statement on the distributed table, write it out for the shard
    -- and have PostgreSQL parse and plan that again, at every call.
    -- The ShareLock on the shard's metadata is the one Citus's executor
    -- takes for a statement on it: a shard move or split, which takes
    -- ExclusiveLock on every co-located shard, waits for the call's
    -- transaction, and the call for a move under way, after which the
    -- placement is read. Elsewhere (the coordinator, in a caller's
    -- transaction) the tables themselves, which Citus routes.
    CREATE OR REPLACE FUNCTION rheo._shard_tables(stream text, tables text[])
    RETURNS text[]
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $fn$
    DECLARE
        v_shard bigint := get_shard_id_for_distribution_column('rheo.events', stream);
    BEGIN
        PERFORM lock_shard_metadata(5, ARRAY[v_shard]);
        IF NOT EXISTS (SELECT FROM pg_dist_placement p
                        WHERE p.shardid = v_shard AND p.shardstate = 1
                          AND p.groupid = (SELECT g.groupid FROM pg_dist_local_group g)) THEN
            RETURN (SELECT array_agg(format('rheo.%I', x.t) ORDER BY x.o) FROM unnest(tables) WITH ORDINALITY AS x(t, o));
        END IF;
        RETURN (SELECT array_agg(format('rheo.%I',
                                        x.t || '_' || get_shard_id_for_distribution_column(format('rheo.%I', x.t)::regclass, stream))
                                 ORDER BY x.o)
                  FROM unnest(tables) WITH ORDINALITY AS x(t, o));
    END
    $fn$;
    CREATE INDEX IF NOT EXISTS streams_hash_idx ON rheo.streams (hashtext(stream));
    -- A fetch run whole on a worker rotates by that worker's copy of the
    -- rotation sequence (a stream's fetches all run on its node).
    PERFORM run_command_on_workers(format(
        'CREATE SEQUENCE IF NOT EXISTS rheo.fetch_rotation; ALTER SEQUENCE rheo.fetch_rotation OWNER TO %I',
        (SELECT c.relowner::regrole::text FROM pg_class c WHERE c.oid = 'rheo.fetch_rotation'::regclass)));
    FOREACH v_fn IN ARRAY ARRAY['rheo.ack(uuid, timestamptz)', 'rheo.ack_batch(uuid[], timestamptz)',
                                'rheo.renew(uuid, int, timestamptz)', 'rheo.retry(uuid, text, int, timestamptz)',
                                'rheo.reject(uuid, text, timestamptz)']::regprocedure[] LOOP
        IF NOT EXISTS (SELECT FROM pg_proc p
                        WHERE p.oid = v_fn AND 'plan_cache_mode=force_custom_plan' = ANY (p.proconfig)) THEN
            EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', v_fn);
        END IF;
    END LOOP;
    -- An ack hands its work to rheo._ack_on, distributed by its stream:
    -- Citus delegates the nested call, one round trip to the stream's
    -- node, when it does not take the calling function for a
    -- transaction of several statements. Inside a caller's transaction
    -- it still does, and the statements are routed one by one.
    IF NOT EXISTS (SELECT FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass
                     AND o.objid = 'rheo._ack_on(text, uuid[])'::regprocedure AND o.distribution_argument_index = 0) THEN
        PERFORM create_distributed_function('rheo._ack_on(text, uuid[])', 'stream', colocate_with => 'rheo.events');
    END IF;
    FOREACH v_fn IN ARRAY ARRAY['rheo.ack(uuid, timestamptz)', 'rheo.ack_batch(uuid[], timestamptz)']::regprocedure[] LOOP
        IF NOT EXISTS (SELECT FROM pg_proc p
                        WHERE p.oid = v_fn AND 'citus.function_opens_transaction_block=off' = ANY (p.proconfig)) THEN
            EXECUTE format('ALTER FUNCTION %s SET citus.function_opens_transaction_block = off', v_fn);
        END IF;
    END LOOP;
    -- Their statements on the shards are Rheo's own, not manual changes
    -- (a call made on a worker by a client connected to it).
    FOREACH v_fn IN ARRAY ARRAY['rheo._ack_on(text, uuid[])',
                                'rheo._fetch_citus(text, text, int, int, text, int, text, int[], timestamptz, timestamptz)']::regprocedure[] LOOP
        IF NOT EXISTS (SELECT FROM pg_proc p
                        WHERE p.oid = v_fn AND 'citus.enable_manual_changes_to_shards=on' = ANY (p.proconfig)) THEN
            EXECUTE format('ALTER FUNCTION %s SET citus.enable_manual_changes_to_shards = on', v_fn);
        END IF;
    END LOOP;
END
$rheo_citus_claims$;

-- rheo.group_status on Citus. Citus runs a view's statement on the
-- workers with the privileges of the role that queries it, not of the
-- view's owner (citus#1683), so rheo_reader, which may read the view and
-- not the tables under it, would be refused. On Citus the view's
-- statement moves into rheo._group_status(), SECURITY DEFINER, and the
-- view reads that function: its columns, its rows and who may read it
-- stay as they are. Again after every install of the functions, which
-- makes the view anew from sql/functions/group_status.sql.
DO $rheo_citus_group_status$
DECLARE
    v_query   text;
    v_columns text;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus') THEN
        RETURN;
    END IF;
    v_query := rtrim(pg_get_viewdef('rheo.group_status'::regclass), '; ' || chr(10));
    IF v_query LIKE '%rheo._group_status()%' THEN
        RETURN;
    END IF;
    SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
      INTO v_columns
      FROM pg_attribute a
     WHERE a.attrelid = 'rheo.group_status'::regclass AND a.attnum > 0 AND NOT a.attisdropped;
    EXECUTE format($f$CREATE OR REPLACE FUNCTION rheo._group_status()
RETURNS TABLE (%s)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS %L$f$, v_columns, '#variable_conflict use_column' || chr(10) || 'BEGIN RETURN QUERY ' || v_query || '; END');
    -- Its owner's privileges, Rheo's own, not those of the role running
    -- this.
    EXECUTE format('ALTER FUNCTION rheo._group_status() OWNER TO %I',
                   (SELECT pg_get_userbyid(n.nspowner) FROM pg_namespace n WHERE n.nspname = 'rheo'));
    IF NOT EXISTS (SELECT FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass
                     AND o.objid = 'rheo._group_status()'::regprocedure) THEN
        PERFORM create_distributed_function('rheo._group_status()');
    END IF;
    PERFORM rheo._access('EXECUTE', 'FUNCTION rheo._group_status()', 'rheo_reader');
    CREATE OR REPLACE VIEW rheo.group_status AS SELECT * FROM rheo._group_status();
END
$rheo_citus_group_status$;
