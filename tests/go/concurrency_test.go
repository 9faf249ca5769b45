package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

// concTimeout bounds every concurrency test, so that a lost wakeup or a
// deadlock fails the test instead of hanging it.
const concTimeout = 2 * time.Minute

// TestConcurrentFetchAck drains a few thousand events with several
// competing consumers of one group, settling with rheo.ack, rheo.ack_batch
// and rheo.retry: no event is ever held by two consumers at once, every
// event is acked exactly once, and every frontier ends at its high
// watermark.
func TestConcurrentFetchAck(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 8, func(ctx context.Context, t *testing.T, pool *concDB) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()

		const (
			partitions = 4
			consumers  = 6
			retryEvery = 10 // the first lease of every 10th sequence is retried
		)
		events := pool.sized(3000, 1000) // a multiple of 500
		concExec(ctx, t, pool, `SELECT rheo.create_stream('work', $1)`, partitions)
		for first := 1; first <= events; first += 500 {
			concExec(ctx, t, pool, `
				SELECT count(*) FROM rheo.append_batch('work',
					(SELECT jsonb_agg(jsonb_build_object('n', n) ORDER BY n) FROM generate_series($1::int, $2::int) n),
					keys => (SELECT array_agg('key-' || n ORDER BY n) FROM generate_series($1::int, $2::int) n))`,
				first, first+499)
		}
		concExec(ctx, t, pool, `SELECT rheo.create_group('work', 'g')`)

		var (
			mu       sync.Mutex
			held     = map[concEvent]string{} // event → consumer holding its lease
			acked    = map[concEvent]int{}
			retried  = map[concEvent]bool{}
			problems []string
			settled  atomic.Int64
		)
		problem := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			problems = append(problems, fmt.Sprintf(format, args...))
		}

		// take records leases as held by name and splits them into those to
		// retry and those to ack.
		take := func(name string, leases []concLease) (toRetry, toAck []concLease) {
			mu.Lock()
			defer mu.Unlock()
			for _, l := range leases {
				e := l.event()
				if holder, ok := held[e]; ok {
					problems = append(problems, fmt.Sprintf("%v leased to %s while %s holds it", e, name, holder))
				}
				held[e] = name
				if l.Attempt != 1 && !(l.Attempt == 2 && retried[e]) {
					problems = append(problems, fmt.Sprintf("%v leased to %s at attempt %d", e, name, l.Attempt))
				}
				if l.Sequence%retryEvery == 0 && l.Attempt == 1 {
					retried[e] = true
					toRetry = append(toRetry, l)
				} else {
					acked[e]++
					toAck = append(toAck, l)
				}
			}
			return toRetry, toAck
		}
		// release forgets leases just before they are settled, so that held
		// never claims more than the database does.
		release := func(leases []concLease) {
			mu.Lock()
			defer mu.Unlock()
			for _, l := range leases {
				delete(held, l.event())
			}
		}

		// consume runs one consumer until every event is acked.
		consume := func(name string, useBatch bool) error {
			for settled.Load() < int64(events) {
				rows, _ := pool.Query(ctx, `
					SELECT lease_id::text, "partition", sequence, attempt
					  FROM rheo.fetch('work', 'g', max_count => 25, consumer_id => $1, lease_ms => 600000)`, name)
				leases, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
				if err != nil {
					return fmt.Errorf("%s: fetch: %w", name, err)
				}
				toRetry, toAck := take(name, leases)

				release(toRetry)
				for _, l := range toRetry {
					var outcome string
					if err := pool.QueryRow(ctx, `SELECT rheo.retry($1)`, l.LeaseID).Scan(&outcome); err != nil {
						return fmt.Errorf("%s: retry %v: %w", name, l.event(), err)
					}
					if outcome != string(rheo.Retrying) {
						problem("retry of %v returned %q", l.event(), outcome)
					}
				}

				release(toAck)
				switch {
				case len(toAck) == 0:
				case useBatch:
					ids := make([]string, len(toAck))
					for i, l := range toAck {
						ids[i] = l.LeaseID
					}
					rows, _ := pool.Query(ctx, `SELECT lease_id::text, ok FROM rheo.ack_batch($1::text[]::uuid[])`, ids)
					results, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concAckResult])
					if err != nil {
						return fmt.Errorf("%s: ack_batch: %w", name, err)
					}
					if len(results) != len(ids) {
						problem("ack_batch of %d leases returned %d rows", len(ids), len(results))
					}
					for _, r := range results {
						if !r.OK {
							problem("ack_batch found lease %s stale", r.LeaseID)
						}
					}
				default:
					for _, l := range toAck {
						if _, err := pool.Exec(ctx, `SELECT rheo.ack($1)`, l.LeaseID); err != nil {
							return fmt.Errorf("%s: ack %v: %w", name, l.event(), err)
						}
					}
				}
				settled.Add(int64(len(toAck)))
			}
			return nil
		}

		concRun(cancel, t, consumers, func(i int) error {
			return consume(fmt.Sprintf("consumer-%d", i), i%2 == 0)
		})
		assert.Empty(t, problems)
		if t.Failed() {
			return
		}

		assert.Len(t, acked, events, "%d distinct events acked, want %d", len(acked), events)
		for e, n := range acked {
			assert.Equal(t, 1, n, "%v acked %d times", e, n)
		}

		rows, _ := pool.Query(ctx, `SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('work', 'g')`)
		lags, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLag])
		require.NoError(t, err)
		var total, multiples int64
		for _, l := range lags {
			total += l.HighWatermark
			multiples += l.HighWatermark / retryEvery
			assert.True(t, l.Frontier == l.HighWatermark && l.Lag == 0, "partition %d: frontier %d, high watermark %d, lag %d; want the frontier at the high watermark",
				l.Partition, l.Frontier, l.HighWatermark, l.Lag)
		}
		assert.True(t, len(lags) == partitions && total == int64(events), "lag reports %d partitions holding %d events, want %d holding %d", len(lags), total, partitions, events)
		assert.Equal(t, multiples, int64(len(retried)), "%d events retried, want one per multiple of %d in each partition: %d", len(retried), retryEvery, multiples)
		var inflight, pending, dead int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT inflight, pending_retry, dead_letters FROM rheo.group_info('work', 'g')`).
			Scan(&inflight, &pending, &dead))
		assert.True(t, inflight == 0 && pending == 0 && dead == 0, "group_info: inflight %d, pending_retry %d, dead_letters %d; want all 0", inflight, pending, dead)
	})
}

// TestConcurrentExpiringLeases runs competing consumers whose leases
// expire while they work, on a logical clock that every fetch moves
// forward: settles race re-claims and dead-lettering on expiry. A settle
// may find its lease stale, but no call fails otherwise (no deadlock),
// every event ends acked once or dead-lettered, never both, and every
// frontier reaches its high watermark.
func TestConcurrentExpiringLeases(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 8, func(ctx context.Context, t *testing.T, pool *concDB) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()

		events := pool.sized(2000, 600)
		const (
			partitions = 4
			consumers  = 6
			leaseMS    = 3 // a lease outlives about three fetches
			retryEvery = 7 // every 7th sequence is retried on each attempt
		)
		concExec(ctx, t, pool, `SELECT rheo.create_stream('exp', $1)`, partitions)
		concExec(ctx, t, pool, `
			SELECT count(*) FROM rheo.append_batch('exp',
				(SELECT jsonb_agg(jsonb_build_object('n', n) ORDER BY n) FROM generate_series(1, $1::int) n),
				keys => (SELECT array_agg('key-' || n ORDER BY n) FROM generate_series(1, $1::int) n))`, events)
		concExec(ctx, t, pool, `SELECT rheo.create_group('exp', 'g', max_attempts => 3)`)

		start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		var ticks atomic.Int64
		now := func() time.Time { return start.Add(time.Duration(ticks.Load()) * time.Millisecond) }
		tick := func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }

		var (
			mu    sync.Mutex
			acked = map[concEvent]int{}
		)
		ackedOK := func(e concEvent) {
			mu.Lock()
			defer mu.Unlock()
			acked[e]++
		}

		consume := func(name string, useBatch bool) error {
			for {
				rows, _ := pool.Query(ctx, `
					SELECT lease_id::text, "partition", sequence, attempt
					  FROM rheo.fetch('exp', 'g', max_count => 20, consumer_id => $1, lease_ms => $2, clock => $3)`,
					name, leaseMS, tick())
				leases, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
				if err != nil {
					return fmt.Errorf("%s: fetch: %w", name, err)
				}
				if len(leases) == 0 {
					var lag int64
					if err := pool.QueryRow(ctx, `SELECT sum(lag) FROM rheo.lag('exp', 'g')`).Scan(&lag); err != nil {
						return fmt.Errorf("%s: lag: %w", name, err)
					}
					if lag == 0 {
						return nil
					}
					continue
				}

				var toAck []concLease
				for _, l := range leases {
					if l.Sequence%retryEvery != 0 {
						toAck = append(toAck, l)
						continue
					}
					var outcome string
					err := pool.QueryRow(ctx, `SELECT rheo.retry($1, clock => $2)`, l.LeaseID, now()).Scan(&outcome)
					switch {
					case concIsStale(err):
					case err != nil:
						return fmt.Errorf("%s: retry %v: %w", name, l.event(), err)
					case outcome != string(rheo.Retrying) && outcome != string(rheo.DeadLettered):
						return fmt.Errorf("%s: retry %v returned %q", name, l.event(), outcome)
					}
				}

				if useBatch && len(toAck) > 0 {
					ids := make([]string, len(toAck))
					for i, l := range toAck {
						ids[i] = l.LeaseID
					}
					rows, _ := pool.Query(ctx, `SELECT lease_id::text, ok FROM rheo.ack_batch($1::text[]::uuid[], clock => $2)`, ids, now())
					results, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concAckResult])
					if err != nil {
						return fmt.Errorf("%s: ack_batch: %w", name, err)
					}
					if len(results) != len(ids) {
						return fmt.Errorf("%s: ack_batch of %d leases returned %d rows", name, len(ids), len(results))
					}
					for i, r := range results {
						if r.LeaseID != ids[i] {
							return fmt.Errorf("%s: ack_batch row %d is lease %s, want %s", name, i, r.LeaseID, ids[i])
						}
						if r.OK {
							ackedOK(toAck[i].event())
						}
					}
					continue
				}
				for _, l := range toAck {
					_, err := pool.Exec(ctx, `SELECT rheo.ack($1, clock => $2)`, l.LeaseID, now())
					switch {
					case err == nil:
						ackedOK(l.event())
					case !concIsStale(err):
						return fmt.Errorf("%s: ack %v: %w", name, l.event(), err)
					}
				}
			}
		}
		concRun(cancel, t, consumers, func(i int) error {
			return consume(fmt.Sprintf("consumer-%d", i), i%2 == 0)
		})
		if t.Failed() {
			return
		}

		rows, _ := pool.Query(ctx, `SELECT "partition", sequence FROM rheo.dead_letters('exp', 'g', max_count => $1)`, events)
		dead, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concEvent])
		require.NoError(t, err)
		for e, n := range acked {
			assert.Equal(t, 1, n, "%v acked %d times", e, n)
		}
		for _, e := range dead {
			assert.Equal(t, 0, acked[e], "%v is both acked and dead-lettered", e)
		}
		assert.Equal(t, events, len(acked)+len(dead), "%d events acked and %d dead-lettered, want %d in all", len(acked), len(dead), events)
		assert.NotEmpty(t, dead, "no event was dead-lettered: the test did not exercise expiry at the attempt limit")
		rows, _ = pool.Query(ctx, `SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('exp', 'g')`)
		lags, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLag])
		require.NoError(t, err)
		for _, l := range lags {
			assert.Equal(t, l.HighWatermark, l.Frontier, "partition %d: frontier %d, high watermark %d", l.Partition, l.Frontier, l.HighWatermark)
		}
	})
}

// TestConcurrentFetchInTransaction runs a fetch inside a transaction that
// stays open while another consumer fetches from the same partition: the
// claim holds until the transaction ends. Committed, its leases stand and
// the other consumer gets the rest; rolled back, nothing was claimed and
// the other consumer gets everything at attempt 1.
func TestConcurrentFetchInTransaction(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		for _, tc := range []struct {
			name      string
			commit    bool
			wantOther []concEvent
		}{
			{name: "committed", commit: true, wantOther: []concEvent{{0, 3}, {0, 4}}},
			{name: "rolled back", commit: false, wantOther: []concEvent{{0, 1}, {0, 2}, {0, 3}, {0, 4}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				stream := "tx-" + strings.ReplaceAll(tc.name, " ", "-")
				concExec(ctx, t, pool, `SELECT rheo.create_stream($1)`, stream)
				concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch($1, '[{}, {}, {}, {}]')`, stream)
				concExec(ctx, t, pool, `SELECT rheo.create_group($1, 'g')`, stream)
				const fetch = `SELECT lease_id::text, "partition", sequence, attempt FROM rheo.fetch($1, 'g', max_count => $2)`

				tx, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer tx.Rollback(context.WithoutCancel(ctx))
				rows, _ := tx.Query(ctx, fetch, stream, 2)
				mine, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
				require.NoError(t, err)
				require.True(t, len(mine) == 2 && mine[0].Sequence == 1 && mine[1].Sequence == 2, "the first fetch got %v, want sequences 1 and 2", mine)

				other, err := pool.Acquire(ctx)
				require.NoError(t, err)
				defer other.Release()
				var theirs []concLease
				done := make(chan error, 1)
				go func() {
					rows, _ := other.Query(ctx, fetch, stream, 10)
					var err error
					theirs, err = pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
					done <- err
				}()
				concWaitForLock(ctx, t, pool, other.Conn().PgConn().PID())

				if tc.commit {
					err = tx.Commit(ctx)
				} else {
					err = tx.Rollback(ctx)
				}
				require.NoError(t, err)
				require.NoError(t, <-done, "the other fetch")
				var got []concEvent
				for _, l := range theirs {
					got = append(got, l.event())
					assert.Equal(t, 1, l.Attempt, "the other fetch got %v at attempt %d, want 1", l.event(), l.Attempt)
				}
				assert.Equal(t, fmt.Sprint(tc.wantOther), fmt.Sprint(got), "the other fetch got %v, want %v", got, tc.wantOther)
				_, err = pool.Exec(ctx, `SELECT rheo.ack($1)`, mine[0].LeaseID)
				if tc.commit {
					assert.NoError(t, err, "ack of a committed claim")
				} else {
					assert.True(t, concIsStale(err), "ack of a rolled-back claim: %v, want stale_lease (RH004)", err)
				}
			})
		}
	})
}

