package postgres_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testlog"
)

// withParams returns databaseURL with the query parameters set.
func withParams(t *testing.T, databaseURL string, params ...string) string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	require.NoError(t, err)
	q := u.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// listenerApp returns the application_name of the driver's LISTEN
// connection, or "" when none listens.
func listenerApp(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var app string
	err := pool.QueryRow(t.Context(), `SELECT application_name FROM pg_stat_activity
		WHERE query = 'LISTEN rheo_events' AND state = 'idle'`).Scan(&app)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	require.NoError(t, err)
	return app
}

func TestPollOnly(t *testing.T) {
	verifyNoLeaks(t)
	ctx := t.Context()

	t.Run("a poll-only driver never listens and its subscriptions receive nothing", func(t *testing.T) {
		url := newDatabase(t)
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		defer pool.Close()
		d := postgres.New(pool, &postgres.Options{PollOnly: true})
		defer d.Close()
		require.False(t, d.Capabilities().Notifications)
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		wake, stop := d.Wakeups("s")
		_, err = d.Append(ctx, "s", json.RawMessage(`{}`), nil)
		require.NoError(t, err)
		var listeners int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&listeners))
		require.Zero(t, listeners)
		require.Empty(t, wake)
		stop()
		requireClosed(t, wake)
		wake, _ = d.Wakeups("s")
		require.NoError(t, d.Close())
		requireClosed(t, wake)
	})

	t.Run("rheo_poll_only=true in the URL is poll-only mode, and is not sent to the server", func(t *testing.T) {
		d, err := postgres.Open(ctx, withParams(t, newDatabase(t), postgres.ParamPollOnly, "true"), nil)
		require.NoError(t, err)
		defer d.Close()
		require.False(t, d.Capabilities().Notifications)
		require.NoError(t, d.Ping(ctx))
	})
}

func TestListenConfig(t *testing.T) {
	verifyNoLeaks(t)
	ctx := t.Context()

	t.Run("the listener connects with ListenConfig, and appends through the pool wake it", func(t *testing.T) {
		url := newDatabase(t)
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		defer pool.Close()
		config, err := pgx.ParseConfig(withParams(t, url, "application_name", "rheo-direct-listener"))
		require.NoError(t, err)
		logs := testlog.New()
		d := postgres.New(pool, &postgres.Options{ListenConfig: config, Logger: logs.Logger()})
		defer d.Close()
		require.True(t, d.Capabilities().Notifications)
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		wake, stop := d.Wakeups("s")
		defer stop()
		require.Eventually(t, func() bool { return listenerApp(t, pool) == "rheo-direct-listener" }, 10*time.Second, 10*time.Millisecond)
		_, err = d.Append(ctx, "s", json.RawMessage(`{}`), nil)
		require.NoError(t, err)
		require.Equal(t, "s", receive(t, wake).Stream)
		require.Zero(t, logs.Count(slog.LevelWarn, ""))
	})

	t.Run("rheo_listen_url in the URL is the listener's connection, and is not sent to the server", func(t *testing.T) {
		url := newDatabase(t)
		d, err := postgres.Open(ctx, withParams(t, url, postgres.ParamListenURL,
			withParams(t, url, "application_name", "rheo-url-listener")), nil)
		require.NoError(t, err)
		defer d.Close()
		require.NoError(t, d.CreateStream(ctx, "s", 1))
		wake, stop := d.Wakeups("s")
		defer stop()
		require.Eventually(t, func() bool { return listenerApp(t, d.Pool()) == "rheo-url-listener" }, 10*time.Second, 10*time.Millisecond)
		_, err = d.Append(ctx, "s", json.RawMessage(`{}`), nil)
		require.NoError(t, err)
		require.Equal(t, "s", receive(t, wake).Stream)
	})

	t.Run("a listener that cannot hear the pool's notifications warns once", func(t *testing.T) {
		// Notifications never cross databases: a listener on another
		// database hears none, as one behind a transaction-mode pooler.
		url := newDatabase(t)
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		defer pool.Close()
		config, err := pgx.ParseConfig(testdb.NewDatabase(t))
		require.NoError(t, err)
		logs := testlog.New()
		d := postgres.New(pool, &postgres.Options{ListenConfig: config, Logger: logs.Logger(), WakeupCheckInterval: 50 * time.Millisecond})
		defer d.Close()
		_, stop := d.Wakeups("s")
		defer stop()
		logs.WaitCount(t, 10*time.Second, 1, slog.LevelWarn, "notifications do not reach the listener")
		logs.WaitCount(t, 10*time.Second, 3, slog.LevelDebug, "did not come back")
		require.Equal(t, 1, logs.Count(slog.LevelWarn, ""), "%v", logs.Records())
	})
}

func TestOpenURLParameters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := newDatabase(t)
	for _, tc := range []struct {
		name   string
		params []string
		opts   *postgres.Options
	}{
		{"rheo_poll_only must be a boolean", []string{postgres.ParamPollOnly, "sometimes"}, nil},
		{"rheo_listen_url must be a connection string", []string{postgres.ParamListenURL, "postgres://%zz"}, nil},
		{"poll-only mode and a listener URL exclude each other",
			[]string{postgres.ParamPollOnly, "true", postgres.ParamListenURL, url}, nil},
		{"a listener URL and Options.ListenConfig exclude each other",
			[]string{postgres.ParamListenURL, url}, &postgres.Options{ListenConfig: mustParse(t, url)}},
		{"rheo_poll_only and Options.ListenConfig exclude each other",
			[]string{postgres.ParamPollOnly, "true"}, &postgres.Options{ListenConfig: mustParse(t, url)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := postgres.Open(ctx, withParams(t, url, tc.params...), tc.opts)
			require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		})
	}

	t.Run("rheo_poll_only=false changes nothing", func(t *testing.T) {
		d, err := postgres.Open(ctx, withParams(t, url, postgres.ParamPollOnly, "false"), nil)
		require.NoError(t, err)
		defer d.Close()
		require.True(t, d.Capabilities().Notifications)
	})

	t.Run("a keyword/value string takes the parameters too", func(t *testing.T) {
		config := mustParse(t, url)
		dsn := "host=" + config.Host + " port=" + strconv.Itoa(int(config.Port)) + " user=" + config.User +
			" dbname=" + config.Database + " sslmode=disable " + postgres.ParamPollOnly + "=true"
		d, err := postgres.Open(ctx, dsn, nil)
		require.NoError(t, err)
		defer d.Close()
		require.False(t, d.Capabilities().Notifications)
	})
}

func TestSimpleProtocol(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, err := postgres.Open(ctx, withParams(t, newDatabase(t), "default_query_exec_mode", "simple_protocol"), nil)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.CreateStream(ctx, "s", 1))

	t.Run("a NUL character in a text argument is invalid_argument, as in the extended protocol", func(t *testing.T) {
		_, err := d.Append(ctx, "s", json.RawMessage(`{}`), &rheo.AppendOptions{Key: "nul\x00"})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		_, err = d.Fetch(ctx, "s", "g", &rheo.FetchOptions{ConsumerID: "c\x00"})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		_, err = d.Replay(ctx, "s", "g", &rheo.ReplayOptions{EventIDs: []string{"a", "\x00"}})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		_, err = d.AppendBatch(ctx, "s", []rheo.BatchItem{{Payload: json.RawMessage(`{}`), ID: "x\x00"}}, nil)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		events, err := d.Read(ctx, "s", nil)
		require.NoError(t, err)
		require.Empty(t, events, "nothing was written")
	})
}

func mustParse(t *testing.T, url string) *pgx.ConnConfig {
	t.Helper()
	config, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	return config
}
