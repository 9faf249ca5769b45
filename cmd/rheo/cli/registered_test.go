package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
)

// noTxDriver is a driver of a registered scheme that lacks what some
// databases lack: it is no driver.Transactor, and it cannot search
// payloads. Everything else is an SQLite database's.
type noTxDriver struct {
	driver.Driver
}

// errNoSearch is the refusal of noTxDriver's Query.
var errNoSearch = fmt.Errorf("payload search: %w", errors.ErrUnsupported)

func (d noTxDriver) Query(ctx context.Context, stream string, q rheo.Query) (rheo.Page, error) {
	if q.Payload != nil {
		return rheo.Page{}, &rheo.FailedError{Op: "query", Err: errNoSearch}
	}
	return d.Driver.Query(ctx, stream, q)
}

// The scheme rheonotx opens the SQLite file of its path as a noTxDriver:
// rheonotx:///abs/path.db.
func init() {
	connect.Register(func(ctx context.Context, url string, opts *connect.Options) (driver.Driver, error) {
		drv, err := connect.Open(ctx, "sqlite://"+strings.TrimPrefix(url, "rheonotx://"), opts)
		if err != nil {
			return nil, err
		}
		return noTxDriver{drv}, nil
	}, "rheonotx")
}

// newNoTxBackend returns a migrated database of the registered scheme,
// with a stream "orders" of two partitions, a group "billing" and four
// events, two of them acked.
func newNoTxBackend(t *testing.T) *cliBackend {
	t.Helper()
	b := cliOpenBackend(t, "rheonotx://"+filepath.Join(t.TempDir(), "rheo.db"))
	_, isTx := b.drv.(driver.Transactor)
	require.False(t, isTx, "the registered driver is a Transactor")
	b.cliStream(t, "orders", 2, 3)
	b.cliAppend(t, "orders", 4)
	ctx := context.Background()
	leases, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 2})
	require.NoError(t, err)
	for _, l := range leases {
		require.NoError(t, b.drv.Ack(ctx, l.LeaseID))
	}
	return b
}

func TestCLIRegisteredDriver(t *testing.T) {
	t.Run("the help and the flags list the registered scheme", func(t *testing.T) {
		r := cliRun(t, "", "help")
		require.Equal(t, cli.ExitOK, r.code, "%s", r)
		require.Contains(t, r.stdout, "rheonotx://…", "rheo help")
		r = cliRun(t, "", "lag", "-h")
		require.Equal(t, cli.ExitOK, r.code, "%s", r)
		require.Contains(t, r.stdout, "rheonotx://…", "rheo lag -h")
	})

	t.Run("an unknown scheme is a usage error that lists the registered ones", func(t *testing.T) {
		r := cliRun(t, "", "lag", "orders", "billing", "--database-url", "mysql://db/app")
		require.Equal(t, cli.ExitUsage, r.code, "%s", r)
		require.Contains(t, r.stderr, `unsupported database URL scheme "mysql"`, "%s", r)
		require.Contains(t, r.stderr, "rheonotx://…", "%s", r)
	})

	t.Run("the read-only commands work as on the built-in databases", func(t *testing.T) {
		b := newNoTxBackend(t)
		require.Contains(t, b.ok(t, "streams"), "orders")
		require.Contains(t, b.ok(t, "groups", "orders"), "billing")
		lag := cliJSON[rheo.Lag](t, b.ok(t, "lag", "orders", "billing", "--output", "json"))
		require.Equal(t, int64(2), lag.Total, "lag")
		require.Contains(t, b.ok(t, "info", "orders", "billing"), "LAG")
		b.ok(t, "dead-letters", "orders", "billing")
		require.Contains(t, b.ok(t, "tail", "orders", "-n", "2"), `"type":"placed"`)
	})

	t.Run("replay works without transactions, one partition after the other", func(t *testing.T) {
		b := newNoTxBackend(t)
		out := b.ok(t, "replay", "orders", "billing", "--from-sequence", "0")
		require.Contains(t, out, "total", "replay's table")
		lag := b.lag(t, "orders")
		require.Equal(t, int64(4), lag.Total, "lag after the replay of everything")
	})

	t.Run("replay --dry-run says that it needs transactions and changes nothing", func(t *testing.T) {
		b := newNoTxBackend(t)
		b.fails(t, cli.ExitFailure, "the rheonotx driver cannot run a replay in a transaction (it is no driver.Transactor), so --dry-run cannot count",
			"replay", "orders", "billing", "--from-sequence", "0", "--dry-run")
		require.Equal(t, int64(2), b.lag(t, "orders").Total, "lag after the refused dry run")
	})

	t.Run("prune --dry-run says that it needs transactions", func(t *testing.T) {
		b := newNoTxBackend(t)
		b.fails(t, cli.ExitFailure, "the rheonotx driver cannot run a prune in a transaction (it is no driver.Transactor), so it cannot dry-run one",
			"prune", "orders", "--dry-run")
	})

	t.Run("a database without Rheo's set-up says how a registered driver sets it up", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "empty.db")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		r := cliRun(t, "", "lag", "orders", "billing", "--database-url", "rheonotx://"+path)
		cliWantFailure(t, r, cli.ExitFailure, "has no Rheo schema; install it with: a program that opens it with "+
			"connect.Options{Migrate: true} (the rheonotx driver's set-up; rheo-migrate installs PostgreSQL and SQLite only)")
	})

	t.Run("an operation the driver does not support is named as such", func(t *testing.T) {
		b := newNoTxBackend(t)
		b.fails(t, cli.ExitFailure, "the rheonotx driver cannot do this (payload search: unsupported operation); nothing was changed",
			"query", "orders", "--payload", `{"n":1}`)
	})
}
