-- The twin of sql/schema/004_lifecycle.sql (SPEC §7).

-- The stream's retention in microseconds; NULL keeps its events forever.
ALTER TABLE rheo_streams ADD COLUMN max_age INTEGER;

-- The lowest sequence not pruned: the first retained event, or the high
-- watermark + 1 when none is.
ALTER TABLE rheo_partitions ADD COLUMN low_watermark INTEGER NOT NULL DEFAULT 1;
