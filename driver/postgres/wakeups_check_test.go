package postgres

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testlog"
)

const (
	lostMessage      = "notifications do not reach the listener"
	missedMessage    = "a check notification did not come back"
	recoveredMessage = "notifications reach the listener again"
)

// TestWakeupCheck drives the listener's check with a send that a test
// can make lose its notifications, as a pooler in transaction mode does.
func TestWakeupCheck(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	url := testdb.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	config, err := pgx.ParseConfig(url)
	require.NoError(t, err)

	type bundle struct {
		logs  *testlog.Recorder
		lose  *atomic.Bool  // the checks are not sent, and so never come back
		sent  *atomic.Int64 // checks sent or lost
		wake  <-chan driver.Wakeup
		close func()
	}
	// setup starts a listener that checks every `every`. Where checks must
	// come back, every leaves room for a loaded machine.
	setup := func(t *testing.T, every time.Duration) bundle {
		b := bundle{logs: testlog.New(), lose: &atomic.Bool{}, sent: &atomic.Int64{}}
		l := newListener(config, b.logs.Logger())
		l.checkWith(every, func(ctx context.Context, payload string) error {
			b.sent.Add(1)
			if b.lose.Load() {
				return nil
			}
			_, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, payload)
			return err
		})
		var stop func()
		b.wake, stop = l.subscribe("s")
		b.close = func() {
			stop()
			l.close()
		}
		t.Cleanup(b.close)
		return b
	}
	// waitSent waits until n more checks have been sent: each one after
	// the previous was judged.
	waitSent := func(t *testing.T, b bundle, n int64) {
		t.Helper()
		target := b.sent.Load() + n
		require.Eventually(t, func() bool { return b.sent.Load() >= target }, 10*time.Second, 5*time.Millisecond)
	}

	t.Run("checks that come back log nothing", func(t *testing.T) {
		b := setup(t, 500*time.Millisecond)
		waitSent(t, b, 3)
		require.Empty(t, b.logs.Records())
		require.Empty(t, b.wake, "a check is not a wakeup")
	})

	t.Run("lost checks warn once, however many are lost", func(t *testing.T) {
		b := setup(t, 50*time.Millisecond)
		b.lose.Store(true)
		b.logs.WaitCount(t, 10*time.Second, 1, slog.LevelWarn, lostMessage)
		b.logs.WaitCount(t, 10*time.Second, 3, slog.LevelDebug, missedMessage)
		require.Equal(t, 1, b.logs.Count(slog.LevelWarn, ""), "one warning: %v", b.logs.Records())
		warning := b.logs.Records()[0].Message
		for _, says := range []string{"rheo_listen_url", "ListenConfig", "rheo_poll_only", "PollOnly", "docs/pgbouncer.md"} {
			require.Contains(t, warning, says, "the warning says what to do")
		}
	})

	t.Run("checks that come back again end the loss quietly, and a new loss warns again", func(t *testing.T) {
		b := setup(t, 500*time.Millisecond)
		b.lose.Store(true)
		b.logs.WaitCount(t, 10*time.Second, 1, slog.LevelWarn, lostMessage)
		b.lose.Store(false)
		b.logs.WaitCount(t, 10*time.Second, 1, slog.LevelDebug, recoveredMessage)
		waitSent(t, b, 3)
		require.Equal(t, 1, b.logs.Count(slog.LevelWarn, ""), "no warning while checks come back: %v", b.logs.Records())
		b.lose.Store(true)
		b.logs.WaitCount(t, 10*time.Second, 2, slog.LevelWarn, lostMessage)
	})

	t.Run("a check that is not the one in flight proves nothing and wakes no one", func(t *testing.T) {
		b := setup(t, 50*time.Millisecond)
		b.lose.Store(true)
		stopForging := make(chan struct{})
		forged := make(chan struct{})
		go func() {
			defer close(forged)
			for {
				// Another listener's check, or a forged one, with a stream.
				_, _ = pool.Exec(context.Background(), `SELECT pg_notify('rheo_events', '{"rheo_check": "0123", "stream": "s"}')`)
				select {
				case <-stopForging:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
		b.logs.WaitCount(t, 10*time.Second, 1, slog.LevelWarn, lostMessage)
		close(stopForging)
		<-forged
		require.Empty(t, b.wake)
	})

	t.Run("a check that cannot be sent is not judged", func(t *testing.T) {
		logs := testlog.New()
		var sent atomic.Int64
		l := newListener(config, logs.Logger())
		l.checkWith(20*time.Millisecond, func(context.Context, string) error {
			sent.Add(1)
			return context.DeadlineExceeded
		})
		_, stop := l.subscribe("s")
		defer l.close()
		defer stop()
		require.Eventually(t, func() bool { return sent.Load() >= 5 }, 10*time.Second, 5*time.Millisecond)
		require.Zero(t, logs.Count(slog.LevelWarn, ""))
	})
}
