-- The oldest schema version whose builds still work on this database:
-- a build that carries an older latest version than this refuses the
-- database (connect.Open) instead of calling functions that changed
-- under it. Each release's last migration sets it; this one's functions
-- still take every call of the first release's driver (schema version 2),
-- docs/upgrading.md. A catalog change of the version table only.
ALTER TABLE rheo.schema_version ADD COLUMN IF NOT EXISTS compatible_from int4 NOT NULL DEFAULT 0;

-- rheo:step
UPDATE rheo.schema_version SET compatible_from = 2;