// TestConcurrentLateCommit checks that commit order is sequence order: a
// reader that follows a partition by "last sequence seen" never sees a
// later append before an earlier one that commits late.
func TestConcurrentLateCommit(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {
		concExec(ctx, t, pool, `SELECT rheo.create_stream('late')`)

		// The reader polls by cursor from the start until it has seen B's event.
		type seenEvent struct {
			Sequence int64
			Writer   string
		}
		var seen []seenEvent
		readerDone := make(chan error, 1)
		go func() {
			var after int64
			for {
				rows, _ := pool.Query(ctx, `SELECT sequence, payload->>'writer' FROM rheo.read('late', after => $1)`, after)
				batch, err := pgx.CollectRows(rows, pgx.RowToStructByPos[seenEvent])
				if err != nil {
					readerDone <- err
					return
				}
				for _, e := range batch {
					seen = append(seen, e)
					after = e.Sequence
					if e.Writer == "B" {
						readerDone <- nil
						return
					}
				}
			}
		}()

		// A appends and stays open.
		txA, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer txA.Rollback(context.WithoutCancel(ctx))
		var seqA int64
		require.NoError(t, txA.QueryRow(ctx, `SELECT sequence FROM rheo.append('late', '{"writer": "A"}')`).Scan(&seqA))

		// B appends to the same partition and must wait for A.
		connB, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer connB.Release()
		pidB := connB.Conn().PgConn().PID()
		var seqB int64
		doneB := make(chan error, 1)
		go func() {
			doneB <- connB.QueryRow(ctx, `SELECT sequence FROM rheo.append('late', '{"writer": "B"}')`).Scan(&seqB)
		}()
		concWaitForLock(ctx, t, pool, pidB)
		select {
		case err := <-doneB:
			require.FailNow(t, fmt.Sprintf("B's append returned (%v) while A's transaction was open", err))
		default:
		}

		require.NoError(t, txA.Commit(ctx))
		require.NoError(t, <-doneB, "B's append")
		require.NoError(t, <-readerDone, "reader")
		assert.Equal(t, []int64{1, 2}, []int64{seqA, seqB}, "A got sequence %d and B %d, want 1 and 2", seqA, seqB)
		want := []seenEvent{{1, "A"}, {2, "B"}}
		assert.Equal(t, fmt.Sprint(want), fmt.Sprint(seen), "the reader saw %v, want %v", seen, want)
	})
}

