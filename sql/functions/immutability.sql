-- Events are immutable: UPDATE, DELETE and TRUNCATE always fail, and
-- INSERT succeeds only inside rheo.append / rheo.append_batch, which set
-- the transaction-local flag rheo.appending around their insert.
CREATE OR REPLACE FUNCTION rheo._events_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' AND current_setting('rheo.appending', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'immutable_event' USING ERRCODE = 'RH012',
        DETAIL = format('%s on rheo.events is not allowed: events are immutable and added only by rheo.append and rheo.append_batch', TG_OP);
END
$$;

CREATE OR REPLACE TRIGGER events_immutable
    BEFORE INSERT OR UPDATE OR DELETE ON rheo.events
    FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard();

CREATE OR REPLACE TRIGGER events_no_truncate
    BEFORE TRUNCATE ON rheo.events
    FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard();
