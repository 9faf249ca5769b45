-- Lineage lookups of Query, the twin of sql/schema/002_query_indexes.sql:
-- every event of a conversation (metadata correlation_id) and every event
-- caused by one (causation_id) without scanning the stream. Partial, so
-- that events without these keys cost nothing. The driver's queries write
-- these expressions verbatim, which SQLite needs to use the indexes.
CREATE INDEX IF NOT EXISTS rheo_events_correlation_id
    ON rheo_events (stream, (metadata ->> '$.correlation_id'), "partition", sequence)
    WHERE (metadata ->> '$.correlation_id') IS NOT NULL;

CREATE INDEX IF NOT EXISTS rheo_events_causation_id
    ON rheo_events (stream, (metadata ->> '$.causation_id'), "partition", sequence)
    WHERE (metadata ->> '$.causation_id') IS NOT NULL;