// TestConcurrentAppendSameID appends one id from two transactions at once:
// the loser waits for the winner and then behaves like a later repeat. It
// returns the stored event and allocates nothing when the content is the
// same, and fails already_exists when it is not.
func TestConcurrentAppendSameID(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		// Each case appends to a fresh stream of two partitions: the winner
		// appends {"v": 1} with id "x" to partition 0, then the loser its own.
		const winner = `SELECT "partition", sequence FROM rheo.append($1, '{"v": 1}', "partition" => 0, id => 'x')`
		for i, tc := range []struct {
			name       string
			loser      string
			wantRepeat bool
		}{
			{
				name:       "same content into the same partition",
				loser:      winner,
				wantRepeat: true,
			},
			{
				name:       "same content with another explicit partition",
				loser:      `SELECT "partition", sequence FROM rheo.append($1, '{"v": 1}', "partition" => 1, id => 'x')`,
				wantRepeat: true,
			},
			{
				name:       "other content",
				loser:      `SELECT "partition", sequence FROM rheo.append($1, '{"v": 2}', "partition" => 0, id => 'x')`,
				wantRepeat: false,
			},
		} {
			t.Run(tc.name, func(t *testing.T) {
				stream := fmt.Sprintf("ids-%d", i)
				concExec(ctx, t, pool, `SELECT rheo.create_stream($1, 2)`, stream)
				tx, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer tx.Rollback(context.WithoutCancel(ctx))
				var first concEvent
				require.NoError(t, tx.QueryRow(ctx, winner, stream).Scan(&first.Partition, &first.Sequence))

				conn, err := pool.Acquire(ctx)
				require.NoError(t, err)
				defer conn.Release()
				var second concEvent
				done := make(chan error, 1)
				go func() {
					done <- conn.QueryRow(ctx, tc.loser, stream).Scan(&second.Partition, &second.Sequence)
				}()
				concWaitForLock(ctx, t, pool, conn.Conn().PgConn().PID())
				require.NoError(t, tx.Commit(ctx))
				err = <-done

				var pgErr *pgconn.PgError
				if tc.wantRepeat {
					require.NoError(t, err, "the loser's append: want the stored event")
					assert.Equal(t, first, second, "the loser's append returned %v, want the stored %v", second, first)
				} else {
					assert.True(t, errors.As(err, &pgErr) && pgErr.Code == rheo.ErrAlreadyExists.Code, "the loser's append: %v, want already_exists (RH003)", err)
				}

				var stored int64
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rheo.events WHERE stream = $1`, stream).Scan(&stored))
				assert.Equal(t, int64(1), stored, "%d events stored, want 1", stored)
				for p, want := range []int64{2, 1} {
					var seq int64
					require.NoError(t, pool.QueryRow(ctx, `SELECT sequence FROM rheo.append($1, '{}', "partition" => $2)`, stream, p).Scan(&seq))
					assert.Equal(t, want, seq, "the next append to partition %d got sequence %d, want %d: the loser allocated a sequence", p, seq, want)
				}
			})
		}
	})
}

// TestConcurrentAppendBatchOfHeldIDs appends a batch of three ids that
// three producers have appended and not yet committed. The batch meets
// them one at a time: each producer's commit turns one of its inserts
// into a unique violation, after which it must look again and go on. It
// ends as a repeat of all three: the stored events come back and nothing
// is allocated.
func TestConcurrentAppendBatchOfHeldIDs(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 6, func(ctx context.Context, t *testing.T, pool *concDB) {
		concExec(ctx, t, pool, `SELECT rheo.create_stream('held', 4)`)

		// Producer i holds id i in partition i, uncommitted.
		type producer struct {
			tx  pgx.Tx
			pid uint32
			ev  concEvent
		}
		var producers []producer
		for i := range 3 {
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer tx.Rollback(context.WithoutCancel(ctx))
			p := producer{tx: tx, pid: tx.Conn().PgConn().PID()}
			require.NoError(t, tx.QueryRow(ctx, `SELECT "partition", sequence FROM rheo.append('held', '{"v": 1}', "partition" => $1, id => $2)`,
				i, fmt.Sprint("id-", i)).Scan(&p.ev.Partition, &p.ev.Sequence))
			producers = append(producers, p)
		}

		// The batch goes to partition 3, whose allocator nobody holds, so it
		// reaches its inserts at once.
		var got []concEvent
		batch := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			rows, _ := conn.Query(ctx, `SELECT "partition", sequence FROM rheo.append_batch('held', '[{"v": 1}, {"v": 1}, {"v": 1}]',
				ids => '{id-0,id-1,id-2}', "partition" => 3)`)
			var err error
			got, err = pgx.CollectRows(rows, pgx.RowToStructByPos[concEvent])
			return err
		})
		for _, p := range producers {
			concWaitForBlocker(ctx, t, pool, batch.pid, p.pid)
			require.NoError(t, p.tx.Commit(ctx))
		}
		require.NoError(t, batch.wait(), "the batch: want the three stored events")
		want := []concEvent{producers[0].ev, producers[1].ev, producers[2].ev}
		assert.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "the batch returned %v, want the stored %v", got, want)
		var next int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT sequence FROM rheo.append('held', '{}', "partition" => 3)`).Scan(&next))
		assert.Equal(t, int64(1), next, "the next append to partition 3 got sequence %d, want 1: the batch allocated", next)
	})
}

// TestConcurrentAppendSameIDRepeatableRead appends, in a repeatable read
// transaction, an id that another transaction appended and committed
// after the first took its snapshot. The stored event is not in the
// snapshot, so it cannot be returned: the append fails with a
// serialization failure (40001), as any write conflict does at that
// level, and the transaction's retry is a plain repeat. Into the same
// partition the conflict is the allocator's row, which PostgreSQL itself
// reports; into another, the id.
func TestConcurrentAppendSameIDRepeatableRead(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		for i, tc := range []struct {
			name    string
			twin    string
			message string
		}{
			{"into the same partition", `SELECT sequence FROM rheo.append($1, '{"v": 1}', "partition" => 0, id => 'x')`,
				"could not serialize access due to concurrent update"},
			{"into another partition", `SELECT sequence FROM rheo.append($1, '{"v": 1}', "partition" => 1, id => 'x')`,
				"could not serialize access due to a concurrent append of the same event id"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				stream := fmt.Sprint("rr-", i)
				concExec(ctx, t, pool, `SELECT rheo.create_stream($1, 2)`, stream)
				const appendX = `SELECT sequence FROM rheo.append($1, '{"v": 1}', "partition" => 0, id => 'x')`

				tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
				require.NoError(t, err)
				defer tx.Rollback(context.WithoutCancel(ctx))
				// Takes the snapshot. On Citus a transaction has a snapshot on
				// each node, of each role, it reaches, taken there when it
				// first does: a read of Rheo's, as Rheo's owner on the
				// stream's node, takes the one the append then works in.
				_, err = tx.Exec(ctx, `SELECT count(*) FROM rheo.read($1)`, stream)
				require.NoError(t, err)
				var stored int64
				require.NoError(t, pool.QueryRow(ctx, tc.twin, stream).Scan(&stored))

				var seq int64
				err = tx.QueryRow(ctx, appendX, stream).Scan(&seq)
				var pgErr *pgconn.PgError
				require.True(t, errors.As(err, &pgErr) && pgErr.Code == "40001" && pgErr.Message == tc.message, "the repeatable read append: %v, want 40001 %s", err, tc.message)
				_ = tx.Rollback(ctx)

				retry, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
				require.NoError(t, err)
				defer retry.Rollback(context.WithoutCancel(ctx))
				require.NoError(t, retry.QueryRow(ctx, appendX, stream).Scan(&seq), "the retried append")
				assert.Equal(t, stored, seq, "the retried append returned sequence %d, want the stored %d", seq, stored)
				require.NoError(t, retry.Commit(ctx))
			})
		}
	})
}

