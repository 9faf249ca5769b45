-- The stream on every row of a group's bookkeeping: cursors, deliveries,
-- dead letters and key wakeups name their group's stream, as the log,
-- partitions and time marks do. On a Citus cluster (docs/citus.md) each
-- of these tables is distributed by it, so that one stream's rows, and
-- every join and lock of one call, live on one node; on a single server
-- the column is carried and not indexed, and the primary keys stay as
-- they are.
--
-- Applied under load in steps (docs/upgrading.md): the columns are added
-- empty, a trigger fills them in for the rows that the previous release's
-- functions write until the follow-up, the rows already there are filled
-- in batches, and NOT NULL is proven by a CHECK made valid beforehand.

-- rheo:step
ALTER TABLE rheo.cursors ADD COLUMN IF NOT EXISTS stream text;
ALTER TABLE rheo.deliveries ADD COLUMN IF NOT EXISTS stream text;
ALTER TABLE rheo.dead_letters ADD COLUMN IF NOT EXISTS stream text;
ALTER TABLE rheo.key_wakeups ADD COLUMN IF NOT EXISTS stream text;

CREATE OR REPLACE FUNCTION rheo._group_stream()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.stream := (SELECT g.stream FROM rheo.groups g WHERE g.group_id = NEW.group_id);
    RETURN NEW;
END
$$;

REVOKE EXECUTE ON FUNCTION rheo._group_stream() FROM PUBLIC;

CREATE OR REPLACE TRIGGER cursors_stream
    BEFORE INSERT ON rheo.cursors
    FOR EACH ROW WHEN (NEW.stream IS NULL) EXECUTE FUNCTION rheo._group_stream();
CREATE OR REPLACE TRIGGER deliveries_stream
    BEFORE INSERT ON rheo.deliveries
    FOR EACH ROW WHEN (NEW.stream IS NULL) EXECUTE FUNCTION rheo._group_stream();
CREATE OR REPLACE TRIGGER dead_letters_stream
    BEFORE INSERT ON rheo.dead_letters
    FOR EACH ROW WHEN (NEW.stream IS NULL) EXECUTE FUNCTION rheo._group_stream();
CREATE OR REPLACE TRIGGER key_wakeups_stream
    BEFORE INSERT ON rheo.key_wakeups
    FOR EACH ROW WHEN (NEW.stream IS NULL) EXECUTE FUNCTION rheo._group_stream();

-- The rows still to fill, found by an index of their own rather than by
-- a scan that passes the filled ones again in every batch (the dead
-- letters of a long-lived group can be many). Dropped by the follow-up.
-- rheo:step concurrently
CREATE INDEX CONCURRENTLY IF NOT EXISTS dead_letters_stream_missing_idx
    ON rheo.dead_letters (group_id, "partition", sequence) WHERE stream IS NULL;

-- rheo:step concurrently
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_stream_missing_idx
    ON rheo.deliveries (group_id, "partition", sequence) WHERE stream IS NULL;

-- rheo:step batch
UPDATE rheo.cursors AS c
   SET stream = g.stream
  FROM rheo.groups g
 WHERE (c.group_id, c."partition") IN
       (SELECT x.group_id, x."partition" FROM rheo.cursors x WHERE x.stream IS NULL LIMIT 1000)
   AND g.group_id = c.group_id;

-- rheo:step batch
UPDATE rheo.deliveries AS d
   SET stream = g.stream
  FROM rheo.groups g
 WHERE (d.group_id, d."partition", d.sequence) IN
       (SELECT x.group_id, x."partition", x.sequence FROM rheo.deliveries x WHERE x.stream IS NULL LIMIT 1000)
   AND g.group_id = d.group_id;

-- rheo:step batch
UPDATE rheo.dead_letters AS l
   SET stream = g.stream
  FROM rheo.groups g
 WHERE (l.group_id, l."partition", l.sequence) IN
       (SELECT x.group_id, x."partition", x.sequence FROM rheo.dead_letters x WHERE x.stream IS NULL LIMIT 1000)
   AND g.group_id = l.group_id;

