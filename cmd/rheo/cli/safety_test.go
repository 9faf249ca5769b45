package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/stretchr/testify/require"
)

// Stored text that would command the operator's terminal: a window title
// (OSC 0), a clipboard write (OSC 52), an 8-bit CSI, a right-to-left
// override and a zero-width space.
const (
	hostileID       = "id-\x1b]0;pwned\x07"
	hostileType     = "t\x1b]52;c;ZWNobyBoaQ==\x07"
	hostileKey      = "k\u202efdp.exe"
	hostileConsumer = "c\x1b[2J\u200b"
	hostileReason   = "r\x1b]0;title\x1b\\\u009b2J"
)

// actingRune reports a character the tables must not print as it is.
func actingRune(r rune) bool {
	return r != '\n' && (unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r))
}

// TestTablesEscapeStoredText stores ids, types, keys, consumer ids,
// reasons and payloads with control and invisible characters, and checks
// that the table output of query, tail, dead-letters and leases escapes
// them, while --output json gives them back exactly.
func TestTablesEscapeStoredText(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rheo.db")
	dbURL := "sqlite://" + path
	drv, err := connect.Open(ctx, dbURL, &connect.Options{Migrate: true})
	require.NoError(t, err)
	defer drv.Close()
	require.NoError(t, drv.CreateStream(ctx, "s", 1))
	for _, g := range []string{"dead", "busy"} {
		require.NoError(t, drv.CreateGroup(ctx, "s", g, &rheo.CreateGroupOptions{MaxAttempts: 1}))
	}
	payload := json.RawMessage(`{"type":"` + "t\\u001b]52;c;ZWNobyBoaQ==\\u0007" + `","note":"` + "\u009b2J \u202e \u200b" + `"}`)
	_, err = drv.Append(ctx, "s", payload, &rheo.AppendOptions{ID: hostileID, Key: hostileKey})
	require.NoError(t, err)
	leases, err := drv.Fetch(ctx, "s", "dead", &rheo.FetchOptions{ConsumerID: hostileConsumer})
	require.NoError(t, err, "Fetch")
	require.Len(t, leases, 1, "Fetch = %v", leases)
	require.NoError(t, drv.Reject(ctx, leases[0].LeaseID, hostileReason))
	_, err = drv.Fetch(ctx, "s", "busy", &rheo.FetchOptions{ConsumerID: hostileConsumer})
	require.NoError(t, err)

	run := func(t *testing.T, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := Run(ctx, append(args, "--database-url", dbURL), nil, &stdout, &stderr)
		require.Equal(t, ExitOK, code, "rheo %s: %s", strings.Join(args, " "), stderr.String())
		return stdout.String()
	}
	for _, args := range [][]string{
		{"query", "s"},
		{"tail", "s"},
		{"dead-letters", "s", "dead"},
		{"leases", "s", "busy"},
	} {
		t.Run("rheo "+strings.Join(args, " ")+" escapes the table", func(t *testing.T) {
			out := run(t, args...)
			require.True(t, utf8.ValidString(out), "the table holds control or invisible characters:\n%q", out)
			require.False(t, strings.ContainsFunc(out, actingRune), "the table holds control or invisible characters:\n%q", out)
			require.Contains(t, out, `\x1b]0;`, "the table does not show the escaped ESC:\n%s", out)
		})
	}
	t.Run("--output json keeps the stored text exact", func(t *testing.T) {
		var page rheo.Page
		require.NoError(t, json.Unmarshal([]byte(run(t, "query", "s", "--output", "json")), &page))
		require.Len(t, page.Events, 1, "query --output json = %+v, want the id and key as stored", page.Events)
		require.Equal(t, hostileID, page.Events[0].ID, "query --output json, want the id as stored")
		require.Equal(t, hostileKey, page.Events[0].Key, "query --output json, want the key as stored")
		var dls []rheo.DeadLetter
		require.NoError(t, json.Unmarshal([]byte(run(t, "dead-letters", "s", "dead", "--output", "json")), &dls))
		require.Len(t, dls, 1, "dead-letters --output json = %+v, want the reason as stored", dls)
		require.Equal(t, hostileReason, dls[0].Reason, "dead-letters --output json, want the reason as stored")
		var deliveries []rheo.Delivery
		require.NoError(t, json.Unmarshal([]byte(run(t, "leases", "s", "busy", "--output", "json")), &deliveries))
		require.Len(t, deliveries, 1, "leases --output json = %+v, want the consumer id as stored", deliveries)
		require.Equal(t, hostileConsumer, deliveries[0].ConsumerID, "leases --output json, want the consumer id as stored")
	})
}