// TestConcurrentAckSameLease races two acks of one lease from two
// connections: exactly one wins and the other is stale_lease. It also
// holds the first ack's transaction open so that the second must wait for
// its outcome: a commit makes the second stale, a rollback lets it win.
func TestConcurrentAckSameLease(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 6, func(ctx context.Context, t *testing.T, pool *concDB) {

		const races = 40
		concExec(ctx, t, pool, `SELECT rheo.create_stream('dup')`)
		concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch('dup', (SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, $1::int) n))`, races+2)
		concExec(ctx, t, pool, `SELECT rheo.create_group('dup', 'g')`)
		rows, _ := pool.Query(ctx, `SELECT lease_id::text FROM rheo.fetch('dup', 'g', max_count => $1, lease_ms => 600000)`, races+2)
		leases, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Len(t, leases, races+2, "fetched %d leases, want %d", len(leases), races+2)

		t.Run("racing acks", func(t *testing.T) {
			for _, id := range leases[:races] {
				start := make(chan struct{})
				results := make(chan error, 2)
				for range 2 {
					go func() {
						<-start
						_, err := pool.Exec(ctx, `SELECT rheo.ack($1)`, id)
						results <- err
					}()
				}
				close(start)
				concOneWinsOneStale(t, id, <-results, <-results)
			}
		})

		for _, tc := range []struct {
			name      string
			commit    bool
			lease     string
			wantStale bool
		}{
			{name: "second ack waits for the first to commit, then is stale", commit: true, lease: leases[races], wantStale: true},
			{name: "second ack waits for the first to roll back, then wins", commit: false, lease: leases[races+1], wantStale: false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tx, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer tx.Rollback(context.WithoutCancel(ctx))
				_, err = tx.Exec(ctx, `SELECT rheo.ack($1)`, tc.lease)
				require.NoError(t, err, "first ack")

				second, err := pool.Acquire(ctx)
				require.NoError(t, err)
				defer second.Release()
				done := make(chan error, 1)
				go func() {
					_, err := second.Exec(ctx, `SELECT rheo.ack($1)`, tc.lease)
					done <- err
				}()
				concWaitForLock(ctx, t, pool, second.Conn().PgConn().PID())

				if tc.commit {
					err = tx.Commit(ctx)
				} else {
					err = tx.Rollback(ctx)
				}
				require.NoError(t, err)
				err = <-done
				if tc.wantStale {
					assert.True(t, concIsStale(err), "second ack after the first committed: got %v, want stale_lease (RH004)", err)
				} else {
					assert.NoError(t, err, "second ack after the first rolled back: want success")
				}
			})
		}

		var frontier int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT frontier FROM rheo.lag('dup', 'g')`).Scan(&frontier))
		assert.Equal(t, int64(races+2), frontier, "frontier %d after acking every lease, want %d", frontier, races+2)
	})
}

// TestConcurrentFetchDuringReplay interleaves a fetch with a replay or
// reset of its group, one step at a time, in the order that used to
// deadlock: the replay holds partition 0's cursor while the fetch meets
// a lease expired at the attempt limit in partition 1 and finds no
// partition with work it can lock; then the replay goes on to partition
// 1. The fetch must never hold a delivery while it waits for a cursor,
// so both finish, neither with 40P01, and the expired lease is a dead
// letter once.
func TestConcurrentFetchDuringReplay(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		for _, tc := range []struct {
			name          string
			first, second string // statements of the replaying transaction, on partitions 0 then 1
		}{
			{"replay", `SELECT rheo.replay($1, 'g', from_sequence => 0, partitions => '{0}', clock => '2030-01-01 01:00Z')`,
				`SELECT rheo.replay($1, 'g', from_sequence => 0, partitions => '{1}', clock => '2030-01-01 01:00Z')`},
			{"reset_group", `SELECT rheo.reset_group($1, 'g', confirm => true, partitions => '{0}', clock => '2030-01-01 01:00Z')`,
				`SELECT rheo.reset_group($1, 'g', confirm => true, partitions => '{1}', clock => '2030-01-01 01:00Z')`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				stream := "interleaved-" + tc.name
				concExec(ctx, t, pool, `SELECT rheo.create_stream($1, 2)`, stream)
				concExec(ctx, t, pool, `SELECT rheo.create_group($1, 'g', max_attempts => 1)`, stream)
				// Partition 1: a lease at its only attempt, expired by 01:00.
				concExec(ctx, t, pool, `SELECT rheo.append($1, '{}', "partition" => 1)`, stream)
				concExec(ctx, t, pool, `SELECT count(*) FROM rheo.fetch($1, 'g', partitions => '{1}', lease_ms => 1000,
					clock => '2030-01-01 00:00Z')`, stream)
				// Partition 0: one event leased, one not offered yet: work the
				// fetch would wait for.
				concExec(ctx, t, pool, `SELECT rheo.append($1, '{}', "partition" => 0)`, stream)
				concExec(ctx, t, pool, `SELECT count(*) FROM rheo.fetch($1, 'g', partitions => '{0}', lease_ms => 1000,
					clock => '2030-01-01 00:00Z')`, stream)
				concExec(ctx, t, pool, `SELECT rheo.append($1, '{}', "partition" => 0)`, stream)

				// 1. The replaying transaction holds partition 0's cursor.
				tx, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer tx.Rollback(context.WithoutCancel(ctx))
				_, err = tx.Exec(ctx, tc.first, stream)
				require.NoError(t, err)

				// 2. A fetch covers both partitions: partition 0 is held, and
				// partition 1 has only the expired lease.
				fetch := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
					_, err := conn.Exec(ctx, `SELECT count(*) FROM rheo.fetch($1, 'g', clock => '2030-01-01 01:00Z')`, stream)
					return err
				})
				// It either returns or waits, for partition 0 at most.
				concFinishedOrWaiting(ctx, t, pool, fetch)

				// 3. The replaying transaction goes on to partition 1, then commits.
				_, err = tx.Exec(ctx, tc.second, stream)
				require.NoError(t, err, "%s of partition 1 while a fetch runs", tc.name)
				require.NoError(t, tx.Commit(ctx))
				require.NoError(t, fetch.wait(), "fetch")
			})
		}
	})
}

