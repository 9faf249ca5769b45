-- Lifecycle and retention (reference §7): how long a stream keeps its events,
-- and where each partition's retained log begins. Catalog changes only,
-- one table at a time (docs/upgrading.md).

-- The stream's retention: prune deletes events older than this, once
-- every group has passed them. NULL keeps them forever.
ALTER TABLE rheo.streams ADD COLUMN IF NOT EXISTS max_age interval;

-- The lowest sequence not pruned: the first retained event, or the high
-- watermark + 1 when none is. Only prune moves it, at the end of its
-- transaction, so appends wait for it no longer than a commit.
-- rheo:step
ALTER TABLE rheo.partitions ADD COLUMN IF NOT EXISTS low_watermark bigint NOT NULL DEFAULT 1;
