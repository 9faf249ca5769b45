-- Events are immutable: UPDATE and TRUNCATE always fail, INSERT succeeds
-- only inside rheo.append / rheo.append_batch, and DELETE only inside
-- rheo.prune and rheo.drop_stream.
--
-- Those functions are SECURITY DEFINER, so inside them current_user is
-- the owner of rheo.events (rheo_owner). No other role can become it:
-- rheo_owner cannot log in and is granted to no one, and no other
-- function of Rheo's inserts or deletes events. The guard therefore admits
-- an INSERT or a DELETE exactly when it is made as the table's owner,
-- whatever a session has set; a role granted INSERT or DELETE on the
-- table still gets immutable_event. (A superuser can always get around a
-- trigger; so can the owner, which is why nothing logs in as it.)
--
-- During an upgrade from the first release, whose rheo.append ran as
-- its caller and marked its insert with the transaction-local flag
-- rheo.appending, that release's appends still in flight at the switch
-- insert so: the flag is admitted while the upgrade's follow-ups are
-- pending (rheo.upgrade_follow_ups exists, docs/upgrading.md), and only
-- for a role the table's privileges let insert.
CREATE OR REPLACE FUNCTION rheo._events_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'DELETE')
       AND (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID)
           = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' AND current_setting('rheo.appending', true) = 'on'
       AND to_regclass('rheo.upgrade_follow_ups') IS NOT NULL THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'immutable_event' USING ERRCODE = 'RH012',
        DETAIL = format('%s on rheo.events is not allowed: events are immutable, added only by rheo.append and rheo.append_batch and removed only by rheo.prune and rheo.drop_stream', TG_OP);
END
$$;

-- Made again only when they differ: CREATE TRIGGER locks rheo.events
-- against writes until the install commits, and the install runs while
-- the application appends (docs/upgrading.md). On a Citus cluster, where
-- rheo.events is distributed (docs/citus.md), Citus makes and runs the
-- triggers of a distributed table on its shards only once allowed to.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus') THEN
        PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    END IF;
    IF (SELECT pg_get_triggerdef(g.oid) FROM pg_trigger g
         WHERE g.tgrelid = 'rheo.events'::regclass AND g.tgname = 'events_immutable')
       IS DISTINCT FROM 'CREATE TRIGGER events_immutable BEFORE INSERT OR DELETE OR UPDATE ON rheo.events FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard()' THEN
        CREATE OR REPLACE TRIGGER events_immutable
            BEFORE INSERT OR UPDATE OR DELETE ON rheo.events
            FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard();
    END IF;
    IF (SELECT pg_get_triggerdef(g.oid) FROM pg_trigger g
         WHERE g.tgrelid = 'rheo.events'::regclass AND g.tgname = 'events_no_truncate')
       IS DISTINCT FROM 'CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON rheo.events FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard()' THEN
        CREATE OR REPLACE TRIGGER events_no_truncate
            BEFORE TRUNCATE ON rheo.events
            FOR EACH STATEMENT EXECUTE FUNCTION rheo._events_guard();
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._events_guard()');

-- The public log: readable in plain SQL by every Rheo role.
SELECT rheo._access('SELECT', 'TABLE rheo.events', 'rheo_reader');
