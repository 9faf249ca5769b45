package faultproxy_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rheo-go/rheo/internal/faultproxy"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testskip"
)

// setup returns a proxy to a fresh database, a pool through it, and a
// direct connection to look at what the server did.
func setup(t *testing.T) (*faultproxy.Proxy, *pgxpool.Pool, *pgx.Conn) {
	t.Helper()
	dsn := testdb.NewDatabase(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	p := faultproxy.New(t, u.Host)
	ctx := context.Background()
	direct, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = direct.Close(context.WithoutCancel(ctx)) })
	_, err = direct.Exec(ctx, "CREATE TABLE x (v int)")
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, p.URL(t, dsn))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return p, pool, direct
}

func count(t *testing.T, direct *pgx.Conn) int {
	t.Helper()
	var n int
	require.NoError(t, direct.QueryRow(context.Background(), "SELECT count(*) FROM x").Scan(&n))
	return n
}

func fired(t *testing.T, tr *faultproxy.Trigger) {
	t.Helper()
	select {
	case <-tr.Fired():
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the fault did not fire")
	}
}

func notFired(t *testing.T, tr *faultproxy.Trigger) {
	t.Helper()
	select {
	case <-tr.Fired():
		require.FailNow(t, "the fault fired")
	default:
	}
}

func TestProxy(t *testing.T) {
	ctx := context.Background()

	t.Run("unarmed, everything passes", func(t *testing.T) {
		_, pool, direct := setup(t)
		for i := range 3 {
			_, err := pool.Exec(ctx, "INSERT INTO x VALUES ($1)", i)
			require.NoError(t, err)
		}
		require.Equal(t, 3, count(t, direct))
	})

	t.Run("a cut after send runs the statement and loses its answer", func(t *testing.T) {
		p, pool, direct := setup(t)
		tr := p.Arm(faultproxy.CutAfterSend, faultproxy.Contains("INSERT INTO x"))
		// The first execution also prepares the statement: the request
		// that only prepares it passes, the one that executes it is cut.
		_, err := pool.Exec(ctx, "INSERT INTO x VALUES ($1)", 1)
		require.Error(t, err)
		fired(t, tr)
		require.Equal(t, 1, count(t, direct), "the insert committed before the connection was closed")

		_, err = pool.Exec(ctx, "INSERT INTO x VALUES ($1)", 2)
		require.NoError(t, err, "a fault fires once")
		require.Equal(t, 2, count(t, direct))
	})

	t.Run("a cut transaction is rolled back", func(t *testing.T) {
		p, pool, direct := setup(t)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		tr := p.Arm(faultproxy.CutAfterSend, faultproxy.Contains("INSERT INTO x"))
		_, err = tx.Exec(ctx, "INSERT INTO x VALUES ($1)", 1)
		require.Error(t, err)
		fired(t, tr)
		require.Eventually(t, func() bool {
			var n int
			require.NoError(t, direct.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n))
			return n == 0
		}, 10*time.Second, 10*time.Millisecond, "the server ends the session")
		require.Zero(t, count(t, direct))
	})

	t.Run("a black hole never delivers the statement", func(t *testing.T) {
		p, pool, direct := setup(t)
		// Connected first, so that the short deadline is spent on the
		// statement alone, whatever the load.
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, conn.Ping(ctx))
		tr := p.Arm(faultproxy.BlackHole, faultproxy.Contains("INSERT INTO x"))
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err = conn.Exec(cctx, "INSERT INTO x VALUES ($1)", 1)
		conn.Release()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		fired(t, tr)
		require.Zero(t, count(t, direct))
		_, err = pool.Exec(ctx, "INSERT INTO x VALUES ($1)", 2)
		require.NoError(t, err, "other connections pass")
		require.Equal(t, 1, count(t, direct))
	})

	t.Run("Statement matches the whole statement only", func(t *testing.T) {
		p, pool, direct := setup(t)
		tr := p.Arm(faultproxy.CutAfterSend, faultproxy.Statement("commit"))
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "SELECT set_config('synchronous_commit', 'off', true)")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "INSERT INTO x VALUES (1)")
		require.NoError(t, err)
		notFired(t, tr)
		require.Error(t, tx.Commit(ctx))
		fired(t, tr)
		require.Equal(t, 1, count(t, direct), "the commit went through")
	})

	t.Run("CutAll drops every connection and refuses new ones until Restore", func(t *testing.T) {
		p, pool, _ := setup(t)
		require.NoError(t, pool.Ping(ctx))
		p.CutAll()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		fresh, err := pgx.Connect(cctx, p.URL(t, pool.Config().ConnConfig.ConnString()))
		if err == nil {
			_ = fresh.Close(ctx)
		}
		require.Error(t, err)
		p.Restore()
		require.Eventually(t, func() bool { return pool.Ping(ctx) == nil }, 10*time.Second, 10*time.Millisecond)
	})
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testskip.Wrap(m))
}
