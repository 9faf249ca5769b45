-- Rejects a call outside READ COMMITTED, for the functions that wait for
-- the row locks of concurrent transactions and then act on what those
-- committed: prune, replay, reset_group, create_group, drop_group,
-- drop_stream and set_ordering. At READ COMMITTED each statement after
-- such a wait reads what the transaction it waited for committed; at
-- REPEATABLE READ or SERIALIZABLE the transaction's snapshot predates it,
-- and a lock taken without a write raises no serialization failure, so
-- a prune would delete an event a replay had just reopened, or miss a
-- group just created (docs/decisions.md, "Isolation").
CREATE OR REPLACE FUNCTION rheo._check_read_committed(function_name text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_level text := current_setting('transaction_isolation');
BEGIN
    IF v_level <> 'read committed' THEN
        RAISE EXCEPTION 'invalid_argument' USING ERRCODE = 'RH011',
            DETAIL = format('%s must run at READ COMMITTED, not %s: it acts on what the transactions it waits for commit, '
                            'which the snapshot of a %s transaction does not show; call it in a READ COMMITTED transaction',
                            $1, upper(v_level), upper(v_level));
    END IF;
END
$$;

SELECT rheo._access('EXECUTE', 'FUNCTION rheo._check_read_committed(text)');
