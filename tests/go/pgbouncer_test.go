package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testlog"
	"github.com/rheo-go/rheo/internal/testpgbouncer"
	"github.com/rheo-go/rheo/worker"
)

// The exec modes of pgx that work through a pooler in transaction mode
// and that docs/pgbouncer.md recommends.
var pooledExecModes = []string{"exec", "simple_protocol"}

// pgbouncerDatabase returns a migrated database: its direct URL, and the
// URL through the pooler in the given exec mode.
func pgbouncerDatabase(t *testing.T, b *testpgbouncer.Bouncer, mode string) (direct, pooled string) {
	t.Helper()
	direct = testbackend.PostgresURL(t)
	return direct, b.URL(t, direct, "default_query_exec_mode", mode)
}

// pooledDriver returns a driver whose pool goes through the pooler and
// whose listener connects with listen (nil: through the pooler too).
func pooledDriver(t *testing.T, pooled string, opts postgres.Options) *postgres.Driver {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pooled)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d := postgres.New(pool, &opts)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func mustConnConfig(t testing.TB, url string) *pgx.ConnConfig {
	t.Helper()
	config, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	return config
}

// fetchSignal is a worker hook that reports every fetch.
type fetchSignal chan worker.FetchInfo

func (f fetchSignal) Fetched(_ context.Context, info worker.FetchInfo) {
	select {
	case f <- info:
	default:
	}
}

