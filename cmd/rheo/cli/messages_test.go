package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCLIQueryByTime(t *testing.T) {
	t.Parallel()
	type page struct {
		Events []rheo.Event `json:"events"`
		Cursor string       `json:"cursor"`
	}
	positions := func(evs []rheo.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, fmt.Sprintf("%d/%d", ev.Partition, ev.Sequence))
		}
		return out
	}
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		ctx := context.Background()
		appendAt := func(t *testing.T, stream string, partition int, ts *time.Time) rheo.Event {
			t.Helper()
			ev, err := b.drv.Append(ctx, stream, json.RawMessage(`{"type":"tick"}`), &rheo.AppendOptions{Partition: &partition, TS: ts})
			require.NoError(t, err)
			return ev
		}

		t.Run("--desc --limit 1 is the newest event, whatever the partitions' sequences", func(t *testing.T) {
			b.cliStream(t, "ticks", 2, 5)
			for range 3 {
				appendAt(t, "ticks", 0, nil)
			}
			newest := appendAt(t, "ticks", 1, nil)
			got := cliJSON[page](t, b.ok(t, "query", "ticks", "--desc", "--limit", "1", "--output", "json"))
			require.Len(t, got.Events, 1, "query --desc --limit 1 = %v, want the newest event, 1/1", positions(got.Events))
			require.Equal(t, newest.ID, got.Events[0].ID, "query --desc --limit 1 = %v, want the newest event, 1/1", positions(got.Events))
			oldest := cliJSON[page](t, b.ok(t, "query", "ticks", "--limit", "1", "--output", "json"))
			require.Equal(t, []string{"0/1"}, positions(oldest.Events), "query --limit 1")
			// The order of the database's query stays available, by name.
			bySequence := cliJSON[page](t, b.ok(t, "query", "ticks", "--order", "sequence", "--desc", "--limit", "1", "--output", "json"))
			require.Equal(t, []string{"0/3"}, positions(bySequence.Events), "query --order sequence --desc --limit 1")
		})
		t.Run("an explicit ts out of its partition's sequence order keeps its sequence place", func(t *testing.T) {
			b.cliStream(t, "late", 2, 5)
			at := func(hhmm string) *time.Time {
				ts, err := time.Parse(time.RFC3339, "2026-03-01T"+hhmm+":00Z")
				require.NoError(t, err)
				return &ts
			}
			appendAt(t, "late", 0, at("10:00")) // 0/1
			appendAt(t, "late", 0, at("09:00")) // 0/2, older than 0/1
			appendAt(t, "late", 1, at("09:30")) // 1/1
			appendAt(t, "late", 1, at("11:00")) // 1/2
			for _, c := range []struct {
				args []string
				want []string
			}{
				// Ascending: each partition from its first sequence, the
				// older head first: 0/2 comes after 0/1 although older.
				{nil, []string{"1/1", "0/1", "0/2", "1/2"}},
				// Descending: each partition from its last sequence, the
				// newer head first: 0/1 comes after 0/2 although newer.
				{[]string{"--desc"}, []string{"1/2", "1/1", "0/2", "0/1"}},
			} {
				got := cliJSON[page](t, b.ok(t, append([]string{"query", "late", "--output", "json"}, c.args...)...))
				require.Equal(t, c.want, positions(got.Events), "query late %v", c.args)
			}
		})
		t.Run("paging by time never skips nor repeats, even while events arrive", func(t *testing.T) {
			b.cliStream(t, "live", 3, 5)
			var want []string
			for i := range 7 {
				want = append(want, appendAt(t, "live", i%3, nil).ID)
			}
			first := cliJSON[page](t, b.ok(t, "query", "live", "--limit", "4", "--output", "json"))
			// Arrivals in every partition, one of them in the partition
			// whose events the first page has not reached.
			for i := range 3 {
				want = append(want, appendAt(t, "live", i, nil).ID)
			}
			second := cliJSON[page](t, b.ok(t, "query", "live", "--limit", "100", "--after", first.Cursor, "--output", "json"))
			var got []string
			for _, ev := range append(first.Events, second.Events...) {
				got = append(got, ev.ID)
			}
			require.Equal(t, want, got, "two pages, want every event once in time order")

			desc := cliJSON[page](t, b.ok(t, "query", "live", "--desc", "--limit", "4", "--output", "json"))
			appendAt(t, "live", 0, nil) // after the first page of a descending walk: in none of its pages
			rest := cliJSON[page](t, b.ok(t, "query", "live", "--desc", "--limit", "100", "--after", desc.Cursor, "--output", "json"))
			got = got[:0]
			for _, ev := range append(desc.Events, rest.Events...) {
				got = append(got, ev.ID)
			}
			slices.Reverse(want)
			require.Equal(t, want, got, "two descending pages")
		})
	})
}

