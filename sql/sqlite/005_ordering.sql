-- The twin of sql/schema/005_ordering.sql (reference §3.3): a group's ordering,
-- the key of each delivery, and the 'blocked' state of an event that a
-- group ordered by key passed while an earlier event of its key was still
-- in progress.

ALTER TABLE rheo_groups ADD COLUMN ordering TEXT NOT NULL DEFAULT 'none'
    CHECK (ordering IN ('none', 'key', 'partition'));

-- SQLite cannot change a CHECK constraint in place: the table is built
-- anew with the state 'blocked' and the column key, and the rows copied.
CREATE TABLE rheo_deliveries_005 (
    group_id    INTEGER NOT NULL,
    "partition" INTEGER NOT NULL,
    sequence    INTEGER NOT NULL,
    -- blocked: passed by the cursor of a group ordered by key while an
    -- earlier delivery of its key was in progress; never leased as such.
    state       TEXT    NOT NULL CHECK (state IN ('leased', 'pending', 'blocked')),
    lease_id    TEXT,
    consumer_id TEXT,
    attempt     INTEGER NOT NULL,
    leased_at   INTEGER,
    -- leased: when the lease lapses; pending: when it becomes claimable;
    -- blocked: when it was blocked.
    expires_at  INTEGER NOT NULL,
    reason      TEXT,
    -- The event's key, copied when the row is made; NULL for an event
    -- without one (not ordered).
    key         TEXT,
    PRIMARY KEY (group_id, "partition", sequence)
) STRICT, WITHOUT ROWID;

INSERT INTO rheo_deliveries_005
       (group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at, reason, key)
SELECT d.group_id, d."partition", d.sequence, d.state, d.lease_id, d.consumer_id, d.attempt, d.leased_at,
       d.expires_at, d.reason,
       (SELECT e.key FROM rheo_groups AS g
          JOIN rheo_events AS e ON e.stream = g.stream AND e."partition" = d."partition" AND e.sequence = d.sequence
         WHERE g.group_id = d.group_id)
  FROM rheo_deliveries AS d;

DROP TABLE rheo_deliveries;
ALTER TABLE rheo_deliveries_005 RENAME TO rheo_deliveries;

CREATE UNIQUE INDEX rheo_deliveries_lease_id ON rheo_deliveries (lease_id);

-- Fetch finds what is claimable again or to dead-letter (expires_at <=
-- clock) in a range scan of this index, without reading the leases still
-- running nor the blocked rows, which it leaves out. state and attempt
-- make it covering for those scans; the statements that change them
-- change expires_at too. Queries must repeat the term state <> 'blocked'
-- for SQLite to use it.
CREATE INDEX rheo_deliveries_due ON rheo_deliveries (group_id, "partition", expires_at, state, attempt)
    WHERE state <> 'blocked';

-- A key's deliveries in sequence order: whether an event has an earlier
-- one in progress (then it is blocked), and, when one is settled, the
-- lowest that is left (which is unblocked if it was blocked). Events
-- without a key are not ordered and cost nothing here.
CREATE INDEX rheo_deliveries_key ON rheo_deliveries (group_id, "partition", key, sequence)
    WHERE key IS NOT NULL;

-- The blocked rows of a group, which set_ordering makes pending when the
-- group leaves 'key' and which replay does not count as offered.
CREATE INDEX rheo_deliveries_blocked ON rheo_deliveries (group_id, "partition", sequence)
    WHERE state = 'blocked';
