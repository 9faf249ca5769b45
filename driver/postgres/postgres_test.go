package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testbackend"
)

// newDatabase returns the URL of a fresh migrated database.
func newDatabase(t *testing.T) string {
	t.Helper()
	return testbackend.PostgresURL(t)
}

// setup returns a driver on its own pool of a fresh database, and the
// pool for plain SQL.
func setup(t *testing.T) (*postgres.Driver, *pgxpool.Pool) {
	t.Helper()
	url := newDatabase(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d := postgres.New(pool, nil)
	t.Cleanup(func() { _ = d.Close() })
	return d, pool
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t.Run("an opened driver owns its pool and closes it", func(t *testing.T) {
		d, err := postgres.Open(ctx, newDatabase(t), nil)
		require.NoError(t, err)
		require.NoError(t, d.Ping(ctx))
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		require.NoError(t, d.Close())
		require.NoError(t, d.Close(), "Close is idempotent")
		err = d.Ping(ctx)
		require.ErrorIs(t, err, rheo.ErrBackendUnavailable)
		_, err = d.Append(ctx, "s", json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, rheo.ErrBackendUnavailable, "a write on a closed pool is definitely not done")
	})

	t.Run("a malformed url reports invalid_argument", func(t *testing.T) {
		_, err := postgres.Open(ctx, "postgres://%zz", nil)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})

	t.Run("an unreachable server reports backend_unavailable", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", nil)
		require.ErrorIs(t, err, rheo.ErrBackendUnavailable)
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	t.Run("closing the driver leaves the host's pool open", func(t *testing.T) {
		d, pool := setup(t)
		require.NoError(t, d.Close())
		require.NoError(t, pool.Ping(t.Context()))
		require.Same(t, pool, d.Pool())
	})

	t.Run("the database clock is used without Options.Clock", func(t *testing.T) {
		d, pool := setup(t)
		ctx := t.Context()
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		ev, err := d.Append(ctx, "s", json.RawMessage(`{}`), nil)
		require.NoError(t, err)
		var now time.Time
		require.NoError(t, pool.QueryRow(ctx, "SELECT now()").Scan(&now))
		require.WithinDuration(t, now, ev.TS, time.Minute)
	})

	t.Run("Options.Clock is the clock of every operation", func(t *testing.T) {
		url := newDatabase(t)
		pool, err := pgxpool.New(t.Context(), url)
		require.NoError(t, err)
		defer pool.Close()
		at := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		d := postgres.New(pool, &postgres.Options{Clock: drivertest.ClockAt(at)})
		defer d.Close()
		ctx := t.Context()
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		streams, err := d.ListStreams(ctx)
		require.NoError(t, err)
		require.True(t, at.Equal(streams[0].CreatedAt))
		require.Empty(t, streams[0].Node, "a single server names no node")
	})
}

func TestErrors(t *testing.T) {
	t.Parallel()
	d, pool := setup(t)
	ctx := t.Context()
	require.NoError(t, d.CreateStream(ctx, "s", 1))
	require.NoError(t, d.CreateGroup(ctx, "s", "g", nil))

	t.Run("a SQL error carries its sentinel and its detail", func(t *testing.T) {
		err := d.Ack(ctx, "00000000-0000-4000-8000-000000000000")
		require.ErrorIs(t, err, rheo.ErrStaleLease)
		require.Contains(t, err.Error(), "00000000-0000-4000-8000-000000000000")
		require.NotErrorIs(t, err, rheo.ErrFailed)
	})

	t.Run("input PostgreSQL cannot store reports invalid_argument", func(t *testing.T) {
		_, err := d.Append(ctx, "s", json.RawMessage(`{"a": "\u0000"}`), nil)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		_, err = d.Append(ctx, "s", json.RawMessage(`{}`), &rheo.AppendOptions{Key: "nul\x00"})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})

	t.Run("a write cut off by its deadline is ambiguous", func(t *testing.T) {
		release := lockPartition(t, pool, "s")
		defer release()
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := d.Append(ctx, "s", json.RawMessage(`{}`), nil)
		var ambiguous *rheo.AmbiguousError
		require.ErrorAs(t, err, &ambiguous)
		require.Equal(t, "append", ambiguous.Op)
		require.ErrorIs(t, err, rheo.ErrAmbiguous)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})

	t.Run("a write cut off inside a transaction is a definite failure", func(t *testing.T) {
		release := lockPartition(t, pool, "s")
		defer release()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err = d.WithTx(tx).Append(ctx, "s", json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, rheo.ErrFailed)
		require.NotErrorIs(t, err, rheo.ErrAmbiguous)
	})

	t.Run("a cancelled context is a definite failure for writes and reads", func(t *testing.T) {
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err := d.Append(cancelled, "s", json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, rheo.ErrFailed)
		require.ErrorIs(t, err, context.Canceled)
		_, err = d.Read(cancelled, "s", nil)
		require.ErrorIs(t, err, rheo.ErrFailed)
	})
}

// lockPartition holds the sequence allocator of the stream's partition 0
// in a transaction of its own until release is called, so appends wait.
func lockPartition(t *testing.T, pool *pgxpool.Pool, stream string) (release func()) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM rheo.partitions WHERE stream = $1 AND "partition" = 0 FOR UPDATE`, stream)
	require.NoError(t, err)
	return func() { _ = tx.Rollback(ctx) }
}

func TestWithTx(t *testing.T) {
	t.Parallel()
	d, pool := setup(t)
	ctx := t.Context()
	require.NoError(t, d.CreateStream(ctx, "s", 1))
	_, err := pool.Exec(ctx, `CREATE TABLE host_orders (id text PRIMARY KEY)`)
	require.NoError(t, err)

	appendWithOrder := func(t *testing.T, id string, commit bool) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		rtx := d.WithTx(tx)
		require.Same(t, tx, rtx.Native())
		require.Same(t, tx, postgres.PgxTx(rtx), "PgxTx is the host's transaction")
		_, err = tx.Exec(ctx, `INSERT INTO host_orders VALUES ($1)`, id)
		require.NoError(t, err)
		_, err = rtx.Append(ctx, "s", json.RawMessage(`{}`), &rheo.AppendOptions{ID: id})
		require.NoError(t, err)
		if commit {
			require.NoError(t, tx.Commit(ctx))
		}
	}
	count := func(t *testing.T) (orders, events int) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM host_orders), (SELECT count(*) FROM rheo.events)`).
			Scan(&orders, &events))
		return orders, events
	}

	t.Run("a rolled back host transaction keeps neither write", func(t *testing.T) {
		appendWithOrder(t, "o-1", false)
		orders, events := count(t)
		require.Zero(t, orders)
		require.Zero(t, events)
	})

	t.Run("a committed host transaction keeps both writes", func(t *testing.T) {
		appendWithOrder(t, "o-2", true)
		orders, events := count(t)
		require.Equal(t, 1, orders)
		require.Equal(t, 1, events)
	})

	t.Run("a failed append leaves the host transaction usable, its order kept", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		rtx := d.WithTx(tx)
		_, err = tx.Exec(ctx, `INSERT INTO host_orders VALUES ('o-3')`)
		require.NoError(t, err)
		_, err = rtx.Append(ctx, "s", json.RawMessage(`{"other": true}`), &rheo.AppendOptions{ID: "o-2"})
		require.ErrorIs(t, err, rheo.ErrAlreadyExists, "o-2's event has other content")
		_, err = tx.Exec(ctx, `INSERT INTO host_orders VALUES ('o-4')`)
		require.NoError(t, err, "the host's own statements go on")
		require.NoError(t, tx.Commit(ctx))
		orders, events := count(t)
		require.Equal(t, 3, orders)
		require.Equal(t, 1, events)
	})
}