// cliWrongWords is a driver whose ListStreams fails with err, for the
// exit status of each error word.
type cliWrongWords struct {
	driver.Driver
	err error
}

func (d cliWrongWords) ListStreams(context.Context) ([]rheo.StreamSummary, error) { return nil, d.err }

func TestCLIExitStatus(t *testing.T) {
	t.Parallel()
	t.Run("what the database refuses as invalid exits 2, like a check of the command's own", func(t *testing.T) {
		b := cliOpenBackend(t, "sqlite://"+filepath.Join(t.TempDir(), "words.db"))
		for _, word := range []*rheo.Error{rheo.ErrInvalidArgument, rheo.ErrInvalidPartition, rheo.ErrInvalidPartitionCount,
			rheo.ErrInvalidReplayOpts, rheo.ErrConfirmRequired} {
			var stdout, stderr bytes.Buffer
			code := cli.RunWith(context.Background(), []string{"streams", "--database-url", b.url}, nil, &stdout, &stderr,
				&cli.Options{WrapDriver: func(drv driver.Driver) driver.Driver {
					return cliWrongWords{Driver: drv, err: rheo.Errorf(word, "the detail")}
				}})
			want := "rheo streams: " + word.Reason + ": the detail\nusage: rheo streams\nsee: rheo streams -h\n"
			assert.Equal(t, cli.ExitUsage, code, "%s: stderr %q", word.Reason, stderr.String())
			assert.Equal(t, want, stderr.String(), "%s: exit %d", word.Reason, code)
			assert.Zero(t, stdout.Len(), "%s: stdout %q", word.Reason, stdout.String())
		}
		for _, err := range []error{rheo.Errorf(rheo.ErrAlreadyExists, "x"), rheo.Errorf(rheo.ErrCursorNotFound, "x"),
			&rheo.FailedError{Op: "list_streams", Err: context.DeadlineExceeded}} {
			var stdout, stderr bytes.Buffer
			code := cli.RunWith(context.Background(), []string{"streams", "--database-url", b.url}, nil, &stdout, &stderr,
				&cli.Options{WrapDriver: func(drv driver.Driver) driver.Driver { return cliWrongWords{Driver: drv, err: err} }})
			assert.Equal(t, cli.ExitFailure, code, "%v: stderr %q", err, stderr.String())
			assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%v: stderr %q; want one line", err, stderr.String())
		}
	})
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		b.cliStream(t, "orders", 2, 5)
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"a name the database refuses", []string{"create-stream", "bad name"}, "invalid_argument: invalid stream name"},
			{"a partition count the database refuses", []string{"create-stream", "s", "--partitions", "5000"}, "invalid_partition_count"},
			{"a partition the database refuses", []string{"lag", "orders", "billing", "--partition", "2"}, "invalid_partition"},
			{"a payload the database refuses", []string{"append", "orders", "[]"}, "invalid_argument: payload must be a JSON object"},
			{"a sequence the database refuses", []string{"replay", "orders", "billing", "--from-sequence", "-1"}, "invalid_argument"},
			{"a flag value rheo refuses", []string{"dead-letters", "orders", "billing", "--limit", "0"}, "--limit must be at least 1"},
			{"a missing --confirm", []string{"drop-stream", "orders"}, "--confirm is required"},
			{"an unknown flag", []string{"lag", "orders", "billing", "--nope"}, "flag provided but not defined: -nope"},
		} {
			t.Run(c.name, func(t *testing.T) {
				b.fails(t, cli.ExitUsage, c.want, c.args...)
				r := b.run(t, c.args...)
				require.Contains(t, r.stderr, "\nusage: rheo "+c.args[0]+" ", "a usage error without the usage: %s", r)
			})
		}
	})
}

// cliDriverWords are the marks of a driver's or server's raw text, which
// no failure line may carry.
var cliDriverWords = []string{"SQLSTATE", "ERROR:", "FATAL:", "failed to connect", "pgx", "pgconn", "dial tcp", "(SQLSTATE", "server error"}

func cliNoDriverText(t *testing.T, r cliResult) {
	t.Helper()
	for _, w := range cliDriverWords {
		require.NotContains(t, r.stderr, w, "stderr carries driver text %q: %s", w, r.stderr)
	}
}