// TestConcurrentAckBatchDuringReplay settles three leases x, y, h in
// one ack_batch while a replay of their group runs, with a third
// transaction holding h's delivery so that both statements stop half
// way. x, of sequence 1, was leased again, so its delivery row now lies
// after those of y and h (sequences 27 and 28) in the table: a batch that
// locked its deliveries in the order it finds them would hold y and wait
// for h while the replay, locking in sequence order, held x and waited
// for y, and the two would deadlock once h is let go. ack_batch locks
// them in primary key order, as replay does, so one waits for the other
// and both finish.
func TestConcurrentAckBatchDuringReplay(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 5, func(ctx context.Context, t *testing.T, pool *concDB) {

		concExec(ctx, t, pool, `SELECT rheo.create_stream('churn')`)
		concExec(ctx, t, pool, `SELECT rheo.create_group('churn', 'g')`)
		concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch('churn',
			(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 50) n))`)
		fetch := func(max int) []string {
			rows, _ := pool.Query(ctx, `SELECT lease_id::text FROM rheo.fetch('churn', 'g', max_count => $1, lease_ms => 3600000)`, max)
			leases, err := pgx.CollectRows(rows, pgx.RowTo[string]) // in sequence order
			require.NoError(t, err)
			return leases
		}
		first := fetch(50)
		for _, lease := range first[:25] {
			concExec(ctx, t, pool, `SELECT rheo.retry($1)`, lease)
		}
		again := fetch(25) // sequences 1-25, their rows rewritten
		picked := []string{again[0], first[26], first[27]}
		var inTableOrder bool
		require.NoError(t, pool.QueryRow(ctx, `
			SELECT (SELECT ctid FROM rheo.deliveries WHERE lease_id = $2) < (SELECT ctid FROM rheo.deliveries WHERE lease_id = $3)
			   AND (SELECT ctid FROM rheo.deliveries WHERE lease_id = $3) < (SELECT ctid FROM rheo.deliveries WHERE lease_id = $1)`,
			picked[0], picked[1], picked[2]).Scan(&inTableOrder))
		require.True(t, inTableOrder, "the setup did not place x's delivery row after y's and h's")

		holder, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer holder.Rollback(context.WithoutCancel(ctx))
		_, err = holder.Exec(ctx, `SELECT 1 FROM rheo.deliveries WHERE stream = 'churn' AND lease_id = $1 FOR UPDATE`, picked[2])
		require.NoError(t, err)

		var oks []bool
		ack := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			rows, _ := conn.Query(ctx, `SELECT ok FROM rheo.ack_batch($1::uuid[])`, picked)
			var err error
			oks, err = pgx.CollectRows(rows, pgx.RowTo[bool])
			return err
		})
		concWaitForLock(ctx, t, pool, ack.pid)
		replay := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			_, err := conn.Exec(ctx, `SELECT rheo.replay('churn', 'g', from_sequence => 0)`)
			return err
		})
		concWaitForLock(ctx, t, pool, replay.pid)

		require.NoError(t, holder.Commit(ctx))
		assert.NoError(t, ack.wait(), "ack_batch")
		assert.NoError(t, replay.wait(), "replay")
		assert.Equal(t, []bool{true, true, true}, oks, "ack_batch reported %v, want all three settled: it held the first before the replay could", oks)
	})
}

// TestConcurrentDropStreamDuringAppends drops a stream while a
// transaction appending to it is in progress and another append starts
// during the drop: the drop waits for the transaction, which appends
// again meanwhile (checking its foreign key to the stream's row, which
// the drop must not hold against it), then deletes its events with the
// others, and the late append finds no stream (stream_not_found, not a
// raw error), so that no event outlives its stream.
func TestConcurrentDropStreamDuringAppends(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 5, func(ctx context.Context, t *testing.T, pool *concDB) {
		concExec(ctx, t, pool, `SELECT rheo.create_stream('doomed')`)
		concExec(ctx, t, pool, `SELECT rheo.append('doomed', '{}')`)

		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.WithoutCancel(ctx))
		_, err = tx.Exec(ctx, `SELECT rheo.append('doomed', '{"in": "progress"}')`)
		require.NoError(t, err)

		var deleted int64
		drop := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			return conn.QueryRow(ctx, `SELECT rheo.drop_stream('doomed', confirm => true)`).Scan(&deleted)
		})
		concWaitForLock(ctx, t, pool, drop.pid)
		late := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			_, err := conn.Exec(ctx, `SELECT rheo.append('doomed', '{"late": true}')`)
			return err
		})
		_, err = tx.Exec(ctx, `SELECT rheo.append('doomed', '{"in": "progress", "again": true}')`)
		require.NoError(t, err, "the second append of the transaction the drop waits for")
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, drop.wait(), "drop_stream")
		err = late.wait()
		var pgErr *pgconn.PgError
		assert.False(t, err != nil && !(errors.As(err, &pgErr) && pgErr.Code == rheo.ErrStreamNotFound.Code), "the append that met the drop: %v, want success before it or stream_not_found", err)
		// The late append waits for the partition's row like the drop does; it
		// may take it first, and then its event is dropped with the others.
		want := int64(3)
		if err == nil {
			want = 4
		}
		assert.Equal(t, want, deleted, "drop_stream deleted %d events, want %d: the two in progress too (late append error: %v)", deleted, want, err)
		var left int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rheo.events WHERE stream = 'doomed'`).Scan(&left))
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM rheo.streams WHERE stream = 'doomed')`).Scan(&exists))
		assert.True(t, left == 0 || exists, "%d events outlive their dropped stream", left)
	})
}

// TestConcurrentFetchDuringPrune fetches from a partition while a prune
// of it is in progress: the prune holds the partition's cursors against
// replays and resets only, so the fetch takes the events past the cursor
// at once instead of waiting for the prune's commit.
func TestConcurrentFetchDuringPrune(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 3, func(ctx context.Context, t *testing.T, pool *concDB) {
		tx := concPruneUncommitted(ctx, t, pool, "pruned_while_read", 6)
		defer tx.Rollback(context.WithoutCancel(ctx))

		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		// A fetch that waited for the prune would fail here, not hang.
		_, err = conn.Exec(ctx, `SET lock_timeout = '10s'`)
		require.NoError(t, err)
		rows, _ := conn.Query(ctx, `SELECT sequence FROM rheo.fetch('pruned_while_read', 'g', max_count => 10)`)
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err, "fetch during the prune")
		assert.Equal(t, []int64{7, 8, 9, 10}, got, "fetch during the prune returned %v, want [7 8 9 10]", got)
		require.NoError(t, tx.Commit(ctx))
	})
}

// TestConcurrentReplayDuringPrune replays a group while a prune of its
// stream is in progress: the replay waits for the prune's cursor locks
// and then rewinds to the new low watermark, never below it, so that its
// cursor never points at pruned events.
func TestConcurrentReplayDuringPrune(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {
		tx := concPruneUncommitted(ctx, t, pool, "aging", 10)
		defer tx.Rollback(context.WithoutCancel(ctx))

		var reopened int64
		replay := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			return conn.QueryRow(ctx, `SELECT rheo.replay('aging', 'g', from_sequence => 0)`).Scan(&reopened)
		})
		concWaitForLock(ctx, t, pool, replay.pid)
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, replay.wait(), "replay")
		var next int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT c.next_sequence FROM rheo.cursors c JOIN rheo.groups g USING (stream, group_id)
			WHERE g.stream = 'aging' AND g.group_name = 'g'`).Scan(&next))
		assert.True(t, next == 11 && reopened == 0, "after the replay the cursor is at %d and %d events were reopened, want 11 and 0: it went below the low watermark", next, reopened)
		concExec(ctx, t, pool, `SELECT rheo.append('aging', '{}')`)
		rows, _ := pool.Query(ctx, `SELECT sequence FROM rheo.fetch('aging', 'g')`)
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		assert.Equal(t, []int64{11}, got, "fetch after the prune and replay returned %v, want [11]", got)
	})
}

// TestConcurrentPruneDuringAppendTransaction prunes a stream while a
// transaction appends to it twice, the second time once the prune waits
// for its partition: the second update of the partition's row in one
// transaction checks the foreign key to the stream's catalog row, which
// the prune does not lock (it holds the stream's lock row), so the append
// goes on, the prune finishes after its commit, and neither fails with
// 40P01 (deadlock detected).
func TestConcurrentPruneDuringAppendTransaction(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {
		concExec(ctx, t, pool, `SELECT rheo.create_stream('outbox')`)
		concExec(ctx, t, pool, `SELECT rheo.set_retention('outbox', '1 hour')`)
		concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch('outbox',
			(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 10) n), clock => '2030-01-01 00:00Z')`)

		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.WithoutCancel(ctx))
		_, err = tx.Exec(ctx, `SELECT rheo.append('outbox', '{"n": 11}', clock => '2030-01-01 02:00Z')`)
		require.NoError(t, err)
		var pruned int64
		prune := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			return conn.QueryRow(ctx, `SELECT rheo.prune('outbox', clock => '2030-01-01 02:00Z')`).Scan(&pruned)
		})
		concWaitForLock(ctx, t, pool, prune.pid)
		_, err = tx.Exec(ctx, `SELECT rheo.append('outbox', '{"n": 12}', clock => '2030-01-01 02:00Z')`)
		require.NoError(t, err, "the second append of the transaction the prune waits for")
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, prune.wait(), "prune")
		assert.Equal(t, int64(10), pruned, "pruned %d events, want the 10 aged ones", pruned)
		var low, high int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT low_watermark, high_watermark FROM rheo.stream_info('outbox')`).Scan(&low, &high))
		var kept []int64
		rows, _ := pool.Query(ctx, `SELECT sequence FROM rheo.events WHERE stream = 'outbox' ORDER BY sequence`)
		kept, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		assert.True(t, low == 11 && high == 12 && slices.Equal(kept, []int64{11, 12}), "after the prune: low %d, high %d, events %v; want 11, 12, [11 12]", low, high, kept)
	})
}