// listenerPID returns the backend of the driver's LISTEN connection, or 0.
func listenerPID(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var pid int
	err := pool.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN rheo_events' AND state = 'idle'`).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	require.NoError(t, err)
	return pid
}

func waitForListener(t *testing.T, pool *pgxpool.Pool, other int) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		pid = listenerPID(t, pool)
		return pid != 0 && pid != other
	}, 10*time.Second, 10*time.Millisecond, "the driver listens")
	return pid
}

func receive(t *testing.T, ch <-chan driver.Wakeup) driver.Wakeup {
	t.Helper()
	select {
	case w, ok := <-ch:
		require.True(t, ok, "the channel is open")
		return w
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no wakeup within 10s")
		return driver.Wakeup{}
	}
}

func requireClosed(t *testing.T, ch <-chan driver.Wakeup) {
	t.Helper()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the channel is still open")
		}
	}
}

// verifyNoLeaks checks, after every other cleanup of t, that no goroutine
// started during t is left.
func verifyNoLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func TestWakeups(t *testing.T) {
	verifyNoLeaks(t)
	d, pool := setup(t)
	ctx := t.Context()
	require.NoError(t, d.CreateStream(ctx, "a", 2))
	require.NoError(t, d.CreateStream(ctx, "b", 1))
	require.Zero(t, listenerPID(t, pool), "no connection before the first subscription")

	a1, stopA1 := d.Wakeups("a")
	a2, stopA2 := d.Wakeups("a")
	b, stopB := d.Wakeups("b")
	waitForListener(t, pool, 0)

	t.Run("an append wakes every subscriber of its stream", func(t *testing.T) {
		_, err := d.Append(ctx, "a", json.RawMessage(`{}`), &rheo.AppendOptions{Partition: new(int)})
		require.NoError(t, err)
		want := driver.Wakeup{Stream: "a", Partition: 0, Sequence: 1}
		require.Equal(t, want, receive(t, a1))
		require.Equal(t, want, receive(t, a2))
		require.Empty(t, b, "the other stream's subscriber")
	})

	t.Run("a batch wakes once per partition with its highest sequence", func(t *testing.T) {
		one := 1
		_, err := d.AppendBatch(ctx, "a", []rheo.BatchItem{{Payload: json.RawMessage(`{}`)}, {Payload: json.RawMessage(`{}`)}},
			&rheo.AppendBatchOptions{Partition: &one})
		require.NoError(t, err)
		require.Equal(t, driver.Wakeup{Stream: "a", Partition: 1, Sequence: 2}, receive(t, a1))
		require.Empty(t, a1)
		receive(t, a2)
	})

	t.Run("ending a subscription closes its channel", func(t *testing.T) {
		stopA2()
		stopA2()
		requireClosed(t, a2)
		_, err := d.Append(ctx, "a", json.RawMessage(`{}`), nil)
		require.NoError(t, err)
		require.Equal(t, "a", receive(t, a1).Stream, "the other subscriber still hears")
	})

	t.Run("the last subscription stops the connection", func(t *testing.T) {
		stopA1()
		stopB()
		requireClosed(t, b)
		require.Eventually(t, func() bool { return listenerPID(t, pool) == 0 }, 10*time.Second, 10*time.Millisecond)
	})

	t.Run("a new subscription starts it again and Close ends it", func(t *testing.T) {
		c, stopC := d.Wakeups("b")
		waitForListener(t, pool, 0)
		_, err := d.Append(ctx, "b", json.RawMessage(`{}`), nil)
		require.NoError(t, err)
		require.Equal(t, driver.Wakeup{Stream: "b", Sequence: 1}, receive(t, c))
		require.NoError(t, d.Close())
		requireClosed(t, c)
		stopC()
		after, stopAfter := d.Wakeups("b")
		requireClosed(t, after)
		stopAfter()
	})
}

