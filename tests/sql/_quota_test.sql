BEGIN;
SELECT plan(2);

-- The cases of the quota rule, one row each: what each partition can give
-- (avail, in partition order), max_count, the rotation's starting index,
-- and the quotas dealt. driver/sqlite's TestQuota reads this same table
-- (the rows between the markers, one per line) and deals each case with
-- the SQLite driver's quota, so the two drivers follow one table.
CREATE TEMP TABLE cases (avail int[], max_count int, start int, quota int[]);
INSERT INTO cases VALUES
-- quota cases begin
    ('{3,3,3}', 5, 0, '{2,2,1}'),
    ('{3,3,3}', 5, 1, '{1,2,2}'),
    ('{3,3,3}', 5, 2, '{2,1,2}'),
    ('{1,5,5}', 7, 0, '{1,3,3}'),
    ('{1,5,5}', 6, 1, '{1,3,2}'),
    ('{0,4}', 3, 0, '{0,3}'),
    ('{2,2}', 10, 0, '{2,2}'),
    ('{2,2}', 4, 1, '{2,2}'),
    ('{10}', 3, 0, '{3}'),
    ('{1,1,1,1}', 2, 3, '{1,0,0,1}'),
    ('{5,0,5}', 4, 1, '{2,0,2}'),
    ('{5,1,5}', 4, 2, '{1,1,2}'),
    ('{9,1,1,9}', 10, 1, '{4,1,1,4}'),
    ('{9,1,1,9}', 9, 3, '{3,1,1,4}'),
    ('{}', 5, 0, '{}');
-- quota cases end

SELECT results_eq(
    $$SELECT c.avail, c.max_count, c.start, rheo._quota(c.avail, c.max_count, c.start) FROM cases c ORDER BY 1, 2, 3$$,
    $$SELECT c.avail, c.max_count, c.start, c.quota FROM cases c ORDER BY 1, 2, 3$$,
    '_quota deals every case of the table as the round-robin rule does');
SELECT is(
    (SELECT count(*) FROM generate_series(0, 2) s, generate_series(1, 30) m
      WHERE (SELECT sum(q) FROM unnest(rheo._quota('{7,0,3,12}', m, s)) q) <> least(m, 22)),
    0::bigint, '_quota deals max_count leases, or all there are when there are fewer');

SELECT * FROM finish();
ROLLBACK;