func TestCLIFailureLines(t *testing.T) {
	server := testdb.ServerURL(t)
	cfg, err := pgx.ParseConfig(server)
	require.NoError(t, err)
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	t.Setenv(cli.EnvDatabaseURL, "")

	t.Run("a missing database is named as typed, with the command that creates it", func(t *testing.T) {
		u := testdb.WithDatabase(t, server, `rheo's "missing" db`)
		r := cliRun(t, "", "streams", "--database-url", u)
		cliWantFailure(t, r, cli.ExitFailure, fmt.Sprintf(`rheo: the database "rheo's "missing" db" does not exist on the server at %s; `+
			`create it with: createdb -h %s -p %d -U %s 'rheo'\''s "missing" db', or correct the database name in --database-url`+"\n",
			addr, cfg.Host, cfg.Port, cfg.User))
		cliNoDriverText(t, r)
		t.Setenv(cli.EnvDatabaseURL, u)
		r = cliRun(t, "", "lag", "orders", "billing")
		cliWantFailure(t, r, cli.ExitFailure, "or correct the database name in $DATABASE_URL\n")
	})
	t.Run("a role the server does not have is named", func(t *testing.T) {
		r := cliRun(t, "", "streams", "--database-url", testdb.AsRole(t, testdb.NewDatabase(t), "rheo_no_such_role"))
		cliWantFailure(t, r, cli.ExitFailure, fmt.Sprintf(`rheo: the server at %s refused user "rheo_no_such_role": `+
			`role "rheo_no_such_role" does not exist; check --database-url`+"\n", addr))
		cliNoDriverText(t, r)
	})
	t.Run("the no-schema hint is a command that works when pasted", func(t *testing.T) {
		empty := testdb.NewDatabase(t)
		u, err := url.Parse(empty)
		require.NoError(t, err)
		withPassword := *u
		withPassword.User = url.UserPassword(cfg.User, "s3cret")
		q := withPassword.Query()
		q.Set("rheo_poll_only", "true")
		withPassword.RawQuery = q.Encode()
		r := cliRun(t, "", "streams", "--database-url", withPassword.String())
		cliWantFailure(t, r, cli.ExitFailure, "install it with: rheo-migrate up --database-url '"+empty+
			"' (the password is left out here: put it back into the URL, or set PGPASSWORD)\n")
		require.NotContains(t, r.stderr, "s3cret", "the hint shows the password: %s", r.stderr)
		require.NotContains(t, r.stderr, "xxxxx' ", "the hint shows a placeholder: %s", r.stderr)
		t.Setenv(cli.EnvDatabaseURL, empty)
		cliWantFailure(t, cliRun(t, "", "streams"), cli.ExitFailure, `install it with: rheo-migrate up --database-url "$DATABASE_URL"`+"\n")
		t.Setenv(cli.EnvDatabaseURL, "")

		// Pasted into a shell, the hint's command gets the URL whole.
		r = cliRun(t, "", "streams", "--database-url", empty)
		words := cliShellWords(t, strings.TrimSuffix(r.stderr[strings.Index(r.stderr, "rheo-migrate up"):], "\n"))
		require.Equal(t, []string{"rheo-migrate", "up", "--database-url", empty}, words, "the shell reads the hint")
		drv, err := connect.Open(context.Background(), words[3], &connect.Options{Migrate: true})
		require.NoError(t, err)
		drv.Close()
		r = cliRun(t, "", "streams", "--database-url", withPassword.String())
		require.Equal(t, cli.ExitOK, r.code, "after the hint's command: %s", r)
	})
	t.Run("an SQLite path that needs quoting is quoted in the hint", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "it's my.db")
		r := cliRun(t, "", "streams", "--database-url", "sqlite://"+path)
		cliWantFailure(t, r, cli.ExitFailure, "create one with: rheo-migrate up --database-url 'sqlite://"+strings.ReplaceAll(path, "'", `'\''`)+"'\n")
	})
	t.Run("an SQLite file that is no database is named", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "notes.db")
		require.NoError(t, os.WriteFile(path, []byte("not a database, only text\n"), 0o644))
		cliWantFailure(t, cliRun(t, "", "streams", "--database-url", "sqlite://"+path), cli.ExitFailure,
			"rheo: cannot open the SQLite database "+path+": file is not a database; check --database-url\n")
	})
	t.Run("a statement the server refuses reads without the driver's words", func(t *testing.T) {
		db := testbackend.PostgresURL(t) // migrated
		u, err := url.Parse(db)
		require.NoError(t, err)
		u.RawQuery += "&options=-c%20default_transaction_read_only%3Don"
		r := cliRun(t, "", "create-stream", "s", "--database-url", u.String())
		cliWantFailure(t, r, cli.ExitFailure, "rheo: the database is read-only here (cannot execute")
		cliNoDriverText(t, r)

		role := testdb.NewRole(t, "CREATEROLE") // may read the schema version, holds no Rheo role
		r = cliRun(t, "", "create-stream", "s", "--database-url", testdb.AsRole(t, db, role))
		cliWantFailure(t, r, cli.ExitFailure, `rheo: permission denied (permission denied for schema rheo): user "`+role+
			`" needs the role rheo_admin for this command; an administrator can: GRANT rheo_admin TO `+role+` (docs/security.md)`+"\n")
		cliNoDriverText(t, r)
	})
	t.Run("a URL setting the driver refuses is a usage error in its own words", func(t *testing.T) {
		r := cliRun(t, "", "streams", "--database-url", "postgres://u:secret@127.0.0.1/app?sslmode=bogus")
		cliWantFailure(t, r, cli.ExitUsage, "rheo streams: bad database URL in --database-url: failed to configure TLS (sslmode is invalid)\nusage: rheo streams\n")
		cliNoDriverText(t, r)
		require.NotContains(t, r.stderr, "secret", "stderr repeats the URL: %s", r.stderr)
		require.NotContains(t, r.stderr, "cannot parse", "stderr repeats the URL: %s", r.stderr)
	})
	t.Run("an unreachable server and an unknown host say so", func(t *testing.T) {
		for _, c := range []struct{ url, want string }{
			{"postgres://u@127.0.0.1:1/app?connect_timeout=2", "cannot reach the database postgres://u@127.0.0.1:1/app?connect_timeout=2: connection refused; check --database-url, and that the database is up"},
			{"postgres://u@rheo-no-such-host.invalid/app?connect_timeout=5", "cannot reach the database postgres://u@rheo-no-such-host.invalid/app?connect_timeout=5: no host is named rheo-no-such-host.invalid"},
		} {
			r := cliRun(t, "", "streams", "--database-url", c.url)
			cliWantFailure(t, r, cli.ExitFailure, c.want)
			cliNoDriverText(t, r)
		}
	})
}