// TestConcurrentCreateGroupDuringPrune creates a group while a prune of
// its stream is in progress: the creation waits for the prune and places
// the new group's cursor at the new low watermark, never at events the
// prune deleted. A group of another stream is created meanwhile without
// waiting.
func TestConcurrentCreateGroupDuringPrune(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {
		concExec(ctx, t, pool, `SELECT rheo.create_stream('young')`)
		concExec(ctx, t, pool, `SELECT rheo.create_stream('other')`)
		concExec(ctx, t, pool, `SELECT rheo.set_retention('young', '1 hour')`)
		concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch('young',
			(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 10) n), clock => '2030-01-01 00:00Z')`)

		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.WithoutCancel(ctx))
		var pruned int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT rheo.prune('young', clock => '2030-01-01 02:00Z')`).Scan(&pruned))
		require.Equal(t, int64(10), pruned, "pruned %d, want 10", pruned)
		create := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			_, err := conn.Exec(ctx, `SELECT rheo.create_group('young', 'late')`)
			return err
		})
		concWaitForLock(ctx, t, pool, create.pid)
		// Another stream's create_group, outside a transaction and in
		// one, does not wait for this prune (on Citus, a lock of the
		// reference catalog's row made every stream's wait).
		for _, sql := range []string{`SELECT rheo.create_group('other', 'beside')`,
			`BEGIN; SELECT rheo.create_group('other', 'beside-in-tx'); COMMIT`} {
			other := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
				_, err := conn.Exec(ctx, sql)
				return err
			})
			concFinishedOrWaiting(ctx, t, pool, other)
			require.True(t, other.finished(), "%s waits for a prune of another stream", sql)
			require.NoError(t, other.wait(), "%s", sql)
		}
		require.False(t, create.finished(), "create_group of the stream being pruned did not wait for the prune")
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, create.wait(), "create_group")
		var next int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT c.next_sequence FROM rheo.cursors c JOIN rheo.groups g USING (stream, group_id)
			WHERE g.stream = 'young' AND g.group_name = 'late'`).Scan(&next))
		assert.Equal(t, int64(11), next, "the group created during the prune starts at %d, want 11, the new low watermark", next)
	})
}

// TestSQLNotify listens on rheo_events while appending: one notification per
// partition written, at commit, with the JSON payload of reference §8; none with
// rheo.notify off, for an idempotent repeat, or for a rollback.
//
// A notification on a separate stream, sent last, marks the end of what
// came before it: notifications arrive in commit order.
//
// On Citus an append outside a transaction notifies on the worker that
// holds its stream, one in a transaction on the coordinator (citus.md,
// "Wakeups"): the test listens on both, and marks the end on each.
func TestSQLNotify(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		concExec(ctx, t, pool, `SELECT rheo.create_stream('n', 4)`)
		routes, marker := concNotifyRoutes(ctx, t, pool, "n")
		concExec(ctx, t, pool, `SELECT rheo.create_stream($1)`, marker)

		// until returns the notifications received before the end
		// marker, on each route.
		until := func(t *testing.T) []concNotification {
			t.Helper()
			var got []concNotification
			for _, r := range routes {
				r.appendMarker(ctx, t, pool, marker)
				for {
					n := concNextNotification(ctx, t, r.conn)
					if n.Stream == marker {
						break
					}
					got = append(got, n)
				}
			}
			return got
		}
		want := func(t *testing.T, got []concNotification, want ...concNotification) {
			t.Helper()
			assert.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "notifications %v, want %v", got, want)
		}

		t.Run("append notifies its partition with its sequence", func(t *testing.T) {
			concExec(ctx, t, pool, `SELECT rheo.append('n', '{}', "partition" => 2)`)
			want(t, until(t), concNotification{"n", 2, 1})
		})
		t.Run("append_batch notifies the highest sequence written", func(t *testing.T) {
			concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch('n', '[{}, {}, {}]', "partition" => 1)`)
			want(t, until(t), concNotification{"n", 1, 3})
		})
		// A batch of two events for partition 0 and two for partition 3.
		const batch = `SELECT count(*) FROM rheo.append_batch('n', '[{}, {}, {}, {}]', keys => $1, ids => '{b-1,b-2,b-3,b-4}')`
		batchKeys := []string{concKeyFor(0, 4, 1), concKeyFor(3, 4, 1), concKeyFor(0, 4, 2), concKeyFor(3, 4, 2)}
		t.Run("append_batch notifies once per partition written", func(t *testing.T) {
			concExec(ctx, t, pool, batch, batchKeys)
			got := until(t)
			sort.Slice(got, func(i, j int) bool { return got[i].Partition < got[j].Partition })
			want(t, got, concNotification{"n", 0, 2}, concNotification{"n", 3, 2})
		})
		t.Run("idempotent repeats notify nothing", func(t *testing.T) {
			concExec(ctx, t, pool, `SELECT rheo.append('n', '{}', "partition" => 2, id => 'once')`)
			want(t, until(t), concNotification{"n", 2, 2})
			concExec(ctx, t, pool, `SELECT rheo.append('n', '{}', "partition" => 2, id => 'once')`)
			concExec(ctx, t, pool, batch, batchKeys)
			want(t, until(t))
		})
		t.Run("nothing before commit, nothing after rollback", func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer tx.Rollback(context.WithoutCancel(ctx))
			_, err = tx.Exec(ctx, `SELECT rheo.append('n', '{}', "partition" => 3)`)
			require.NoError(t, err)
			want(t, until(t))
			require.NoError(t, tx.Commit(ctx))
			want(t, until(t), concNotification{"n", 3, 3})

			tx, err = pool.Begin(ctx)
			require.NoError(t, err)
			defer tx.Rollback(context.WithoutCancel(ctx))
			_, err = tx.Exec(ctx, `SELECT rheo.append('n', '{}', "partition" => 3)`)
			require.NoError(t, err)
			require.NoError(t, tx.Rollback(ctx))
			want(t, until(t))
		})
		t.Run("SET rheo.notify = off silences the session", func(t *testing.T) {
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			appends := `SELECT rheo.append('n', '{}', "partition" => 0);
SELECT count(*) FROM rheo.append_batch('n', '[{}, {}]', "partition" => 1)`
			if pool.onCitus() {
				// Citus runs a call made outside a transaction in a
				// backend of the worker, which does not have the
				// session's settings (docs/citus.md, "Wakeups"): there
				// the appends are silenced in a transaction, where they
				// run from the coordinator.
				appends = "BEGIN; SET LOCAL rheo.notify = 'off'; " + appends + "; COMMIT"
			}
			_, err = conn.Exec(ctx, `SET rheo.notify = 'off'`)
			require.NoError(t, err)
			defer conn.Exec(context.WithoutCancel(ctx), `RESET rheo.notify`)
			_, err = conn.Exec(ctx, appends)
			require.NoError(t, err)
			want(t, until(t))
			_, err = conn.Exec(ctx, `RESET rheo.notify`)
			require.NoError(t, err)
			_, err = conn.Exec(ctx, `SELECT rheo.append('n', '{}', "partition" => 0)`)
			require.NoError(t, err)
			want(t, until(t), concNotification{"n", 0, 4})
		})
	})
}

// concRun runs n workers and waits for them. An error cancels the test's
// context, so that the other workers stop too, and is reported.
func concRun(cancel context.CancelFunc, t *testing.T, n int, work func(i int) error) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := work(i); err != nil {
				cancel()
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// Workers stopped by another's failure report context.Canceled.
		assert.ErrorIs(t, err, context.Canceled)
	}
}

// concNotification is the decoded payload of a rheo_events notification.
type concNotification struct {
	Stream    string `json:"stream"`
	Partition int    `json:"partition"`
	Sequence  int64  `json:"sequence"`
}

// concNextNotification waits for the next notification on conn, which
// must be on rheo_events with a JSON payload.
func concNextNotification(ctx context.Context, t *testing.T, conn *pgx.Conn) concNotification {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := conn.WaitForNotification(ctx)
	require.NoError(t, err, "wait for a notification")
	require.Equal(t, "rheo_events", msg.Channel, "notification on channel %q, want rheo_events", msg.Channel)
	var n concNotification
	dec := json.NewDecoder(strings.NewReader(msg.Payload))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&n), "notification payload %q", msg.Payload)
	return n
}

// concKeyFor returns the nth key (from 1) of the form "key-<i>" that routes
// to partition p of count partitions.
func concKeyFor(p, count, nth int) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("key-%d", i)
		if rheo.PartitionForKey(k, count) == p {
			if nth--; nth == 0 {
				return k
			}
		}
	}
}

// concEvent names an event of a one-stream test.
type concEvent struct {
	Partition int
	Sequence  int64
}

