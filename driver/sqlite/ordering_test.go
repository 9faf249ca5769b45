package sqlite_test

import (
	"database/sql"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/migrate"
	rheosql "github.com/rheo-go/rheo/sql"
)

func TestOrderingMigration(t *testing.T) {
	t.Run("migration 005 keeps the deliveries in progress and copies their keys", func(t *testing.T) {
		b := setup(t)
		db, err := sql.Open(sqlite.DefaultDriverName(), b.path)
		require.NoError(t, err)
		defer db.Close()
		// The schema as of version 4, with a group that has a lease, a
		// retry and a keyless lease in progress.
		for _, name := range []string{"001_init.sql", "002_query_indexes.sql", "003_due_and_time_indexes.sql", "004_lifecycle.sql"} {
			script, err := fs.ReadFile(rheosql.SQLite, name)
			require.NoError(t, err)
			_, err = db.ExecContext(b.ctx, string(script))
			require.NoError(t, err, name)
		}
		for _, q := range []string{
			`CREATE TABLE rheo_schema_version (version INTEGER NOT NULL)`,
			`INSERT INTO rheo_schema_version VALUES (4)`,
			`INSERT INTO rheo_streams (stream, partition_count, created_at) VALUES ('s', 1, 0)`,
			`INSERT INTO rheo_partitions (stream, "partition", high_watermark) VALUES ('s', 0, 3)`,
			`INSERT INTO rheo_events (stream, "partition", sequence, id, key, payload, metadata, ts)
			 VALUES ('s', 0, 1, 'e1', 'a', '{}', '{}', 0), ('s', 0, 2, 'e2', 'a', '{}', '{}', 0),
			        ('s', 0, 3, 'e3', NULL, '{}', '{}', 0)`,
			`INSERT INTO rheo_groups (stream, group_name, max_attempts, created_at) VALUES ('s', 'g', 5, 0)`,
			`INSERT INTO rheo_cursors (group_id, "partition", next_sequence) VALUES (1, 0, 4)`,
			`INSERT INTO rheo_deliveries (group_id, "partition", sequence, state, lease_id, consumer_id, attempt, leased_at, expires_at)
			 VALUES (1, 0, 1, 'leased', 'a1a1a1a1-0000-4000-8000-000000000001', 'c', 1, 0, 4102444800000000),
			        (1, 0, 2, 'pending', NULL, NULL, 1, 0, 0),
			        (1, 0, 3, 'leased', 'a1a1a1a1-0000-4000-8000-000000000003', 'c', 1, 0, 4102444800000000)`,
		} {
			_, err := db.ExecContext(b.ctx, q)
			require.NoError(t, err, q)
		}
		require.NoError(t, migrate.SQLite(b.ctx, db))

		rows, err := db.QueryContext(b.ctx, `SELECT sequence, state, key FROM rheo_deliveries ORDER BY sequence`)
		require.NoError(t, err)
		defer rows.Close()
		var got []string
		for rows.Next() {
			var seq int64
			var state string
			var key sql.NullString
			require.NoError(t, rows.Scan(&seq, &state, &key))
			got = append(got, fmt.Sprintf("%d %s %v", seq, state, key.String))
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"1 leased a", "2 pending a", "3 leased "}, got)

		d, err := sqlite.New(db, &sqlite.Options{Clock: b.clock})
		require.NoError(t, err)
		groups, err := d.ListGroups(b.ctx, "s")
		require.NoError(t, err)
		require.Equal(t, rheo.OrderingNone, groups[0].Ordering, "existing groups are ordered by nothing")
		require.NoError(t, d.SetOrdering(b.ctx, "s", "g", rheo.OrderingKey))
		require.NoError(t, d.Ack(b.ctx, "a1a1a1a1-0000-4000-8000-000000000001"), "a lease from before the migration is held")
	})
}