// cliShellWords returns the words a POSIX shell makes of command.
func cliShellWords(t *testing.T, command string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", "set -- "+command+"; printf '%s\\0' \"$@\"").Output()
	require.NoError(t, err, "sh")
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

func TestCLIVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		r := cliRun(t, "", args...)
		require.Equal(t, cli.ExitOK, r.code, "rheo %v: %s", args, r)
		require.True(t, strings.HasPrefix(r.stdout, "rheo "), "rheo %v: %s", args, r)
		require.True(t, strings.HasSuffix(r.stdout, ", "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n"), "rheo %v: %s", args, r)
	}
	v := cliJSON[map[string]any](t, cliRun(t, "", "version", "--output", "json").stdout)
	require.Equal(t, runtime.Version(), v["go"], "rheo version --output json = %v", v)
	require.NotEqual(t, "", v["version"], "rheo version --output json = %v", v)
	r := cliRun(t, "", "help")
	require.Contains(t, r.stdout, "\n  version ", "help does not list version:\n%s", r.stdout)
}

func TestCLISuggestions(t *testing.T) {
	t.Parallel()
	for typed, want := range map[string]string{
		"stremas":     `rheo: unknown command "stremas" (did you mean streams?); list the commands with: rheo help`,
		"tial":        `rheo: unknown command "tial" (did you mean tail?); list the commands with: rheo help`,
		"dead":        `rheo: unknown command "dead" (did you mean dead-letters?); list the commands with: rheo help`,
		"drop":        `rheo: unknown command "drop" (did you mean drop-group or drop-stream?); list the commands with: rheo help`,
		"creat-group": `rheo: unknown command "creat-group" (did you mean create-group?); list the commands with: rheo help`,
		"vresion":     `rheo: unknown command "vresion" (did you mean version?); list the commands with: rheo help`,
		"frobnicate":  `rheo: unknown command "frobnicate"; list the commands with: rheo help`,
	} {
		cliWantFailure(t, cliRun(t, "", typed), cli.ExitUsage, want+"\n")
	}
	cliWantFailure(t, cliRun(t, "", "help", "stremas"), cli.ExitUsage, `rheo help: unknown command "stremas" (did you mean streams?)`)
}