// TestWakeupsForged sends notifications on rheo_events that Rheo's
// appends never send: any role may NOTIFY the channel. Payloads that are
// not a wakeup are dropped, forged ones are a wakeup and nothing more,
// and the listener keeps listening.
func TestWakeupsForged(t *testing.T) {
	verifyNoLeaks(t)
	d, pool := setup(t)
	ctx := t.Context()
	require.NoError(t, d.CreateStream(ctx, "a", 2))
	wake, stop := d.Wakeups("a")
	defer stop()
	waitForListener(t, pool, 0)

	notify := func(payload string) {
		t.Helper()
		_, err := pool.Exec(ctx, `SELECT pg_notify('rheo_events', $1)`, payload)
		require.NoError(t, err)
	}
	for _, payload := range []string{
		``, `not json`, `[1, 2]`, `"a"`, `null`, `{}`,
		`{"stream": 7}`, `{"stream": ""}`, `{"stream": "a", "partition": "0"}`,
		`{"stream": "a", "partition": 1e30}`, `{"stream": "a", "sequence": 1.5}`,
		`{"stream": "a", "partition": 0, "sequence": 1` /* cut short */, `{"stream": "a"} {"stream": "a"}`,
	} {
		notify(payload)
	}
	// A forged wakeup that is well formed is delivered as a hint like any
	// other: the values are whatever the sender chose, and consumers only
	// ever fetch on it.
	notify(`{"stream": "a", "partition": -3, "sequence": -9, "extra": {"x": 1}}`)
	require.Equal(t, driver.Wakeup{Stream: "a", Partition: -3, Sequence: -9}, receive(t, wake))
	notify(`{"stream": "a", "partition": 0, "sequence": 1}` + strings.Repeat(" ", 7000))
	require.Equal(t, driver.Wakeup{Stream: "a", Partition: 0, Sequence: 1}, receive(t, wake))

	_, err := d.Append(ctx, "a", json.RawMessage(`{}`), &rheo.AppendOptions{Partition: new(int)})
	require.NoError(t, err)
	require.Equal(t, driver.Wakeup{Stream: "a", Partition: 0, Sequence: 1}, receive(t, wake), "the listener still listens")
	require.Empty(t, wake, "nothing else was delivered")
}

func TestWakeupsReconnect(t *testing.T) {
	verifyNoLeaks(t)
	d, pool := setup(t)
	ctx := t.Context()
	require.NoError(t, d.CreateStream(ctx, "s", 1))
	ch, stop := d.Wakeups("s")
	defer stop()
	first := waitForListener(t, pool, 0)

	_, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", first)
	require.NoError(t, err)
	waitForListener(t, pool, first)

	_, err = d.Append(ctx, "s", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	require.Equal(t, driver.Wakeup{Stream: "s", Sequence: 1}, receive(t, ch))
	require.NoError(t, d.Close())
}

// otherTx is a transaction of another database.
type otherTx struct{ driver.Tx }

func (otherTx) Native() any { return "not pgx" }

func TestPgxTxPanicsOnAnotherDatabase(t *testing.T) {
	t.Parallel()
	require.PanicsWithValue(t, "postgres.PgxTx: postgres_test.otherTx is not a PostgreSQL transaction (its Native is string)",
		func() { postgres.PgxTx(otherTx{}) })
}
