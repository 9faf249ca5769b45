BEGIN;
SELECT plan(35);

-- The signature reference §3.3 pins.
SELECT has_function('rheo', 'set_ordering', ARRAY['text', 'text', 'text']::name[], 'rheo.set_ordering has the reference''s argument types');
SELECT function_returns('rheo', 'set_ordering', ARRAY['text', 'text', 'text']::name[], 'void', 'rheo.set_ordering returns void');

-- Stream s, one partition: keys a b a NULL a b.
SELECT rheo.create_stream('s', clock => '2030-01-01Z');
SELECT rheo.append('s', jsonb_build_object('n', x.n), key => x.k, clock => '2030-01-01Z')
  FROM (VALUES (1, 'a'), (2, 'b'), (3, 'a'), (4, NULL), (5, 'a'), (6, 'b')) AS x(n, k) ORDER BY x.n;
SELECT rheo.create_group('s', 'k', max_attempts => 2, ordering => 'key');
SELECT rheo.create_group('s', 'p', max_attempts => 2, ordering => 'partition');
SELECT rheo.create_group('s', 'n');

-- Errors, in the order of checks.
SELECT throws_ok($$SELECT rheo.set_ordering('missing', 'k', 'key')$$, 'RH001', 'stream_not_found', 'a missing stream');
SELECT throws_ok($$SELECT rheo.set_ordering('s', 'missing', 'bogus')$$, 'RH002', 'group_not_found', 'a missing group, before the word');
SELECT throws_ok($$SELECT rheo.set_ordering('s', 'k', 'keys')$$, 'RH011', 'invalid_argument', 'a word other than the three');
SELECT throws_ok($$SELECT rheo.set_ordering('s', 'k', NULL)$$, 'RH011', 'invalid_argument', 'NULL');

-- 'key': the first event of each key, and the keyless one; the later
-- events of a and b wait.
CREATE TEMP TABLE l1 AS SELECT * FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');
SELECT results_eq($$SELECT sequence, attempt FROM l1 ORDER BY sequence$$,
    $$VALUES (1::bigint, 1), (2, 1), (4, 1)$$,
    'key: one event per key at a time, keyless events unordered');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    'key: nothing more while each key has a lease in flight');
SELECT results_eq($$SELECT lag, inflight, pending_retry FROM rheo.group_info('s', 'k', clock => '2030-01-01 00:00:00Z')$$,
    $$VALUES (6::bigint, 3::bigint, 0::bigint)$$,
    'key: blocked events count in lag, neither in flight nor pending retry');
SELECT is_empty($$SELECT * FROM rheo.leases('s', 'k') WHERE sequence IN (3, 5, 6)$$,
    'key: blocked events are not listed among the leases');

SELECT rheo.ack((SELECT lease_id FROM l1 WHERE sequence = 4), clock => '2030-01-01 00:00:00Z');
SELECT rheo.ack((SELECT lease_id FROM l1 WHERE sequence = 1), clock => '2030-01-01 00:00:00Z');
CREATE TEMP TABLE l2 AS SELECT * FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');
SELECT results_eq($$SELECT sequence, attempt FROM l2$$, $$VALUES (3::bigint, 1)$$,
    'key: an ack lets the next event of its key in, at attempt 1');

SELECT is(rheo.retry((SELECT lease_id FROM l1 WHERE sequence = 2), delay_ms => 5000, clock => '2030-01-01 00:00:00Z'),
    'retrying', 'retry of b');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    'key: a retry waiting for its delay blocks its key');
CREATE TEMP TABLE l3 AS SELECT * FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 60000, clock => '2030-01-01 00:00:00.5Z');
SELECT is_empty($$SELECT * FROM l3$$, 'key: the lease of a in flight and the retry of b still block');
CREATE TEMP TABLE l4 AS SELECT * FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 60000, clock => '2030-01-01 00:00:05Z');
SELECT results_eq($$SELECT sequence, attempt FROM l4$$, $$VALUES (2::bigint, 2), (3, 2)$$,
    'key: the retry comes back before the later event of its key, and the expired lease of a is taken again');
SELECT rheo.reject((SELECT lease_id FROM l4 WHERE sequence = 2), clock => '2030-01-01 00:00:05Z');
CREATE TEMP TABLE l5 AS SELECT * FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:05Z');
SELECT results_eq($$SELECT sequence, attempt FROM l5$$, $$VALUES (6::bigint, 1)$$,
    'key: a dead letter by reject unblocks its key');

