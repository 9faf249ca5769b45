-- What a fetch's due check reads. Each cursor row carries expiry_mark, a
-- lower bound of the expiry of every lease in flight of its group and
-- partition; only a fetch, holding the cursor row, and a renew that
-- brings a lease's expiry before it, taking the cursor row first, write
-- it. A fetch looks for expired leases in deliveries_due_idx only once
-- now has reached the mark, and then moves the mark up to the earliest
-- expiry it finds. Deliveries waiting for a retry's delay, a replay or
-- their key's turn (state 'pending') are found by an index of their own,
-- which the settled leases never enter: so the due check no longer walks
-- the index entries of the settled deliveries that a long transaction
-- keeps from being cleaned up (docs/design.md, "Due times").
--
-- Applied under load (docs/upgrading.md): the column comes with a
-- constant default (a catalog change), '-infinity', which makes the first
-- fetch of each partition look, and the index is built concurrently. The
-- previous release's functions read neither. Once its calls in flight at
-- the switch are over, the follow-ups forget the marks that its fetches
-- did not keep, and drop the helpers whose signatures changed.

-- rheo:step
ALTER TABLE rheo.cursors ADD COLUMN IF NOT EXISTS expiry_mark timestamptz NOT NULL DEFAULT '-infinity';

-- rheo:step concurrently
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_pending_idx
    ON rheo.deliveries (group_id, "partition", expires_at) WHERE state = 'pending';

-- A fetch of the previous release still in flight at the switch makes
-- leases without bringing a mark down: once those calls are over, every
-- mark is forgotten again, and the next fetch of each partition looks.
-- rheo:step followup
UPDATE rheo.cursors SET expiry_mark = '-infinity' WHERE expiry_mark > '-infinity';

-- rheo:step followup
DROP FUNCTION IF EXISTS rheo._has_work(int, int, bigint, bigint, timestamptz, boolean);
DROP FUNCTION IF EXISTS rheo._due_count(int, int, timestamptz, int, bigint);
DROP FUNCTION IF EXISTS rheo._due(int, int, timestamptz, int, int, int, boolean);
