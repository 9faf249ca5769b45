BEGIN;
SELECT plan(39);

-- The expiry mark of each cursor (docs/design.md, "Due times"): a lower
-- bound of the expiry of the partition's leases in flight, below which a
-- fetch does not look for expired leases. Every way a delivery becomes
-- claimable again must still be seen at once, under every ordering.
SELECT rheo.create_stream('s', 2);
SELECT rheo.append_batch('s', (SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 6) n),
                         "partition" => 0, clock => '2030-01-01Z');

CREATE FUNCTION pg_temp.mark(g text, p int) RETURNS timestamptz LANGUAGE sql AS $$
    SELECT c.expiry_mark FROM rheo.cursors c JOIN rheo.groups gr USING (group_id)
     WHERE gr.stream = 's' AND gr.group_name = g AND c."partition" = p
$$;
CREATE FUNCTION pg_temp.lease(g text, s bigint) RETURNS uuid LANGUAGE sql AS $$
    SELECT d.lease_id FROM rheo.deliveries d JOIN rheo.groups gr USING (group_id)
     WHERE gr.stream = 's' AND gr.group_name = g AND d."partition" = 0 AND d.sequence = s
$$;

-- The mark's life: none known at first, then the expiry of the first
-- leases, kept while later leases expire later, moved up to the
-- earliest lease in flight once passed, and 'infinity' in a partition
-- with none.
SELECT rheo.create_group('s', 'm');
SELECT is(pg_temp.mark('m', 0), '-infinity'::timestamptz, 'a new cursor has no mark: its first fetch looks');
SELECT is((SELECT count(*) FROM rheo.fetch('s', 'm', 2, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')), 2::bigint,
    'the first fetch leases 2');
SELECT is(pg_temp.mark('m', 0), '2030-01-01 00:00:01Z'::timestamptz, 'the mark is the expiry of the leases made');
SELECT is(pg_temp.mark('m', 1), '-infinity'::timestamptz, 'a partition with nothing to claim is not locked: its mark stays');
SELECT is((SELECT count(*) FROM rheo.fetch('s', 'm', 2, lease_ms => 5000, clock => '2030-01-01 00:00:00.5Z')), 2::bigint,
    'a second fetch leases 2 more');
SELECT is(pg_temp.mark('m', 0), '2030-01-01 00:00:01Z'::timestamptz, 'leases that expire later leave the mark');
SELECT rheo.ack(pg_temp.lease('m', 1), clock => '2030-01-01 00:00:00.5Z');
SELECT rheo.ack(pg_temp.lease('m', 2), clock => '2030-01-01 00:00:00.5Z');
SELECT is((SELECT count(*) FROM rheo.fetch('s', 'm', 1, lease_ms => 5000, clock => '2030-01-01 00:00:02Z')), 1::bigint,
    'a fetch past the mark');
SELECT is(pg_temp.mark('m', 0), '2030-01-01 00:00:05.5Z'::timestamptz,
    'the mark passed is moved up to the earliest lease in flight');
SELECT is((SELECT string_agg(sequence || ':' || attempt, ' ' ORDER BY sequence)
             FROM rheo.fetch('s', 'm', 10, lease_ms => 1000, clock => '2030-01-01 00:00:05.5Z')),
    '3:2 4:2 6:1', 'at the mark the leases expired are claimed again');

-- A renew that shortens a lease brings the mark down to it.
SELECT rheo.create_group('s', 'r');
SELECT is((SELECT count(*) FROM rheo.fetch('s', 'r', 2, lease_ms => 60000, clock => '2030-01-01 00:00:00Z')), 2::bigint,
    'two leases of a minute');
SELECT is(rheo.renew(pg_temp.lease('r', 2), 90000, clock => '2030-01-01 00:00:00Z'), '2030-01-01 00:01:30Z'::timestamptz,
    'a renew that extends');
SELECT is(pg_temp.mark('r', 0), '2030-01-01 00:01:00Z'::timestamptz, 'an extension leaves the mark');
SELECT is(rheo.renew(pg_temp.lease('r', 1), 1000, clock => '2030-01-01 00:00:00Z'), '2030-01-01 00:00:01Z'::timestamptz,
    'a renew that shortens');
SELECT is(pg_temp.mark('r', 0), '2030-01-01 00:00:01Z'::timestamptz, 'a shortened lease brings the mark down');
SELECT is((SELECT string_agg(sequence || ':' || attempt, ' ') FROM rheo.fetch('s', 'r', 1, clock => '2030-01-01 00:00:01Z')),
    '1:2', 'the shortened lease is claimed again at its new expiry');

-- Under every ordering: a retry with delay 0 is claimable at once, one
-- with a delay at its end, an expired lease at its expiry, a lease
-- expired at the attempt limit is dead-lettered at its expiry, and a
-- replayed event at once, while the mark is still ahead.
CREATE TEMP TABLE o (ordering text);
INSERT INTO o VALUES ('none'), ('key'), ('partition');
CREATE FUNCTION pg_temp.invariants(ord text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    g text := 'o_' || ord;
    d text := 'd_' || ord;
BEGIN
    PERFORM rheo.create_group('s', g);
    PERFORM rheo.set_ordering('s', g, ord);
    PERFORM count(*) FROM rheo.fetch('s', g, 1, lease_ms => 60000, clock => '2030-01-01 00:00:00Z');
    RETURN NEXT is(pg_temp.mark(g, 0), '2030-01-01 00:01:00Z'::timestamptz, ord || ': the mark is a minute ahead');
    PERFORM rheo.retry(pg_temp.lease(g, 1), delay_ms => 0, clock => '2030-01-01 00:00:00Z');
    RETURN NEXT is((SELECT string_agg(sequence || ':' || attempt, ' ')
                      FROM rheo.fetch('s', g, 1, lease_ms => 60000, clock => '2030-01-01 00:00:00Z')),
                   '1:2', ord || ': a retry with delay 0 is claimable at once');
    PERFORM rheo.retry(pg_temp.lease(g, 1), delay_ms => 2000, clock => '2030-01-01 00:00:00Z');
    RETURN NEXT is((SELECT string_agg(sequence || ':' || attempt, ' ')
                      FROM rheo.fetch('s', g, 1, lease_ms => 1000, clock => '2030-01-01 00:00:02Z')),
                   '1:3', ord || ': a retry is claimable at the end of its delay');
    RETURN NEXT is((SELECT string_agg(sequence || ':' || attempt, ' ')
                      FROM rheo.fetch('s', g, 1, lease_ms => 1000, clock => '2030-01-01 00:00:03Z')),
                   '1:4', ord || ': an expired lease is claimed again at its expiry');
    PERFORM rheo.ack(pg_temp.lease(g, 1), clock => '2030-01-01 00:00:03Z');
    PERFORM rheo.replay('s', g, event_ids => ARRAY[(SELECT e.id FROM rheo.events e
                                                     WHERE e.stream = 's' AND e."partition" = 0 AND e.sequence = 1)],
                        clock => '2030-01-01 00:00:03Z');
    RETURN NEXT is((SELECT string_agg(sequence || ':' || attempt, ' ')
                      FROM rheo.fetch('s', g, 1, lease_ms => 60000, clock => '2030-01-01 00:00:03Z')),
                   '1:1', ord || ': a replayed event is claimable at once');
    PERFORM rheo.create_group('s', d, max_attempts => 1);
    PERFORM rheo.set_ordering('s', d, ord);
    PERFORM count(*) FROM rheo.fetch('s', d, 1, lease_ms => 60000, clock => '2030-01-01 00:00:00Z');
    PERFORM count(*) FROM rheo.fetch('s', d, 1, lease_ms => 60000, clock => '2030-01-01 00:00:30Z');
    RETURN NEXT is((SELECT count(*) FROM rheo.dead_letters x JOIN rheo.groups gr USING (group_id)
                     WHERE gr.group_name = d), 0::bigint, ord || ': nothing dead-lettered before the expiry');
    RETURN NEXT is((SELECT string_agg(sequence::text, ' ' ORDER BY sequence)
                      FROM rheo.fetch('s', d, 1, lease_ms => 60000, clock => '2030-01-01 00:01:00Z')),
                   CASE WHEN ord = 'partition' THEN '2' ELSE '3' END,
                   ord || ': at the expiry the fetch goes on past the leases it dead-letters');
    RETURN NEXT is((SELECT string_agg(x.sequence::text, ' ' ORDER BY x.sequence)
                      FROM rheo.dead_letters x JOIN rheo.groups gr USING (group_id) WHERE gr.group_name = d),
                   '1',
                   ord || ': a lease expired at the attempt limit is dead-lettered at its expiry');
END
$$;
SELECT pg_temp.invariants(ordering) FROM o;

SELECT * FROM finish();
ROLLBACK;