-- Sequence 3 is at its last attempt: when its lease expires, the fetch
-- that dead-letters it hands out the next event of a.
CREATE TEMP TABLE l6 AS SELECT * FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:02:00Z');
SELECT results_eq($$SELECT sequence, attempt FROM l6$$, $$VALUES (5::bigint, 1), (6, 2)$$,
    'key: the fetch that dead-letters an expired lease unblocks its key within that fetch');
SELECT results_eq($$SELECT sequence, reason FROM rheo.dead_letters('s', 'k')$$,
    $$VALUES (2::bigint, 'rejected'::text), (3, 'lease_expired')$$, 'key: the dead letters');

-- A later append of a key with a lease in flight waits; ack_batch wakes it.
SELECT rheo.append('s', '{"n": 7}', key => 'a', clock => '2030-01-01Z');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:02:00Z')$$,
    'key: a new event behind a lease in flight of its key waits');
SELECT rheo.ack_batch(ARRAY(SELECT lease_id FROM l6), clock => '2030-01-01 00:02:00Z');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('s', 'k', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:02:00Z')$$,
    $$VALUES (7::bigint, 1)$$, 'key: ack_batch unblocks');

-- 'partition': one event at a time, retries included.
CREATE TEMP TABLE p1 AS SELECT * FROM rheo.fetch('s', 'p', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');
SELECT results_eq($$SELECT sequence FROM p1$$, $$VALUES (1::bigint)$$, 'partition: one event');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'p', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    'partition: nothing while it is in flight');
SELECT is(rheo.retry((SELECT lease_id FROM p1), delay_ms => 1000, clock => '2030-01-01 00:00:00Z'), 'retrying', 'retry');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'p', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    'partition: nothing while the retry waits');
CREATE TEMP TABLE p2 AS SELECT * FROM rheo.fetch('s', 'p', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:01Z');
SELECT results_eq($$SELECT sequence, attempt FROM p2$$, $$VALUES (1::bigint, 2)$$, 'partition: the retry, alone');
CREATE TEMP TABLE p3 AS SELECT * FROM rheo.fetch('s', 'p', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:05Z');
SELECT results_eq($$SELECT sequence, attempt FROM p3$$, $$VALUES (2::bigint, 1)$$,
    'partition: the fetch that dead-letters the expired last attempt offers the next event');
SELECT rheo.ack((SELECT lease_id FROM p3), clock => '2030-01-01 00:00:05Z');
SELECT results_eq(
    $$SELECT sequence FROM rheo.fetch('s', 'p', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:05Z')$$,
    $$VALUES (3::bigint)$$, 'partition: an ack lets the next one in');

-- Changing the ordering: 'none' to 'key' with two leases of a in flight
-- keeps them; the next event of a waits for both.
CREATE TEMP TABLE n1 AS SELECT * FROM rheo.fetch('s', 'n', max_count => 3, lease_ms => 1000, clock => '2030-01-01 00:00:00Z');
SELECT results_eq($$SELECT sequence FROM n1$$, $$VALUES (1::bigint), (2), (3)$$, 'none: any number per key');
SELECT lives_ok($$SELECT rheo.set_ordering('s', 'n', 'key')$$, 'set_ordering to key');
SELECT is((SELECT ordering FROM rheo.list_groups('s') WHERE group_name = 'n'), 'key', 'the ordering is changed');
SELECT results_eq(
    $$SELECT sequence FROM rheo.fetch('s', 'n', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    $$VALUES (4::bigint)$$, 'key after none: the leases in flight are kept and block their keys');
SELECT rheo.ack((SELECT lease_id FROM n1 WHERE sequence = 1), clock => '2030-01-01 00:00:00Z');
SELECT is_empty($$SELECT * FROM rheo.fetch('s', 'n', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    'key after none: the next event of a waits for every earlier one');
SELECT rheo.ack((SELECT lease_id FROM n1 WHERE sequence = 3), clock => '2030-01-01 00:00:00Z');
SELECT results_eq(
    $$SELECT sequence FROM rheo.fetch('s', 'n', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    $$VALUES (5::bigint)$$, 'key after none: then it comes');

-- 'key' to 'none': the blocked events become claimable, attempt counting on.
SELECT lives_ok($$SELECT rheo.set_ordering('s', 'n', 'none')$$, 'set_ordering back to none');
SELECT results_eq(
    $$SELECT sequence, attempt FROM rheo.fetch('s', 'n', max_count => 10, lease_ms => 1000, clock => '2030-01-01 00:00:00Z')$$,
    $$VALUES (6::bigint, 1), (7, 1)$$, 'none after key: the blocked events are claimable');

SELECT * FROM finish();
ROLLBACK;
