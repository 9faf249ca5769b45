package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/internal/testdb"
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
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	if err := drv.CreateStream(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"dead", "busy"} {
		if err := drv.CreateGroup(ctx, "s", g, &rheo.CreateGroupOptions{MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	payload := json.RawMessage(`{"type":"` + "t\\u001b]52;c;ZWNobyBoaQ==\\u0007" + `","note":"` + "\u009b2J \u202e \u200b" + `"}`)
	if _, err := drv.Append(ctx, "s", payload, &rheo.AppendOptions{ID: hostileID, Key: hostileKey}); err != nil {
		t.Fatal(err)
	}
	leases, err := drv.Fetch(ctx, "s", "dead", &rheo.FetchOptions{ConsumerID: hostileConsumer})
	if err != nil || len(leases) != 1 {
		t.Fatalf("Fetch = %v, %v", leases, err)
	}
	if err := drv.Reject(ctx, leases[0].LeaseID, hostileReason); err != nil {
		t.Fatal(err)
	}
	if _, err := drv.Fetch(ctx, "s", "busy", &rheo.FetchOptions{ConsumerID: hostileConsumer}); err != nil {
		t.Fatal(err)
	}

	run := func(t *testing.T, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := Run(ctx, append(args, "--database-url", dbURL), nil, &stdout, &stderr); code != ExitOK {
			t.Fatalf("rheo %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
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
			if !utf8.ValidString(out) || strings.ContainsFunc(out, actingRune) {
				t.Fatalf("the table holds control or invisible characters:\n%q", out)
			}
			if !strings.Contains(out, `\x1b]0;`) {
				t.Fatalf("the table does not show the escaped ESC:\n%s", out)
			}
		})
	}
	t.Run("--output json keeps the stored text exact", func(t *testing.T) {
		var page rheo.Page
		if err := json.Unmarshal([]byte(run(t, "query", "s", "--output", "json")), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Events) != 1 || page.Events[0].ID != hostileID || page.Events[0].Key != hostileKey {
			t.Fatalf("query --output json = %+v, want the id and key as stored", page.Events)
		}
		var dls []rheo.DeadLetter
		if err := json.Unmarshal([]byte(run(t, "dead-letters", "s", "dead", "--output", "json")), &dls); err != nil {
			t.Fatal(err)
		}
		if len(dls) != 1 || dls[0].Reason != hostileReason {
			t.Fatalf("dead-letters --output json = %+v, want the reason as stored", dls)
		}
		var deliveries []rheo.Delivery
		if err := json.Unmarshal([]byte(run(t, "leases", "s", "busy", "--output", "json")), &deliveries); err != nil {
			t.Fatal(err)
		}
		if len(deliveries) != 1 || deliveries[0].ConsumerID != hostileConsumer {
			t.Fatalf("leases --output json = %+v, want the consumer id as stored", deliveries)
		}
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
		if code == ExitOK || leaks(stdout.String()+stderr.String()) {
			t.Fatalf("rheo streams --database-url %s: exit %d, output %q %q: want an error without the password",
				raw, code, stdout.String(), stderr.String())
		}
	}

	t.Run("the command that installs the schema", func(t *testing.T) {
		u, err := url.Parse(testdb.NewDatabase(t)) // no schema
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("password", "hunter2") // the test server trusts local connections
		u.RawQuery = q.Encode()
		var stdout, stderr bytes.Buffer
		code := Run(ctx, []string{"streams", "--database-url", u.String()}, nil, &stdout, &stderr)
		if code == ExitOK || !strings.Contains(stderr.String(), "rheo-migrate up") || leaks(stderr.String()) {
			t.Fatalf("rheo streams on a database without the schema: exit %d, %q: want the install command without the password",
				code, stderr.String())
		}
	})
	t.Run("the demo's banner", func(t *testing.T) {
		dbURL := testdb.NewDatabase(t)
		drv, err := connect.Open(ctx, dbURL, &connect.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		drv.Close()
		u, err := url.Parse(dbURL)
		if err != nil {
			t.Fatal(err)
		}
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
		if !strings.Contains(stdout.String(), "Rheo demo on PostgreSQL at") || leaks(stdout.String()+stderr.String()) {
			t.Fatalf("the demo printed %q %q: want its banner without the password", stdout.String(), stderr.String())
		}
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