// TestPgBouncer runs Rheo through PgBouncer in transaction pooling mode,
// where each transaction may run on another server connection: what
// docs/pgbouncer.md promises works does, and lost wakeups are reported.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	b := testpgbouncer.Start(t)
	ctx := t.Context()
	t.Cleanup(func() {
		if log := b.Log(); t.Failed() && log != "" {
			lines := strings.Split(strings.TrimSpace(log), "\n")
			t.Logf("the last lines PgBouncer logged:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})

	for _, mode := range pooledExecModes {
		// The two runs of the suite run side by side, after the other
		// cases, each on a database (and a pool of PgBouncer's) of its own.
		t.Run("the driver conformance suite passes in "+mode+" mode", func(t *testing.T) {
			t.Parallel()
			if testing.Short() {
				t.Skip("-short: the whole conformance suite through the pooler")
			}
			direct, pooled := pgbouncerDatabase(t, b, mode)
			pool, err := pgxpool.New(ctx, pooled)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			drivertest.Exercise(t, drivertest.Harness{
				NewDriver: func(tb testing.TB, clock driver.Clock) driver.Driver {
					d := postgres.New(pool, &postgres.Options{Clock: clock, ListenConfig: mustConnConfig(tb, direct)})
					tb.Cleanup(func() { _ = d.Close() })
					return d
				},
			})
		})
	}

	for _, mode := range pooledExecModes {
		t.Run("appends, fetch, ack_batch and InTx work in "+mode+" mode", func(t *testing.T) {
			_, pooled := pgbouncerDatabase(t, b, mode)
			d := pooledDriver(t, pooled, postgres.Options{PollOnly: true})
			require.NoError(t, d.CreateStream(ctx, "s", 2))
			require.NoError(t, d.CreateGroup(ctx, "s", "g", &rheo.CreateGroupOptions{Partitions: []int{0, 1}}))

			// jsonb, text[], timestamptz and int arguments.
			at := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
			one := 1
			ev, err := d.Append(ctx, "s", json.RawMessage(`{"type": "t", "n": 1}`), &rheo.AppendOptions{
				Key: "k", Partition: &one, ID: "e-1", Metadata: json.RawMessage(`{"producer": "p"}`), TS: &at})
			require.NoError(t, err)
			require.Equal(t, 1, ev.Partition)
			require.True(t, at.Equal(ev.TS), "timestamptz keeps its microseconds: %s", ev.TS)
			require.JSONEq(t, `{"producer": "p"}`, string(ev.Metadata))
			batch, err := d.AppendBatch(ctx, "s", []rheo.BatchItem{
				{Payload: json.RawMessage(`{"n": 2}`), Key: "a", ID: "e-2"},
				{Payload: json.RawMessage(`{"n": 3}`), ID: "e-3"},
			}, nil)
			require.NoError(t, err)
			require.Len(t, batch, 2)

			// fetch in a transaction of its own (a batch of two statements),
			// with an int[] of partitions; ack_batch with a uuid[].
			leases, err := d.Fetch(ctx, "s", "g", &rheo.FetchOptions{MaxCount: 10, Partitions: []int{0, 1}})
			require.NoError(t, err)
			require.Len(t, leases, 3)
			ids := []string{leases[0].LeaseID, leases[1].LeaseID, leases[0].LeaseID}
			results, err := d.AckBatch(ctx, ids)
			require.NoError(t, err)
			require.Equal(t, []bool{true, true, false}, []bool{results[0].OK, results[1].OK, results[2].OK})

			// InTx: an append and an ack that commit together, or not at all.
			last := leases[2]
			errRollback := errors.New("roll back")
			err = d.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
				if _, err := tx.Append(ctx, "s", json.RawMessage(`{"n": 4}`), &rheo.AppendOptions{ID: "e-4"}); err != nil {
					return err
				}
				if err := tx.Ack(ctx, last.LeaseID); err != nil {
					return err
				}
				return errRollback
			})
			require.ErrorIs(t, err, errRollback)
			require.NoError(t, d.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
				if _, err := tx.Append(ctx, "s", json.RawMessage(`{"n": 4}`), &rheo.AppendOptions{ID: "e-4"}); err != nil {
					return err
				}
				return tx.Ack(ctx, last.LeaseID)
			}))
			require.ErrorIs(t, d.Ack(ctx, last.LeaseID), rheo.ErrStaleLease, "the ack committed")

			// uuid and text arguments of the other settles, and replay's
			// text[] of ids.
			leases, err = d.Fetch(ctx, "s", "g", nil)
			require.NoError(t, err)
			require.Len(t, leases, 1)
			_, err = d.Renew(ctx, leases[0].LeaseID, time.Minute)
			require.NoError(t, err)
			require.NoError(t, d.Reject(ctx, leases[0].LeaseID, "no"))
			n, err := d.Replay(ctx, "s", "g", &rheo.ReplayOptions{EventIDs: []string{"e-4", "e-1"}})
			require.NoError(t, err)
			require.Equal(t, int64(2), n)
			leases, err = d.Fetch(ctx, "s", "g", nil)
			require.NoError(t, err)
			require.Len(t, leases, 2)
			require.ElementsMatch(t, []string{"e-1", "e-4"}, []string{leases[0].Event.ID, leases[1].Event.ID})
			_, err = d.Lag(ctx, "s", "g", []int{0, 1})
			require.NoError(t, err)
			page, err := d.Query(ctx, "s", rheo.Query{Type: "t"})
			require.NoError(t, err)
			require.Len(t, page.Events, 1)
		})
	}

	t.Run("a worker drains a stream", func(t *testing.T) {
		direct, pooled := pgbouncerDatabase(t, b, "exec")
		d := pooledDriver(t, pooled, postgres.Options{ListenConfig: mustConnConfig(t, direct)})
		const events = 300
		require.NoError(t, d.CreateStream(ctx, "s", 4))
		require.NoError(t, d.CreateGroup(ctx, "s", "g", nil))
		items := make([]rheo.BatchItem, events)
		for i := range items {
			items[i] = rheo.BatchItem{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), Key: fmt.Sprint(i)}
		}
		_, err := d.AppendBatch(ctx, "s", items, nil)
		require.NoError(t, err)

		var mu sync.Mutex
		seen := map[string]bool{}
		all := make(chan struct{})
		w, err := worker.New(d, &worker.Config{
			Stream: "s", Group: "g", Concurrency: 8,
			TxHandler: func(ctx context.Context, tx driver.Tx, lease rheo.Lease) error {
				// A write of the handler's own, in the transaction of the ack.
				_, err := tx.Native().(pgx.Tx).Exec(ctx, `SELECT $1::text`, lease.Event.ID)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				seen[lease.Event.ID] = true
				if len(seen) == events {
					close(all)
				}
				return nil
			},
		})
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		select {
		case <-all:
		case <-time.After(60 * time.Second):
			require.FailNow(t, fmt.Sprintf("the worker handled %d of %d events in 60s", len(seen), events))
		}
		require.NoError(t, w.Stop(ctx))
		lag, err := d.Lag(ctx, "s", "g", nil)
		require.NoError(t, err)
		require.Zero(t, lag.Total)
	})

	t.Run("with the listener on a direct connection an idle worker wakes at once", func(t *testing.T) {
		direct, pooled := pgbouncerDatabase(t, b, "exec")
		listen := mustConnConfig(t, direct)
		listen.RuntimeParams["application_name"] = "rheo-direct-listener"
		logs := testlog.New()
		d := pooledDriver(t, pooled, postgres.Options{ListenConfig: listen, Logger: logs.Logger()})
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		require.NoError(t, d.CreateGroup(ctx, "s", "g", nil))

		// A poll interval that the test would fail long before.
		const pollInterval = 10 * time.Minute
		fetched := make(fetchSignal, 16)
		handled := make(chan time.Time, 1)
		w, err := worker.New(d, &worker.Config{
			Stream: "s", Group: "g", PollInterval: pollInterval, Hooks: []any{fetched},
			Handler: func(context.Context, rheo.Lease) error {
				handled <- time.Now()
				return nil
			},
		})
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		defer w.Stop(context.WithoutCancel(ctx))
		select {
		case info := <-fetched:
			require.Zero(t, info.Count, "the worker is idle")
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the worker did not fetch")
		}
		directPool, err := pgxpool.New(ctx, direct)
		require.NoError(t, err)
		defer directPool.Close()
		require.Eventually(t, func() bool {
			var n int
			err := directPool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE application_name = 'rheo-direct-listener' AND query = 'LISTEN rheo_events'`).Scan(&n)
			return err == nil && n == 1
		}, 30*time.Second, 10*time.Millisecond, "the listener listens on its direct connection")

		appended := time.Now()
		_, err = d.Append(ctx, "s", json.RawMessage(`{}`), nil)
		require.NoError(t, err)
		select {
		case at := <-handled:
			took := at.Sub(appended)
			t.Logf("an idle worker with a %s poll interval handled a new event after %s", pollInterval, took)
			require.Less(t, took, pollInterval/20)
		case <-time.After(pollInterval / 20):
			require.FailNow(t, "the idle worker was not woken")
		}
		require.Zero(t, logs.Count(slog.LevelWarn, ""), "%v", logs.Records())
	})

	t.Run("with the listener through the pooler the lost-wakeup warning is logged once", func(t *testing.T) {
		// Nothing is appended once the listener listens: the server
		// connection that ran its LISTEN keeps receiving notifications,
		// and PgBouncer 1.18 then sometimes hands a statement of another
		// client the result of a different one (docs/pgbouncer.md), which
		// would fail this test for PgBouncer's reasons. The checks alone
		// are the notifications here, and the worker's fetches find
		// nothing either way.
		_, pooled := pgbouncerDatabase(t, b, "exec")
		logs := testlog.New()
		d := pooledDriver(t, pooled, postgres.Options{Logger: logs.Logger(), WakeupCheckInterval: 100 * time.Millisecond})
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		require.NoError(t, d.CreateGroup(ctx, "s", "g", nil))
		w, err := worker.New(d, &worker.Config{
			Stream: "s", Group: "g", PollInterval: 50 * time.Millisecond,
			Handler: func(context.Context, rheo.Lease) error { return nil },
		})
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		defer w.Stop(context.WithoutCancel(ctx))

		logs.WaitCount(t, 30*time.Second, 1, slog.LevelWarn, "notifications do not reach the listener")
		logs.WaitCount(t, 30*time.Second, 5, slog.LevelDebug, "a check notification did not come back")
		require.Equal(t, 1, logs.Count(slog.LevelWarn, ""), "one warning: %v", logs.Records())
		t.Logf("the warning: %s", logs.Records()[0].Message)
	})

	t.Run("in poll-only mode nothing listens and a worker drains by polling", func(t *testing.T) {
		direct, pooled := pgbouncerDatabase(t, b, "exec")
		logs := testlog.New()
		d := pooledDriver(t, pooled, postgres.Options{PollOnly: true, Logger: logs.Logger()})
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		require.NoError(t, d.CreateGroup(ctx, "s", "g", nil))
		handled := make(chan struct{}, 10)
		w, err := worker.New(d, &worker.Config{
			Stream: "s", Group: "g", PollInterval: 50 * time.Millisecond,
			Handler: func(context.Context, rheo.Lease) error {
				handled <- struct{}{}
				return nil
			},
		})
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		defer w.Stop(context.WithoutCancel(ctx))
		for range 3 {
			_, err = d.Append(ctx, "s", json.RawMessage(`{}`), nil)
			require.NoError(t, err)
			select {
			case <-handled:
			case <-time.After(30 * time.Second):
				require.FailNow(t, "the worker did not poll the event in")
			}
		}
		directPool, err := pgxpool.New(ctx, direct)
		require.NoError(t, err)
		defer directPool.Close()
		var listening int
		require.NoError(t, directPool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&listening))
		require.Zero(t, listening)
		require.Empty(t, logs.Records())
	})

	t.Run("connect.Open takes the exec mode and the listener's URL from the database URL", func(t *testing.T) {
		direct, pooled := pgbouncerDatabase(t, b, "exec")
		u, err := url.Parse(pooled)
		require.NoError(t, err)
		q := u.Query()
		q.Set(postgres.ParamListenURL, direct)
		u.RawQuery = q.Encode()
		drv, err := connect.Open(ctx, u.String(), nil)
		require.NoError(t, err)
		defer drv.Close()
		require.NoError(t, drv.CreateStream(ctx, "s", 1))
		wake, stop := drv.Wakeups("s")
		defer stop()
		directPool, err := pgxpool.New(ctx, direct)
		require.NoError(t, err)
		defer directPool.Close()
		require.Eventually(t, func() bool {
			var n int
			err := directPool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND query = 'LISTEN rheo_events' AND state = 'idle'`).Scan(&n)
			return err == nil && n == 1
		}, 30*time.Second, 10*time.Millisecond)
		_, err = drv.Append(ctx, "s", json.RawMessage(`{}`), nil)
		require.NoError(t, err)
		select {
		case w := <-wake:
			require.Equal(t, "s", w.Stream)
		case <-time.After(30 * time.Second):
			require.FailNow(t, "no wakeup")
		}
	})
}
