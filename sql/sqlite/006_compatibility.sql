-- The twin of sql/schema/006_compatibility.sql: the oldest schema
-- version whose builds still work on this database.
ALTER TABLE rheo_schema_version ADD COLUMN compatible_from INTEGER NOT NULL DEFAULT 0;
UPDATE rheo_schema_version SET compatible_from = 2;
