package tests

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentDueMarks races the ways a delivery becomes claimable
// again against competing fetches, under every ordering: each event is
// retried with delay 0 on its first attempt, its lease renewed to expire
// a millisecond later (shorter than it was) on its second, and acked on
// its third. Every lease lasts a minute otherwise, and the clock moves a
// millisecond a fetch, so the drain must end long before any lease of a
// minute expires: a retry or a shortened lease that a fetch's expiry mark
// (docs/design.md, "Due times") hid would wait for it, and the test fails
// when the clock gets there. Every event is acked exactly once, and every
// frontier ends at its high watermark.
func TestConcurrentDueMarks(t *testing.T) {
	t.Parallel()
	for _, ordering := range []string{"none", "key", "partition"} {
		t.Run(ordering, func(t *testing.T) {
			t.Parallel()
			concOnEach(t, func(t *testing.T, open concOpener) {
				ctx, cancel := context.WithTimeout(context.Background(), concTimeout)
				defer cancel()
				pool := open(t, 8)
				defer pool.Close()

				events := pool.sized(800, 200)
				const (
					partitions = 4
					consumers  = 6
					leaseMS    = 60_000
				)
				concExec(ctx, t, pool, `SELECT rheo.create_stream('marks', $1)`, partitions)
				concExec(ctx, t, pool, `
					SELECT count(*) FROM rheo.append_batch('marks',
						(SELECT jsonb_agg(jsonb_build_object('n', n) ORDER BY n) FROM generate_series(1, $1::int) n),
						keys => (SELECT array_agg('key-' || (n % 50) ORDER BY n) FROM generate_series(1, $1::int) n))`, events)
				concExec(ctx, t, pool, `SELECT rheo.create_group('marks', 'g', max_attempts => 10)`)
				concExec(ctx, t, pool, `SELECT rheo.set_ordering('marks', 'g', $1)`, ordering)

				start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
				deadline := start.Add(leaseMS * time.Millisecond)
				var ticks atomic.Int64
				now := func() time.Time { return start.Add(time.Duration(ticks.Load()) * time.Millisecond) }
				tick := func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }

				var (
					mu    sync.Mutex
					acked = map[concEvent]int{}
				)
				consume := func(name string) error {
					for {
						clock := tick()
						if !clock.Before(deadline) {
							return fmt.Errorf("%s: the clock reached the first lease of a minute: a delivery was left behind its partition's expiry mark", name)
						}
						rows, _ := pool.Query(ctx, `
							SELECT lease_id::text, "partition", sequence, attempt
							  FROM rheo.fetch('marks', 'g', max_count => 10, consumer_id => $1, lease_ms => $2, clock => $3)`,
							name, leaseMS, clock)
						leases, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLease])
						if err != nil {
							return fmt.Errorf("%s: fetch: %w", name, err)
						}
						if len(leases) == 0 {
							var lag int64
							if err := pool.QueryRow(ctx, `SELECT sum(lag) FROM rheo.lag('marks', 'g')`).Scan(&lag); err != nil {
								return fmt.Errorf("%s: lag: %w", name, err)
							}
							if lag == 0 {
								return nil
							}
							continue
						}
						for _, l := range leases {
							var err error
							switch l.Attempt {
							case 1:
								_, err = pool.Exec(ctx, `SELECT rheo.retry($1, delay_ms => 0, clock => $2)`, l.LeaseID, now())
							case 2:
								_, err = pool.Exec(ctx, `SELECT rheo.renew($1, lease_ms => 1, clock => $2)`, l.LeaseID, now())
							default:
								_, err = pool.Exec(ctx, `SELECT rheo.ack($1, clock => $2)`, l.LeaseID, now())
								if err == nil {
									mu.Lock()
									acked[l.event()]++
									mu.Unlock()
								}
							}
							if err != nil && !concIsStale(err) {
								return fmt.Errorf("%s: settle %v at attempt %d: %w", name, l.event(), l.Attempt, err)
							}
						}
					}
				}
				concRun(cancel, t, consumers, func(i int) error { return consume(fmt.Sprintf("consumer-%d", i)) })
				if t.Failed() {
					return
				}
				for e, n := range acked {
					assert.Equal(t, 1, n, "%v acked %d times", e, n)
				}
				assert.Equal(t, events, len(acked), "events acked")
				rows, _ := pool.Query(ctx, `SELECT "partition", frontier, high_watermark, lag FROM rheo.lag('marks', 'g')`)
				lags, err := pgx.CollectRows(rows, pgx.RowToStructByPos[concLag])
				require.NoError(t, err)
				for _, l := range lags {
					assert.Equal(t, l.HighWatermark, l.Frontier, "partition %d: frontier %d, high watermark %d", l.Partition, l.Frontier, l.HighWatermark)
				}
			})
		})
	}
}