// TestMessagesHidePassword gives rheo database URLs with a password in
// each form a URL can carry one: no message, and not the demo's banner,
// may repeat it, or a piece of it.
func TestMessagesHidePassword(t *testing.T) {
	ctx := context.Background()
	leaks := func(s string) bool { return strings.Contains(s, "hun") || strings.Contains(s, "ter2") }
	for _, raw := range []string{
		"postgres://app@127.0.0.1:1/app?password=hunter2",
		"postgres://app@127.0.0.1:1/app?sslmode=disable&sslpassword=hunter2",
		"postgres://app:hun@ter2@127.0.0.1:1/app",
		"postgres://app:hunter2@127.0.0.1:1/app?sslmode=sometimes",
		"postgres://app:hun/ter2@127.0.0.1:1/app",
	} {
		var stdout, stderr bytes.Buffer
		code := Run(ctx, []string{"streams", "--database-url", raw}, nil, &stdout, &stderr)
		msg := fmt.Sprintf("rheo streams --database-url %s: exit %d, output %q %q: want an error without the password",
			raw, code, stdout.String(), stderr.String())
		require.NotEqual(t, ExitOK, code, msg)
		require.False(t, leaks(stdout.String()+stderr.String()), msg)
	}

	t.Run("the command that installs the schema", func(t *testing.T) {
		u, err := url.Parse(testdb.NewDatabase(t)) // no schema
		require.NoError(t, err)
		q := u.Query()
		q.Set("password", "hunter2") // the test server trusts local connections
		u.RawQuery = q.Encode()
		var stdout, stderr bytes.Buffer
		code := Run(ctx, []string{"streams", "--database-url", u.String()}, nil, &stdout, &stderr)
		msg := fmt.Sprintf("rheo streams on a database without the schema: exit %d, %q: want the install command without the password",
			code, stderr.String())
		require.NotEqual(t, ExitOK, code, msg)
		require.Contains(t, stderr.String(), "rheo-migrate up", msg)
		require.False(t, leaks(stderr.String()), msg)
	})
	t.Run("the demo's banner", func(t *testing.T) {
		dbURL := testdb.NewDatabase(t)
		drv, err := connect.Open(ctx, dbURL, &connect.Options{Migrate: true})
		require.NoError(t, err)
		drv.Close()
		u, err := url.Parse(dbURL)
		require.NoError(t, err)
		q := u.Query()
		q.Set("password", "hunter2") // the test server trusts local connections
		u.RawQuery = q.Encode()
		// The demo stops at the first line it prints: only the banner is
		// at stake here.
		demoCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		stdout := &cancelOnWrite{cancel: cancel}
		var stderr bytes.Buffer
		Run(demoCtx, []string{"demo", "--database-url", u.String()}, nil, stdout, &stderr)
		require.Contains(t, stdout.String(), "Rheo demo on PostgreSQL at", "the demo printed %q %q: want its banner without the password", stdout.String(), stderr.String())
		require.False(t, leaks(stdout.String()+stderr.String()), "the demo printed %q %q: want its banner without the password", stdout.String(), stderr.String())
	})
}

// cancelOnWrite is a writer that cancels a context at its first write.
type cancelOnWrite struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	defer w.cancel()
	return w.Buffer.Write(p)
}
