-- Lineage lookups of rheo.query: every event of a conversation
-- (metadata correlation_id) and every event caused by one (causation_id)
-- without scanning the stream. Partial, so that events without these keys
-- cost nothing; keyed like the primary key after the value, so that each
-- partition's probe of rheo.query reads its matches in sequence order.
-- The other filters have no index by default: docs/query.md weighs what
-- each would cost appends against what it saves queries, with the DDL.
--
-- IF NOT EXISTS: on a large log, create these beforehand with CREATE
-- INDEX CONCURRENTLY and the same names, and this migration keeps them
-- instead of locking out appends while it builds them.
CREATE INDEX IF NOT EXISTS events_correlation_id_idx
    ON rheo.events (stream, (metadata ->> 'correlation_id'), "partition", sequence)
    WHERE (metadata ->> 'correlation_id') IS NOT NULL;

CREATE INDEX IF NOT EXISTS events_causation_id_idx
    ON rheo.events (stream, (metadata ->> 'causation_id'), "partition", sequence)
    WHERE (metadata ->> 'causation_id') IS NOT NULL;
