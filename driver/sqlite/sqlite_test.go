package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/testskip"
)

// The behaviour shared with PostgreSQL is checked by the conformance
// suite (TestConformance in conformance_test.go); these tests cover what only SQLite has: files,
// in-memory databases, SQLite's locking, and host transactions on
// database/sql.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testskip.Wrap(m))
}

type testBundle struct {
	ctx   context.Context
	clock *drivertest.Clock
	path  string // a database file in the test's temporary directory
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{
		ctx:   t.Context(),
		clock: drivertest.NewClock(),
		path:  filepath.Join(t.TempDir(), "rheo.db"),
	}
}

// open opens dsn, migrated, and closes it when t ends.
func (b *testBundle) open(t *testing.T, dsn string) *sqlite.Driver {
	t.Helper()
	d, err := sqlite.Open(b.ctx, dsn, &sqlite.Options{Clock: b.clock, Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// streamWithGroup creates a stream with a group named "g".
func (b *testBundle) streamWithGroup(t *testing.T, d driver.Ops, stream string, partitions int) {
	t.Helper()
	require.NoError(t, d.CreateStream(b.ctx, stream, partitions))
	require.NoError(t, d.CreateGroup(b.ctx, stream, "g", nil))
}

func payload(n int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"n": %d}`, n)) }

func TestOpen(t *testing.T) {
	t.Run("a file keeps its events and leases across a reopen", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, b.path)
		b.streamWithGroup(t, d, "s", 1)
		_, err := d.Append(b.ctx, "s", payload(1), nil)
		require.NoError(t, err)
		leases, err := d.Fetch(b.ctx, "s", "g", &rheo.FetchOptions{LeaseDuration: time.Minute})
		require.NoError(t, err)
		require.Len(t, leases, 1)
		require.NoError(t, d.Close())

		d = b.open(t, b.path)
		require.True(t, d.Capabilities().Durable)
		events, err := d.Read(b.ctx, "s", nil)
		require.NoError(t, err)
		require.Len(t, events, 1)
		require.JSONEq(t, `{"n": 1}`, string(events[0].Payload))
		require.NoError(t, d.Ack(b.ctx, leases[0].LeaseID), "the lease is still held")
		lag, err := d.Lag(b.ctx, "s", "g", nil)
		require.NoError(t, err)
		require.Equal(t, int64(0), lag.Total)
	})

	t.Run("every in-memory driver has a database of its own", func(t *testing.T) {
		b := setup(t)
		one, other := b.open(t, ":memory:"), b.open(t, ":memory:")
		require.False(t, one.Capabilities().Durable)
		require.NoError(t, one.CreateStream(b.ctx, "s", 1))
		require.NoError(t, other.CreateStream(b.ctx, "s", 1), "the other database has no stream s")
	})

	t.Run("a host's database is durable unless it is in memory", func(t *testing.T) {
		b := setup(t)
		for dsn, durable := range map[string]bool{b.path: true, ":memory:": false, "file:x?mode=memory": false} {
			db, err := sql.Open("sqlite3", dsn)
			require.NoError(t, err)
			defer db.Close()
			d, err := sqlite.New(db, nil)
			require.NoError(t, err)
			require.Equal(t, durable, d.Capabilities().Durable, dsn)
		}
	})

	t.Run("an in-memory database is shared by the driver's goroutines", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		b.streamWithGroup(t, d, "s", 1)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = d.Append(b.ctx, "s", payload(i), nil)
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		events, err := d.Read(b.ctx, "s", nil)
		require.NoError(t, err)
		require.Len(t, events, len(errs))
	})

	t.Run("without Migrate nothing is created", func(t *testing.T) {
		b := setup(t)
		d, err := sqlite.Open(b.ctx, b.path, nil)
		require.NoError(t, err)
		defer d.Close()
		var tables int
		require.NoError(t, d.DB().QueryRowContext(b.ctx,
			`SELECT count(*) FROM sqlite_master WHERE name LIKE 'rheo%'`).Scan(&tables))
		require.Zero(t, tables)
		err = d.CreateStream(b.ctx, "s", 1)
		require.ErrorIs(t, err, rheo.ErrFailed, "no schema: a definite failure")
	})

	t.Run("a closed driver is backend_unavailable and its subscriptions end", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		wakeups, stop := d.Wakeups("s")
		defer stop()
		require.NoError(t, d.Close())
		_, ok := <-wakeups
		require.False(t, ok, "Close closes the channel")
		require.ErrorIs(t, d.Ping(b.ctx), rheo.ErrBackendUnavailable)
		require.ErrorIs(t, d.CreateStream(b.ctx, "s", 1), rheo.ErrBackendUnavailable)
	})
}

func TestSchema(t *testing.T) {
	t.Run("plain SQL cannot update or delete events", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		b.streamWithGroup(t, d, "s", 1)
		_, err := d.Append(b.ctx, "s", payload(1), nil)
		require.NoError(t, err)
		for _, q := range []string{
			`UPDATE rheo_events SET payload = '{}'`,
			`DELETE FROM rheo_events`,
		} {
			_, err := d.DB().ExecContext(b.ctx, q)
			require.EqualError(t, err, "immutable_event", q)
		}
		events, err := d.Read(b.ctx, "s", nil)
		require.NoError(t, err)
		require.Len(t, events, 1)
	})

	t.Run("timestamps are stored as microseconds and type mirrors payload->>'type'", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		require.NoError(t, d.CreateStream(b.ctx, "s", 1))
		ts := time.Date(2031, 2, 3, 4, 5, 6, 789123456, time.UTC)
		for _, p := range []string{`{"type": "a.b"}`, `{"type": 5.50}`, `{"type": true}`, `{"type": null}`, `{}`} {
			_, err := d.Append(b.ctx, "s", json.RawMessage(p), &rheo.AppendOptions{TS: &ts})
			require.NoError(t, err)
		}
		rows, err := d.DB().QueryContext(b.ctx, `SELECT ts, type FROM rheo_events ORDER BY sequence`)
		require.NoError(t, err)
		defer rows.Close()
		var types []*string
		for rows.Next() {
			var micros int64
			var typ *string
			require.NoError(t, rows.Scan(&micros, &typ))
			require.Equal(t, ts.Truncate(time.Microsecond).UnixMicro(), micros)
			types = append(types, typ)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []*string{ptr("a.b"), ptr("5.50"), ptr("true"), nil, nil}, types)
	})
}

func TestConcurrency(t *testing.T) {
	t.Run("goroutines of two drivers on one file share the work without duplicates", func(t *testing.T) {
		b := setup(t)
		drivers := []*sqlite.Driver{b.open(t, b.path), b.open(t, b.path)}
		b.streamWithGroup(t, drivers[0], "s", 4)

		const producers, batches, batchSize = 4, 10, 10
		var mu sync.Mutex
		delivered := map[[2]int64]int{}
		var wg sync.WaitGroup
		errs := make(chan error, 2*producers)
		for i := range producers {
			d := drivers[i%2]
			wg.Go(func() {
				for n := range batches {
					items := make([]rheo.BatchItem, batchSize)
					for k := range items {
						items[k] = rheo.BatchItem{Payload: payload(k), Key: fmt.Sprintf("p%d-b%d-k%d", i, n, k)}
					}
					if _, err := d.AppendBatch(b.ctx, "s", items, nil); err != nil {
						errs <- err
						return
					}
				}
			})
			wg.Go(func() {
				// Consume until every event is acked; stopping on an empty
				// fetch could end before the producers are done.
				for {
					mu.Lock()
					done := len(delivered) == producers*batches*batchSize
					mu.Unlock()
					if done {
						return
					}
					leases, err := d.Fetch(b.ctx, "s", "g", &rheo.FetchOptions{MaxCount: 7, LeaseDuration: time.Hour})
					if err != nil {
						errs <- err
						return
					}
					ids := make([]string, len(leases))
					mu.Lock()
					for k, l := range leases {
						delivered[[2]int64{int64(l.Event.Partition), l.Event.Sequence}]++
						ids[k] = l.LeaseID
					}
					mu.Unlock()
					results, err := d.AckBatch(b.ctx, ids)
					if err != nil {
						errs <- err
						return
					}
					for _, r := range results {
						if !r.OK {
							errs <- fmt.Errorf("lease %s was not held at ack", r.LeaseID)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for pos, n := range delivered {
			require.Equal(t, 1, n, "event %v delivered %d times", pos, n)
		}
		lag, err := drivers[1].Lag(b.ctx, "s", "g", nil)
		require.NoError(t, err)
		var total int64
		for _, p := range lag.Partitions {
			require.Equal(t, p.HighWatermark, p.Frontier)
			total += p.HighWatermark
		}
		require.Equal(t, int64(producers*batches*batchSize), total)
	})
}

func TestTransactions(t *testing.T) {
	t.Run("an operation that fails inside a host transaction leaves it as it was", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		b.streamWithGroup(t, d, "s", 1)
		// A row added behind the API takes sequence 1, so the next append
		// fails after it has bumped the partition's high watermark.
		_, err := d.DB().ExecContext(b.ctx, `INSERT INTO rheo_events (stream, "partition", sequence, id, payload, metadata, ts)
			VALUES ('s', 0, 1, 'forged', '{}', '{}', 0)`)
		require.NoError(t, err)

		tx, err := d.DB().BeginTx(b.ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		dtx := d.WithTx(tx)
		require.Same(t, tx, dtx.Native())
		_, err = dtx.Append(b.ctx, "s", payload(1), nil)
		require.ErrorIs(t, err, rheo.ErrFailed)
		require.NoError(t, dtx.CreateStream(b.ctx, "t", 1), "the transaction goes on")
		require.NoError(t, tx.Commit())

		var high int64
		require.NoError(t, d.DB().QueryRowContext(b.ctx,
			`SELECT high_watermark FROM rheo_partitions WHERE stream = 's'`).Scan(&high))
		require.Zero(t, high, "the failed append's allocation was rolled back")
		streams, err := d.ListStreams(b.ctx)
		require.NoError(t, err)
		require.Len(t, streams, 2)
	})

	t.Run("appends in InTx wake subscribers after the commit", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		b.streamWithGroup(t, d, "s", 1)
		wakeups, stop := d.Wakeups("s")
		defer stop()
		err := d.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			if _, err := tx.Append(ctx, "s", payload(1), nil); err != nil {
				return err
			}
			select {
			case w := <-wakeups:
				return fmt.Errorf("woken before the commit: %+v", w)
			default:
				return nil
			}
		})
		require.NoError(t, err)
		select {
		case w := <-wakeups:
			require.Equal(t, driver.Wakeup{Stream: "s", Partition: 0, Sequence: 1}, w)
		default:
			require.FailNow(t, "no wakeup after the commit")
		}
	})

	t.Run("appends in InTx that roll back wake no one", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		b.streamWithGroup(t, d, "s", 1)
		wakeups, stop := d.Wakeups("s")
		defer stop()
		errRollback := fmt.Errorf("roll back")
		err := d.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			if _, err := tx.Append(ctx, "s", payload(1), nil); err != nil {
				return err
			}
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		select {
		case w := <-wakeups:
			require.FailNow(t, fmt.Sprintf("woken by a rolled-back append: %+v", w))
		default:
		}
	})
}

func ptr[T any](v T) *T { return &v }