-- Key wakeups live for a fetch or so; those of a group that is gone are
-- dropped rather than filled.
-- rheo:step batch
WITH batch AS (
    SELECT k.ctid AS tid, g.stream
      FROM rheo.key_wakeups k
      LEFT JOIN rheo.groups g ON g.group_id = k.group_id
     WHERE k.stream IS NULL
     LIMIT 1000
), orphans AS (
    DELETE FROM rheo.key_wakeups k
     WHERE k.ctid = ANY (ARRAY(SELECT b.tid FROM batch b WHERE b.stream IS NULL))
)
UPDATE rheo.key_wakeups AS k
   SET stream = b.stream
  FROM batch b
 WHERE k.ctid = b.tid AND b.stream IS NOT NULL;

-- NOT NULL without a scan under the switch's lock: a CHECK made valid
-- beforehand proves it (and is dropped again in the switch).
-- rheo:step
DO $$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['cursors', 'deliveries', 'dead_letters', 'key_wakeups'] LOOP
        IF NOT EXISTS (SELECT FROM pg_constraint c
                        WHERE c.conrelid = format('rheo.%I', v_table)::regclass
                          AND c.conname = v_table || '_stream_not_null')
           AND EXISTS (SELECT FROM pg_attribute a
                        WHERE a.attrelid = format('rheo.%I', v_table)::regclass
                          AND a.attname = 'stream' AND NOT a.attnotnull) THEN
            EXECUTE format('ALTER TABLE rheo.%I ADD CONSTRAINT %I CHECK (stream IS NOT NULL) NOT VALID',
                           v_table, v_table || '_stream_not_null');
        END IF;
    END LOOP;
END
$$;

-- rheo:step online
DO $$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['cursors', 'deliveries', 'dead_letters', 'key_wakeups'] LOOP
        IF EXISTS (SELECT FROM pg_constraint c
                    WHERE c.conrelid = format('rheo.%I', v_table)::regclass
                      AND c.conname = v_table || '_stream_not_null' AND NOT c.convalidated) THEN
            EXECUTE format('ALTER TABLE rheo.%I VALIDATE CONSTRAINT %I', v_table, v_table || '_stream_not_null');
        END IF;
    END LOOP;
END
$$;

-- rheo:step switch
ALTER TABLE rheo.cursors ALTER COLUMN stream SET NOT NULL;
ALTER TABLE rheo.cursors DROP CONSTRAINT IF EXISTS cursors_stream_not_null;
ALTER TABLE rheo.deliveries ALTER COLUMN stream SET NOT NULL;
ALTER TABLE rheo.deliveries DROP CONSTRAINT IF EXISTS deliveries_stream_not_null;
ALTER TABLE rheo.dead_letters ALTER COLUMN stream SET NOT NULL;
ALTER TABLE rheo.dead_letters DROP CONSTRAINT IF EXISTS dead_letters_stream_not_null;
ALTER TABLE rheo.key_wakeups ALTER COLUMN stream SET NOT NULL;
ALTER TABLE rheo.key_wakeups DROP CONSTRAINT IF EXISTS key_wakeups_stream_not_null;

-- rheo:step followup
DROP TRIGGER IF EXISTS cursors_stream ON rheo.cursors;
DROP TRIGGER IF EXISTS deliveries_stream ON rheo.deliveries;
DROP TRIGGER IF EXISTS dead_letters_stream ON rheo.dead_letters;
DROP TRIGGER IF EXISTS key_wakeups_stream ON rheo.key_wakeups;
DROP FUNCTION IF EXISTS rheo._group_stream();
DROP INDEX IF EXISTS rheo.dead_letters_stream_missing_idx;
DROP INDEX IF EXISTS rheo.deliveries_stream_missing_idx;
