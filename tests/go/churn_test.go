package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChurn runs every operation that changes a group's progress or the
// retained log at once, for a bounded time, each call in a transaction
// of its own at READ COMMITTED or REPEATABLE READ: appends, fetches of
// three groups (one per ordering), ack, ack_batch, renew, retry, reject,
// leases left to expire, prune with and without force, replay by
// sequence, by event id and by time, reset_group, set_ordering, and the
// drop and creation of a group. Every call either succeeds or fails with
// one of the words of reference §10.1 it may meet there, or, at
// REPEATABLE READ, a serialization failure (§10.3): never a deadlock, a
// unique violation or any other raw SQLSTATE. Then the state holds
// together: no delivery or dead letter of a missing event or group, no
// delivery at or past its cursor, no cursor below the low watermark, a
// contiguous retained range, and every group fetches.
//
// Time is a shared logical clock that every call moves on by a second,
// so leases of five seconds expire while others work; prunes run an
// hour and a half ahead of it, against a retention of an hour.
func TestChurn(t *testing.T) {
	t.Parallel()
	concOnEachPool(t, 8, func(ctx context.Context, t *testing.T, pool *concDB) {
		run := time.Duration(pool.sized(12, 6)) * time.Second
		if testing.Short() {
			run = 3 * time.Second
		}

		const partitions = 4
		concExec(ctx, t, pool, `SELECT rheo.create_stream('churn', $1)`, partitions)
		concExec(ctx, t, pool, `SELECT rheo.set_retention('churn', '1 hour')`)
		for _, g := range []string{"none", "key", "partition"} {
			concExec(ctx, t, pool, `SELECT rheo.create_group('churn', $1, max_attempts => 3, ordering => $1)`, g)
		}
		groups := []string{"none", "key", "partition", "temp"}

		base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		var tick atomic.Int64
		clock := func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }

		var (
			mu       sync.Mutex
			problems []string
			outcomes = map[string]int{} // "op: outcome" → calls
		)
		// call runs sql in a transaction of its own at a random level and
		// classifies the outcome; it returns the rows, or nil on an error
		// allowed there.
		call := func(r *rand.Rand, op, sql string, args ...any) [][]any {
			level := pgx.ReadCommitted
			if r.IntN(3) == 0 {
				level = pgx.RepeatableRead
			}
			var out [][]any
			err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: level}, func(tx pgx.Tx) error {
				rows, err := tx.Query(ctx, sql, args...)
				if err != nil {
					return err
				}
				out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) { return row.Values() })
				return err
			})
			outcome, allowed := "ok", true
			if err != nil {
				var pgErr *pgconn.PgError
				switch {
				case ctx.Err() != nil:
					return nil
				case !errors.As(err, &pgErr):
					outcome, allowed = err.Error(), false
				case pgErr.Code == "40001" && level == pgx.RepeatableRead:
					outcome = "serialization_failure"
				case pgErr.Code == "RH011" && level == pgx.RepeatableRead && strings.Contains(pgErr.Detail, "must run at READ COMMITTED"):
					outcome = "refused at repeatable read"
				case pgErr.Code == "RH004" && (op == "renew" || op == "ack" || op == "retry" || op == "reject"),
					pgErr.Code == "RH002", // the temp group, dropped
					pgErr.Code == "RH003" && op == "create_group":
					outcome = pgErr.Message
				default:
					outcome, allowed = fmt.Sprintf("%s %s (%s)", pgErr.Code, pgErr.Message, pgErr.Detail), false
				}
				out = nil
				if !allowed {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s at %s: %s", op, level, outcome))
					mu.Unlock()
				}
			}
			mu.Lock()
			outcomes[op+": "+outcome]++
			mu.Unlock()
			return out
		}

		deadline := time.Now().Add(run)
		work := map[string]func(w *churnWorker){
			"appender": func(w *churnWorker) {
				r := w.r
				n := 1 + r.IntN(8)
				keys := make([]string, n)
				for i := range keys {
					keys[i] = fmt.Sprintf("k%d", r.IntN(20))
				}
				call(r, "append_batch", `SELECT count(*) FROM rheo.append_batch('churn',
					(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, $1::int) n),
					keys => $2, clock => $3)`, n, keys, clock())
			},
			"consumer": func(w *churnWorker) {
				r := w.r
				group := groups[r.IntN(len(groups))]
				leases := call(r, "fetch", `SELECT lease_id FROM rheo.fetch('churn', $1, max_count => $2, lease_ms => 5000, clock => $3)`,
					group, 1+r.IntN(8), clock())
				// A batch gathers leases of several fetches, of several
				// groups and partitions, as a worker's settle batch does.
				batch := w.batch
				for _, l := range leases {
					id := l[0]
					switch r.IntN(10) {
					case 0, 1, 2:
						call(r, "ack", `SELECT rheo.ack($1, clock => $2)`, id, clock())
					case 3, 4:
						batch = append(batch, id)
					case 5:
						call(r, "renew", `SELECT rheo.renew($1, lease_ms => 5000, clock => $2)`, id, clock())
						call(r, "ack", `SELECT rheo.ack($1, clock => $2)`, id, clock())
					case 6:
						call(r, "retry", `SELECT rheo.retry($1, delay_ms => 1000, clock => $2)`, id, clock())
					case 7:
						call(r, "reject", `SELECT rheo.reject($1, reason => 'churn', clock => $2)`, id, clock())
					default: // left to expire
					}
				}
				if len(batch) > 8 || len(batch) > 0 && r.IntN(3) == 0 {
					call(r, "ack_batch", `SELECT * FROM rheo.ack_batch($1::uuid[], clock => $2)`, batch, clock())
					batch = nil
				}
				w.batch = batch
			},
			"admin": func(w *churnWorker) {
				r := w.r
				group := groups[r.IntN(len(groups))]
				ahead := clock().Add(90 * time.Minute)
				switch r.IntN(12) {
				case 0, 1:
					call(r, "prune", `SELECT rheo.prune('churn', max_count => $1, clock => $2)`, 1+r.IntN(200), ahead)
				case 2, 10, 11:
					call(r, "prune", `SELECT rheo.prune('churn', max_count => $1, force => true, clock => $2)`, 1+r.IntN(100), ahead)
				case 3:
					call(r, "replay", `SELECT rheo.replay('churn', $1, from_sequence => (SELECT greatest(0, max(high_watermark) - $2)
						FROM rheo.stream_info('churn')), clock => $3)`, group, r.IntN(30), clock())
				case 4:
					call(r, "replay", `SELECT rheo.replay('churn', $1, event_ids => ARRAY(SELECT id FROM rheo.events
						WHERE stream = 'churn' ORDER BY random() LIMIT 3), clock => $2)`, group, clock())
				case 5:
					call(r, "replay", `SELECT rheo.replay('churn', $1, from_ts => $2, clock => $3)`,
						group, base.Add(time.Duration(tick.Load()-int64(r.IntN(60)))*time.Second), clock())
				case 6:
					call(r, "reset_group", `SELECT rheo.reset_group('churn', $1, confirm => true,
						start_after => (SELECT greatest(0, max(high_watermark) - $2) FROM rheo.stream_info('churn')), clock => $3)`,
						group, r.IntN(30), clock())
				case 7:
					call(r, "set_ordering", `SELECT rheo.set_ordering('churn', $1, $2)`,
						group, []string{"none", "key", "partition"}[r.IntN(3)])
				case 8:
					call(r, "drop_group", `SELECT rheo.drop_group('churn', 'temp', confirm => true)`)
				default:
					call(r, "create_group", `SELECT rheo.create_group('churn', 'temp', max_attempts => 2, clock => $1)`, clock())
				}
			},
		}
		var wg sync.WaitGroup
		for i, role := range []string{"appender", "consumer", "consumer", "consumer", "admin", "admin"} {
			wg.Go(func() {
				w := &churnWorker{r: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
				for time.Now().Before(deadline) && ctx.Err() == nil {
					work[role](w)
				}
			})
		}
		wg.Wait()
		require.NoError(t, ctx.Err(), "the churn did not end in time: %v", ctx.Err())

		var summary []string
		for k, n := range outcomes {
			summary = append(summary, fmt.Sprintf("%s × %d", k, n))
		}
		sort.Strings(summary)
		t.Logf("outcomes:\n%s", strings.Join(summary, "\n"))
		assert.Empty(t, problems)

		for _, inv := range []struct{ what, sql string }{
			{"deliveries of missing events", `SELECT d.group_id, d."partition", d.sequence FROM rheo.deliveries d
				JOIN rheo.groups g USING (stream, group_id)
				WHERE NOT EXISTS (SELECT FROM rheo.events e WHERE e.stream = d.stream AND e."partition" = d."partition" AND e.sequence = d.sequence)`},
			{"dead letters of missing events", `SELECT dl.group_id, dl."partition", dl.sequence FROM rheo.dead_letters dl
				JOIN rheo.groups g USING (stream, group_id)
				WHERE NOT EXISTS (SELECT FROM rheo.events e WHERE e.stream = dl.stream AND e."partition" = dl."partition" AND e.sequence = dl.sequence)`},
			{"deliveries, dead letters or cursors of missing groups", `SELECT x.group_id FROM (
				SELECT stream, group_id FROM rheo.deliveries UNION ALL SELECT stream, group_id FROM rheo.dead_letters
				UNION ALL SELECT stream, group_id FROM rheo.cursors) x
				WHERE NOT EXISTS (SELECT FROM rheo.groups g WHERE g.stream = x.stream AND g.group_id = x.group_id)`},
			{"deliveries at or past their cursor", `SELECT d.group_id, d."partition", d.sequence, c.next_sequence FROM rheo.deliveries d
				JOIN rheo.cursors c USING (stream, group_id, "partition") WHERE d.sequence >= c.next_sequence`},
			{"cursors below the low watermark", `SELECT c.group_id, c."partition", c.next_sequence, pt.low_watermark FROM rheo.cursors c
				JOIN rheo.groups g USING (stream, group_id) JOIN rheo.partitions pt ON pt.stream = c.stream AND pt."partition" = c."partition"
				WHERE c.next_sequence < pt.low_watermark`},
			{"partitions whose retained range is not contiguous", `SELECT pt."partition", pt.low_watermark, pt.high_watermark, e.n, e.lo, e.hi
				FROM rheo.partitions pt
				CROSS JOIN LATERAL (SELECT count(*) AS n, min(sequence) AS lo, max(sequence) AS hi FROM rheo.events e
				                     WHERE e.stream = pt.stream AND e."partition" = pt."partition") e
				WHERE pt.stream = 'churn' AND (e.n <> pt.high_watermark - pt.low_watermark + 1
				   OR (e.n > 0 AND (e.lo <> pt.low_watermark OR e.hi <> pt.high_watermark)))`},
		} {
			rows, _ := pool.Query(ctx, inv.sql)
			bad, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) { return row.Values() })
			require.NoError(t, err, "%s", inv.what)
			assert.Empty(t, bad, "%s: %v", inv.what, bad)
		}
		var pruned, leased int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT sum(low_watermark - 1) FROM rheo.partitions WHERE stream = 'churn'`).Scan(&pruned))
		assert.NotZero(t, pruned, "the churn pruned nothing")
		for _, g := range groups[:3] {
			assert.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rheo.fetch('churn', $1, max_count => 100, clock => $2)`,
				g, clock().Add(time.Hour)).Scan(&leased), "fetch of group %s after the churn", g)
		}
	})
}

// churnWorker is the state of one of TestChurn's workers.
type churnWorker struct {
	r     *rand.Rand
	batch []any // lease ids gathered for an ack_batch
}