func TestOrderingWalk(t *testing.T) {
	t.Run("a fetch passes a run of waiting events longer than its walk's bound to lease the next key's event", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		require.NoError(t, d.CreateStream(b.ctx, "s", 1))
		require.NoError(t, d.CreateGroup(b.ctx, "s", "g", &rheo.CreateGroupOptions{Ordering: rheo.OrderingKey}))
		items := make([]rheo.BatchItem, 3001)
		for i := range items {
			items[i] = rheo.BatchItem{Payload: payload(i), Key: "hot"}
		}
		items[3000].Key = "cold"
		_, err := d.AppendBatch(b.ctx, "s", items, nil)
		require.NoError(t, err)
		first, err := d.Fetch(b.ctx, "s", "g", &rheo.FetchOptions{MaxCount: 1})
		require.NoError(t, err)
		require.Len(t, first, 1)
		cold, err := d.Fetch(b.ctx, "s", "g", &rheo.FetchOptions{MaxCount: 1})
		require.NoError(t, err)
		require.Len(t, cold, 1, "the 2,999 waiting events are passed in one fetch")
		require.Equal(t, int64(3001), cold[0].Event.Sequence)

		// Stored once, they are not read again: the hot key's next event
		// is leased when the first is acked.
		require.NoError(t, d.Ack(b.ctx, first[0].LeaseID))
		next, err := d.Fetch(b.ctx, "s", "g", &rheo.FetchOptions{MaxCount: 10})
		require.NoError(t, err)
		require.Len(t, next, 1)
		require.Equal(t, int64(2), next[0].Event.Sequence)
		var blocked int
		require.NoError(t, d.DB().QueryRowContext(b.ctx,
			`SELECT count(*) FROM rheo_deliveries WHERE state = 'blocked'`).Scan(&blocked))
		require.Equal(t, 2998, blocked)
	})
}

// handling is one consumer's handling of one lease, as the consumer
// logged it: start and end are ticks of a shared counter, read when the
// fetch returned and as the handler settles.
type handling struct {
	partition  int
	key        string
	sequence   int64
	start, end int64
	outcome    string // ack, retry, reject, abandon (left to expire)
	terminal   bool   // the event is acked or dead-lettered by it
}

