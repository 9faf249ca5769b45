-- Events are immutable: UPDATE, DELETE and TRUNCATE always fail, and
-- INSERT succeeds only inside rheo.append / rheo.append_batch.
--
-- Those functions are SECURITY DEFINER, so inside them current_user is
-- the owner of rheo.events (rheo_owner). No other role can become it:
-- rheo_owner cannot log in and is granted to no one, and no function of
-- Rheo's but the append functions inserts into rheo.events. The guard
-- therefore admits an INSERT exactly when it is made as the table's
-- owner, whatever a session has set; a role granted INSERT on the table
-- still gets immutable_event. (A superuser can always get around a
-- trigger; so can the owner, which is why nothing logs in as it.)
CREATE OR REPLACE FUNCTION rheo._events_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT'
       AND (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID)
           = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user) THEN
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

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._events_guard()');

-- The public log: readable in plain SQL by every Rheo role.
SELECT rheo._access('SELECT', 'TABLE rheo.events', 'rheo_reader');
