-- Ordering (reference §3.3): a group hands out its events in any order ('none',
-- the default), one at a time per key ('key'), or one at a time per
-- partition ('partition'). See docs/design.md, "Ordering".
--
-- Applied under load in steps (docs/upgrading.md): catalog changes one
-- table at a time, the index built concurrently, the wider CHECK made
-- valid without a lock that stops writes.

ALTER TABLE rheo.groups ADD COLUMN IF NOT EXISTS ordering text NOT NULL DEFAULT 'none'
    CHECK (ordering IN ('none', 'key', 'partition'));

-- The event's key, copied when a 'key' group's delivery row is made (NULL
-- for keyless events and under the other orderings; set_ordering copies
-- it when a group turns to 'key'), so that a key's deliveries are found
-- without the log. Every group is 'none' when the column is made, so no
-- delivery needs it yet.
-- rheo:step
ALTER TABLE rheo.deliveries ADD COLUMN IF NOT EXISTS key text;

-- 'blocked': an event the cursor passed in 'key' mode while an earlier
-- event of its key was not terminal. It is stored once, with expires_at
-- 'infinity', so that the index of due times never reaches it, and it
-- becomes 'pending' when its turn comes.
-- rheo:step
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_constraint c
                    WHERE c.conrelid = 'rheo.deliveries'::regclass AND c.conname = 'deliveries_state_check'
                      AND pg_get_constraintdef(c.oid) LIKE '%blocked%') THEN
        ALTER TABLE rheo.deliveries DROP CONSTRAINT deliveries_state_check,
            ADD CONSTRAINT deliveries_state_check CHECK (state IN ('leased', 'pending', 'blocked')) NOT VALID;
    END IF;
END
$$;

-- rheo:step online
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_constraint c
                WHERE c.conrelid = 'rheo.deliveries'::regclass AND c.conname = 'deliveries_state_check' AND NOT c.convalidated) THEN
        ALTER TABLE rheo.deliveries VALIDATE CONSTRAINT deliveries_state_check;
    END IF;
END
$$;

-- Set on a delivery that later events of its key are blocked behind: its
-- settle leaves a wakeup for its key. Not indexed, so setting it is HOT.
-- rheo:step
ALTER TABLE rheo.deliveries ADD COLUMN IF NOT EXISTS has_waiters boolean NOT NULL DEFAULT false;

-- A key's deliveries in sequence order: its earliest one not terminal,
-- the one just before a new event, and the next blocked one. The group
-- and the partition are indexed as group_id::bigint and
-- "partition"::bigint, and the probes name them so: the primary key,
-- which leads with (group_id, partition) too, cannot serve them then, so
-- no plan (generic plans may be made on an empty table, where both look
-- alike) takes it and filters on the key, reading every event blocked
-- behind a key to probe it.
-- rheo:step concurrently
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_key_idx
    ON rheo.deliveries ((group_id::bigint), ("partition"::bigint), key, sequence)
    WHERE key IS NOT NULL;

-- The probes of that index run in generic plans, for a key the planner
-- does not know. When one hot key holds most deliveries, the statistics
-- would say that a key matches most rows, and the planner would take the
-- primary key and filter on the key instead, reading every event blocked
-- behind the hot key to probe any other. Keys are many by design: tell
-- the planner so (half as many keys as rows), whatever ANALYZE samples.
-- rheo:step online
ALTER TABLE rheo.deliveries ALTER COLUMN key SET (n_distinct = -0.5);

-- Keys whose blocked events may be due for release: a settle of a
-- delivery with waiters writes one, and so does a fetch that blocks an
-- event behind a delivery not yet marked as having waiters. The next
-- 'key' fetch of the partition takes them and releases or marks the key's
-- earliest delivery. Rows live for a fetch or so; duplicates are allowed,
-- so that writing one never waits.
-- rheo:step
CREATE TABLE IF NOT EXISTS rheo.key_wakeups (
    group_id    int  NOT NULL,
    "partition" int  NOT NULL,
    key         text NOT NULL
);

CREATE INDEX IF NOT EXISTS key_wakeups_group_id_partition_idx ON rheo.key_wakeups (group_id, "partition");

ALTER TABLE rheo.key_wakeups SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000);

-- The new signatures take the places of the old ones: create_group gains
-- a trailing ordering argument, list_groups an ordering column, and the
-- group lookup returns the ordering. The old ones are renamed, not
-- dropped, so that the previous release's calls in flight, which hold
-- them, finish; the follow-up drops them. The functions are installed
-- again in the switch.
-- rheo:step install
DO $$
BEGIN
    IF to_regprocedure('rheo.create_group(text, text, int, bigint, timestamptz, int[], timestamptz)') IS NOT NULL THEN
        ALTER FUNCTION rheo.create_group(text, text, int, bigint, timestamptz, int[], timestamptz)
            RENAME TO _previous_create_group;
    END IF;
    IF EXISTS (SELECT FROM pg_proc p
                WHERE p.oid = to_regprocedure('rheo.list_groups(text)') AND NOT 'ordering' = ANY (p.proargnames)) THEN
        ALTER FUNCTION rheo.list_groups(text) RENAME TO _previous_list_groups;
    END IF;
    IF EXISTS (SELECT FROM pg_proc p
                WHERE p.oid = to_regprocedure('rheo._group(text, text)') AND NOT 'ordering' = ANY (p.proargnames)) THEN
        ALTER FUNCTION rheo._group(text, text) RENAME TO _previous_group;
    END IF;
END
$$;

-- rheo:step followup
DROP FUNCTION IF EXISTS rheo._previous_create_group(text, text, int, bigint, timestamptz, int[], timestamptz);
DROP FUNCTION IF EXISTS rheo._previous_list_groups(text);
DROP FUNCTION IF EXISTS rheo._previous_group(text, text);
