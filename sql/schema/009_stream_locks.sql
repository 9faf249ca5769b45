-- A row per stream that the stream-wide operations lock to take turns:
-- create_group, prune, set_retention and drop_stream, which locked the
-- stream's row of rheo.streams before. On a Citus cluster rheo.streams is
-- a reference table, and Citus locks a row of one by locking the table's
-- whole shard on more than one node: calls on different streams waited
-- for each other, and create_group and prune could deadlock. This table
-- is distributed by the stream with the log (sql/citus/distribute.sql),
-- so that the lock is a row lock on the node that holds the stream. On a
-- single server it is the same row lock as before, on a row that no
-- append's foreign key check takes.
--
-- Applied under load (docs/upgrading.md): the table is made and filled
-- while the previous release's functions run, which neither read nor
-- write it; the switch adds the rows of the streams created since and
-- removes those of the streams dropped since.

-- rheo:step
CREATE TABLE IF NOT EXISTS rheo.stream_locks (
    stream text PRIMARY KEY
);

-- On a Citus cluster where Rheo is distributed already, distributed at
-- once, before any function that reads it runs on the nodes.
-- rheo:step
DO $$
BEGIN
    -- Nested: pg_dist_partition exists only with citus.
    IF EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus') THEN
        IF EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = 'rheo.events'::regclass)
           AND NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = 'rheo.stream_locks'::regclass) THEN
            PERFORM create_distributed_table('rheo.stream_locks', 'stream', colocate_with => 'rheo.events');
        END IF;
    END IF;
END
$$;

-- rheo:step
INSERT INTO rheo.stream_locks (stream)
SELECT s.stream FROM rheo.streams s
ON CONFLICT (stream) DO NOTHING;

-- rheo:step switch
INSERT INTO rheo.stream_locks (stream)
SELECT s.stream FROM rheo.streams s
ON CONFLICT (stream) DO NOTHING;
DELETE FROM rheo.stream_locks AS l
 WHERE NOT EXISTS (SELECT 1 FROM rheo.streams s WHERE s.stream = l.stream);