func (e concEvent) String() string { return fmt.Sprintf("(%d,%d)", e.Partition, e.Sequence) }

// concLease is the part of a rheo.lease row the tests look at.
type concLease struct {
	LeaseID   string
	Partition int
	Sequence  int64
	Attempt   int
}

func (l concLease) event() concEvent { return concEvent{l.Partition, l.Sequence} }

// concAckResult is a row of rheo.ack_batch.
type concAckResult struct {
	LeaseID string
	OK      bool
}

// concLag is a row of rheo.lag.
type concLag struct {
	Partition     int
	Frontier      int64
	HighWatermark int64
	Lag           int64
}

// concPruneUncommitted makes a stream of ten events aged by an hour's
// retention, and a group g that starts after startAfter of them, then
// prunes them in a transaction it returns uncommitted: the prune has
// deleted those startAfter events and holds its locks.
func concPruneUncommitted(ctx context.Context, t *testing.T, pool *concDB, stream string, startAfter int64) pgx.Tx {
	t.Helper()
	concExec(ctx, t, pool, `SELECT rheo.create_stream($1)`, stream)
	concExec(ctx, t, pool, `SELECT rheo.set_retention($1, '1 hour')`, stream)
	concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch($1,
		(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 10) n), clock => '2030-01-01 00:00Z')`, stream)
	concExec(ctx, t, pool, `SELECT rheo.create_group($1, 'g', start_after => $2)`, stream, startAfter)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	var pruned int64
	err = tx.QueryRow(ctx, `SELECT rheo.prune($1, clock => '2030-01-01 02:00Z')`, stream).Scan(&pruned)
	if err != nil || pruned != startAfter {
		_ = tx.Rollback(context.WithoutCancel(ctx))
	}
	require.NoError(t, err)
	require.Equal(t, startAfter, pruned, "pruned %d, want %d", pruned, startAfter)
	return tx
}

// concExec runs one statement and fails the test on error.
func concExec(ctx context.Context, t *testing.T, pool *concDB, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(ctx, sql, args...)
	require.NoError(t, err, "%s", sql)
}

// concBackground is work running on a connection of its own.
type concBackground struct {
	pid  uint32
	done chan struct{}
	err  error
}

// concGo starts fn on a connection of its own and returns at once; wait
// for it with wait. The connection goes back to the pool when fn returns.
func concGo(ctx context.Context, t *testing.T, pool *concDB, fn func(conn *pgxpool.Conn) error) *concBackground {
	t.Helper()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	b := &concBackground{pid: conn.Conn().PgConn().PID(), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		defer conn.Release()
		b.err = fn(conn)
	}()
	return b
}

// wait returns fn's error once it has returned.
func (b *concBackground) wait() error {
	<-b.done
	return b.err
}

// finished reports whether fn has returned.
func (b *concBackground) finished() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// concIsStale reports whether err is the server's stale_lease error.
func concIsStale(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == rheo.ErrStaleLease.Code && pgErr.Message == rheo.ErrStaleLease.Reason
}

// concOneWinsOneStale checks the outcomes of two settles of one lease.
func concOneWinsOneStale(t *testing.T, lease string, a, b error) {
	t.Helper()
	assert.True(t, (a == nil && concIsStale(b)) || (b == nil && concIsStale(a)), "two acks of lease %s: got %v and %v, want one success and one stale_lease", lease, a, b)
}

// TestConcurrentKeyOrdering drains a 'key' group with 8 competing
// consumers, each on a connection of its own, over 8 partitions and 1,000
// keys, with random failures: a retry, a reject, or a handler that hangs
// until its lease expires, up to the attempt limit. Each consumer logs
// when it starts and ends handling a lease, on one logical clock that
// every step moves on (start after the fetch returns, end before the
// settle is sent); from that log alone, the events of every key are
// handled one at a time, in sequence order, and every event ends acked
// once or dead-lettered, never both.
func TestConcurrentKeyOrdering(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 9, func(ctx context.Context, t *testing.T, pool *concDB) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()

		const (
			partitions = 8
			consumers  = 8
			leaseMS    = 1 << 30 // leases outlive the test but for the hung ones
		)
		keys, events := pool.sized(1000, 150), pool.sized(6000, 900)
		concExec(ctx, t, pool, `SELECT rheo.create_stream('ordered', $1)`, partitions)
		rng := rand.New(rand.NewPCG(15, 8))
		keyOf := make([]string, events)
		for i := range keyOf {
			keyOf[i] = fmt.Sprintf("key-%d", rng.IntN(keys))
		}
		concExec(ctx, t, pool, `
			SELECT count(*) FROM rheo.append_batch('ordered',
				(SELECT jsonb_agg(jsonb_build_object('n', n) ORDER BY n) FROM generate_series(1, $1::int) n),
				keys => $2::text[])`, events, keyOf)
		concExec(ctx, t, pool, `SELECT rheo.create_group('ordered', 'g', max_attempts => 3, ordering => 'key')`)

		start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		var ticks atomic.Int64
		tick := func() (int64, time.Time) {
			n := ticks.Add(1)
			return n, start.Add(time.Duration(n) * time.Millisecond)
		}

		// handling is one lease as its consumer saw it.
		type handling struct {
			key        string
			event      concEvent
			attempt    int
			start, end int64
			outcome    string // acked, retrying, dead_lettered, rejected, hung
			consumer   string
		}
		var (
			mu  sync.Mutex
			log []handling
		)
		record := func(h handling) {
			mu.Lock()
			defer mu.Unlock()
			log = append(log, h)
		}
		done := func() (bool, error) {
			var lag int64
			err := pool.QueryRow(ctx, `SELECT sum(lag)::bigint FROM rheo.lag('ordered', 'g')`).Scan(&lag)
			return lag == 0, err
		}

		consume := func(name string, seed uint64) error {
			rng := rand.New(rand.NewPCG(seed, 1))
			for {
				_, clock := tick()
				rows, _ := pool.Query(ctx, `
					SELECT lease_id::text, "partition", sequence, attempt, key
					  FROM rheo.fetch('ordered', 'g', max_count => 10, consumer_id => $1, lease_ms => $2, clock => $3)`,
					name, leaseMS, clock)
				type keyedLease struct {
					concLease
					Key string
				}
				leases, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (keyedLease, error) {
					var l keyedLease
					err := row.Scan(&l.LeaseID, &l.Partition, &l.Sequence, &l.Attempt, &l.Key)
					return l, err
				})
				if err != nil {
					return fmt.Errorf("%s: fetch: %w", name, err)
				}
				if len(leases) == 0 {
					if finished, err := done(); err != nil || finished {
						return err
					}
					continue
				}
				for _, l := range leases {
					began, _ := tick()
					h := handling{key: l.Key, event: l.event(), attempt: l.Attempt, start: began, consumer: name}
					// The handler's work: time for another consumer to be
					// handed the same key, were that possible.
					runtime.Gosched()
					h.end, clock = tick()
					switch r := rng.IntN(100); {
					case r < 5:
						if err := pool.QueryRow(ctx, `SELECT rheo.retry($1, clock => $2)`, l.LeaseID, clock).Scan(&h.outcome); err != nil {
							return fmt.Errorf("%s: retry %v: %w", name, l.event(), err)
						}
					case r < 7:
						h.outcome = "rejected"
						if _, err := pool.Exec(ctx, `SELECT rheo.reject($1, clock => $2)`, l.LeaseID, clock); err != nil {
							return fmt.Errorf("%s: reject %v: %w", name, l.event(), err)
						}
					case r < 10:
						// The handler hangs: its lease runs out a millisecond
						// from now, and a later fetch takes it back or
						// dead-letters it.
						h.outcome = "hung"
						if _, err := pool.Exec(ctx, `SELECT rheo.renew($1, lease_ms => 1, clock => $2)`, l.LeaseID, clock); err != nil {
							return fmt.Errorf("%s: renew %v: %w", name, l.event(), err)
						}
					default:
						h.outcome = "acked"
						if _, err := pool.Exec(ctx, `SELECT rheo.ack($1, clock => $2)`, l.LeaseID, clock); err != nil {
							return fmt.Errorf("%s: ack %v: %w", name, l.event(), err)
						}
					}
					record(h)
				}
			}
		}
		concRun(cancel, t, consumers, func(i int) error {
			return consume(fmt.Sprintf("consumer-%d", i), uint64(i))
		})
		if t.Failed() {
			return
		}

		// Per key, in the order handling started: no handling starts before
		// the one before it ended, and sequences never go back.
		byKey := map[string][]handling{}
		for _, h := range log {
			byKey[h.key] = append(byKey[h.key], h)
		}
		for key, hs := range byKey {
			slices.SortFunc(hs, func(a, b handling) int { return int(a.start - b.start) })
			for i := 1; i < len(hs); i++ {
				prev, h := hs[i-1], hs[i]
				assert.GreaterOrEqual(t, h.start, prev.end, "key %s: %v (attempt %d, %s) started at %d, before %v (attempt %d, %s) ended at %d",
					key, h.event, h.attempt, h.consumer, h.start, prev.event, prev.attempt, prev.consumer, prev.end)
				assert.True(t, h.event.Partition == prev.event.Partition && h.event.Sequence >= prev.event.Sequence, "key %s: %v handled after %v", key, h.event, prev.event)
				if h.event == prev.event {
					assert.Equal(t, prev.attempt+1, h.attempt, "key %s: %v at attempt %d after attempt %d", key, h.event, h.attempt, prev.attempt)
				}
			}
		}

		// Nothing lost: every event acked once, or dead-lettered, never both.
		acked := map[concEvent]int{}
		for _, h := range log {
			if h.outcome == "acked" {
				acked[h.event]++
			}
		}
		rows, _ := pool.Query(ctx, `SELECT "partition", sequence FROM rheo.dead_letters('ordered', 'g', max_count => $1)`, events)
		dead, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concEvent])
		require.NoError(t, err)
		for _, e := range dead {
			assert.Zero(t, acked[e], "%v both acked and dead-lettered", e)
		}
		for e, n := range acked {
			assert.Equal(t, 1, n, "%v acked %d times", e, n)
		}
		assert.Equal(t, events, len(acked)+len(dead), "%d events acked and %d dead-lettered, want %d in all", len(acked), len(dead), events)
		var remaining int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rheo.deliveries`).Scan(&remaining))
		assert.Equal(t, int64(0), remaining, "%d deliveries left, want none", remaining)
		t.Logf("%d handlings of %d events over %d keys; %d dead letters", len(log), events, len(byKey), len(dead))
	})
}