func TestOrderingConcurrency(t *testing.T) {
	t.Run("competing consumers of a key group handle each key's events one at a time, in order, losing none", func(t *testing.T) {
		b := setup(t)
		drivers := []*sqlite.Driver{b.open(t, b.path), b.open(t, b.path)}
		ctx := b.ctx
		const partitions, keys, events, consumers, maxAttempts = 8, 1000, 4000, 8, 3
		require.NoError(t, drivers[0].CreateStream(ctx, "s", partitions))
		require.NoError(t, drivers[0].CreateGroup(ctx, "s", "g",
			&rheo.CreateGroupOptions{Ordering: rheo.OrderingKey, MaxAttempts: maxAttempts}))
		rng := rand.New(rand.NewPCG(1, 2))
		order := map[string][]int64{} // "partition/key": its sequences
		for range events / 100 {
			items := make([]rheo.BatchItem, 100)
			for i := range items {
				items[i] = rheo.BatchItem{Payload: payload(i), Key: fmt.Sprintf("k%d", rng.IntN(keys))}
			}
			appended, err := drivers[0].AppendBatch(ctx, "s", items, nil)
			require.NoError(t, err)
			for _, ev := range appended {
				k := fmt.Sprintf("%d/%s", ev.Partition, ev.Key)
				order[k] = append(order[k], ev.Sequence)
			}
		}

		var (
			tick    atomic.Int64
			settled atomic.Int64 // events acked or dead-lettered
			// Handlers hold time still: the clock moves forward, expiring
			// the abandoned leases and ending the retries' delays, only
			// while no lease is being handled.
			clockMu sync.RWMutex
			mu      sync.Mutex
			log     []handling
		)
		consume := func(d *sqlite.Driver, seed uint64) error {
			rng := rand.New(rand.NewPCG(seed, 7))
			idle := 0 // fetches in a row that leased nothing
			for settled.Load() < events {
				if idle > 1000 {
					return fmt.Errorf("%d events settled, then nothing more was claimable", settled.Load())
				}
				clockMu.RLock()
				leases, err := d.Fetch(ctx, "s", "g", &rheo.FetchOptions{MaxCount: 10, LeaseDuration: 10 * time.Second})
				if err != nil {
					clockMu.RUnlock()
					return err
				}
				var handled []handling
				for _, l := range leases {
					h := handling{partition: l.Event.Partition, key: l.Event.Key, sequence: l.Event.Sequence, start: tick.Add(1)}
					// The handler's work ends as it settles: the next
					// event of the key may be leased once the settle
					// commits, before the call returns.
					h.end = tick.Add(1)
					switch r := rng.IntN(100); {
					case r < 75:
						h.outcome, h.terminal, err = "ack", true, d.Ack(ctx, l.LeaseID)
					case r < 87:
						h.outcome = "retry"
						var outcome rheo.RetryOutcome
						outcome, err = d.Retry(ctx, l.LeaseID, &rheo.RetryOptions{Delay: time.Duration(rng.IntN(2)) * time.Second})
						h.terminal = outcome == rheo.DeadLettered
					case r < 93:
						h.outcome, h.terminal, err = "reject", true, d.Reject(ctx, l.LeaseID, "")
					default:
						// Left to expire: dead-lettered by a fetch at the
						// attempt limit, else leased again.
						h.outcome, h.terminal = "abandon", l.Attempt >= maxAttempts
					}
					if err != nil {
						clockMu.RUnlock()
						return fmt.Errorf("%s lease of %d/%d: %w", h.outcome, h.partition, h.sequence, err)
					}
					handled = append(handled, h)
				}
				clockMu.RUnlock()
				mu.Lock()
				log = append(log, handled...)
				for _, h := range handled {
					if h.terminal {
						settled.Add(1)
					}
				}
				mu.Unlock()
				idle++
				if len(leases) > 0 {
					idle = 0
				} else {
					clockMu.Lock()
					b.clock.Advance(11 * time.Second)
					clockMu.Unlock()
				}
			}
			return nil
		}
		errs := make(chan error, consumers)
		var wg sync.WaitGroup
		for i := range consumers {
			wg.Go(func() { errs <- consume(drivers[i%2], uint64(i)) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}

		// Every key's handlings, in the order they started, never
		// overlap, and each is of the key's first event not yet settled.
		byKey := map[string][]handling{}
		for _, h := range log {
			k := fmt.Sprintf("%d/%s", h.partition, h.key)
			byKey[k] = append(byKey[k], h)
		}
		for k, hs := range byKey {
			sort.Slice(hs, func(i, j int) bool { return hs[i].start < hs[j].start })
			next := 0
			for i, h := range hs {
				if i > 0 {
					require.Greater(t, h.start, hs[i-1].end, "key %s: two handlings at once", k)
				}
				require.Less(t, next, len(order[k]), "key %s: handled after all its events were settled", k)
				require.Equal(t, order[k][next], h.sequence, "key %s: out of sequence order", k)
				if h.terminal {
					next++
				}
			}
			require.Equal(t, len(order[k]), next, "key %s: events left unsettled", k)
		}
		require.Len(t, byKey, len(order), "every key was handled")

		// Nothing lost: the group is past every event, and its dead letters
		// are exactly the events whose last handling dead-lettered them.
		// The leases abandoned at the attempt limit last are dead-lettered
		// by the next fetch.
		b.clock.Advance(11 * time.Second)
		leases, err := drivers[0].Fetch(ctx, "s", "g", nil)
		require.NoError(t, err)
		require.Empty(t, leases)
		lag, err := drivers[1].Lag(ctx, "s", "g", nil)
		require.NoError(t, err)
		require.Equal(t, int64(0), lag.Total)
		var wantDead []string
		for _, h := range log {
			if h.terminal && h.outcome != "ack" {
				wantDead = append(wantDead, fmt.Sprintf("%d/%d", h.partition, h.sequence))
			}
		}
		var gotDead []string
		for after := ""; ; {
			page, err := drivers[1].DeadLetters(ctx, "s", "g", &rheo.DeadLetterOptions{MaxCount: 1000, After: after})
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			for _, dl := range page {
				gotDead = append(gotDead, fmt.Sprintf("%d/%d", dl.Event.Partition, dl.Event.Sequence))
			}
			after = page[len(page)-1].Event.ID
		}
		slices.Sort(wantDead)
		slices.Sort(gotDead)
		require.Equal(t, wantDead, gotDead)
	})
}