// TestConcurrentKeyExpiryUnblocks races the settle of a key's earliest
// lease, expired at its last attempt, against the fetch that
// dead-letters it, with the key's next event blocked behind it. Whichever
// takes the delivery first, the next event is handed out exactly once:
// within the dead-lettering fetch, or, after the settle, by the next fetch.
func TestConcurrentKeyExpiryUnblocks(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		for _, first := range []string{"fetch", "ack"} {
			t.Run(first+" first", func(t *testing.T) {
				stream := "expiry-" + first
				concExec(ctx, t, pool, `SELECT rheo.create_stream($1)`, stream)
				concExec(ctx, t, pool, `SELECT rheo.create_group($1, 'g', max_attempts => 1, ordering => 'key')`, stream)
				concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch($1, '[{"n": 1}, {"n": 2}]', keys => '{k,k}')`, stream)
				var lease string
				require.NoError(t, pool.QueryRow(ctx, `SELECT lease_id::text FROM rheo.fetch($1, 'g', max_count => 10, lease_ms => 1000,
					clock => '2030-01-01 00:00Z')`, stream).Scan(&lease))
				fetchNext := func(q interface {
					Query(context.Context, string, ...any) (pgx.Rows, error)
				}) ([]int64, error) {
					rows, _ := q.Query(ctx, `SELECT sequence FROM rheo.fetch($1, 'g', max_count => 10,
						clock => '2030-01-01 00:01Z')`, stream)
					return pgx.CollectRows(rows, pgx.RowTo[int64])
				}

				// 1. The first holds the delivery of sequence 1 in a transaction.
				tx, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer tx.Rollback(context.WithoutCancel(ctx))
				var inTx []int64
				if first == "fetch" {
					inTx, err = fetchNext(tx)
					require.NoError(t, err)
					require.Equal(t, []int64{2}, inTx, "the fetch that dead-letters sequence 1 returned %v, want [2]", inTx)
				} else {
					_, err := tx.Exec(ctx, `SELECT rheo.ack($1)`, lease)
					require.NoError(t, err)
				}

				// 2. The other runs meanwhile: an ack waits for the fetch and
				// then finds its lease gone; a fetch skips the delivery the ack
				// holds and hands out nothing of k.
				other := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
					if first == "fetch" {
						_, err := conn.Exec(ctx, `SELECT rheo.ack($1)`, lease)
						if !concIsStale(err) {
							return fmt.Errorf("ack after the fetch dead-lettered its lease: %v, want stale_lease", err)
						}
						return nil
					}
					got, err := fetchNext(conn)
					if err == nil && len(got) != 0 {
						err = fmt.Errorf("fetch while the ack of sequence 1 is in progress returned %v, want nothing", got)
					}
					return err
				})
				if first == "fetch" {
					concWaitForLock(ctx, t, pool, other.pid)
				} else {
					require.NoError(t, other.wait())
				}
				require.NoError(t, tx.Commit(ctx))
				require.NoError(t, other.wait())

				// 3. Sequence 2 has been handed out once: by the dead-lettering
				// fetch, or now, after the ack.
				after, err := fetchNext(pool)
				require.NoError(t, err)
				got := append(inTx, after...)
				assert.Equal(t, []int64{2}, got, "sequence 2 handed out by %v, want once: [2]", got)
			})
		}
	})
}

// TestConcurrentSetOrderingDuringLeases switches a group from 'none' to
// 'key' while a fetch of it is in progress and two leases of one key are
// in flight: set_ordering waits for the fetch, the leases already handed
// out are kept and settle, and the key's next event comes only once every
// earlier one is acked.
func TestConcurrentSetOrderingDuringLeases(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 4, func(ctx context.Context, t *testing.T, pool *concDB) {

		concExec(ctx, t, pool, `SELECT rheo.create_stream('switch')`)
		concExec(ctx, t, pool, `SELECT rheo.create_group('switch', 'g')`)
		concExec(ctx, t, pool, `SELECT count(*) FROM rheo.append_batch('switch', '[{}, {}, {}, {}]', keys => '{k,k,k,k}')`)
		fetch := func(q interface {
			Query(context.Context, string, ...any) (pgx.Rows, error)
		}, n int) []concLease {
			t.Helper()
			rows, _ := q.Query(ctx, `SELECT lease_id::text, "partition", sequence, attempt
				FROM rheo.fetch('switch', 'g', max_count => $1, clock => '2030-01-01Z')`, n)
			leases, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
			require.NoError(t, err)
			return leases
		}
		seqs := func(leases []concLease) []int64 {
			out := make([]int64, len(leases))
			for i, l := range leases {
				out[i] = l.Sequence
			}
			return out
		}

		first := fetch(pool, 1)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.WithoutCancel(ctx))
		second := fetch(tx, 1)
		got := seqs(append(first, second...))
		require.Equal(t, []int64{1, 2}, got, "'none' handed out %v, want [1 2]", got)
		set := concGo(ctx, t, pool, func(conn *pgxpool.Conn) error {
			_, err := conn.Exec(ctx, `SELECT rheo.set_ordering('switch', 'g', 'key')`)
			return err
		})
		concWaitForLock(ctx, t, pool, set.pid)
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, set.wait(), "set_ordering")

		held := fetch(pool, 10)
		require.Empty(t, held, "'key' with two leases of k in flight handed out %v, want nothing", seqs(held))
		concExec(ctx, t, pool, `SELECT rheo.ack($1)`, second[0].LeaseID)
		held = fetch(pool, 10)
		require.Empty(t, held, "'key' with sequence 1 of k in flight handed out %v, want nothing", seqs(held))
		concExec(ctx, t, pool, `SELECT rheo.ack($1)`, first[0].LeaseID)
		third := fetch(pool, 10)
		got = seqs(third)
		require.Equal(t, []int64{3}, got, "'key' after both acks handed out %v, want [3]", got)
		concExec(ctx, t, pool, `SELECT rheo.ack($1)`, third[0].LeaseID)
		got = seqs(fetch(pool, 10))
		require.Equal(t, []int64{4}, got, "'key' after the ack of 3 handed out %v, want [4]", got)
	})
}
