package cli_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cliBackend is a migrated database the CLI tests run commands against,
// with a driver of the test's own for setting up and checking state.
type cliBackend struct {
	url string
	drv driver.Driver
}

// cliForEachBackend runs fn against a fresh migrated SQLite file and a
// fresh migrated PostgreSQL database, as the subtests "sqlite" and
// "postgres".
func cliForEachBackend(t *testing.T, fn func(t *testing.T, b *cliBackend)) {
	testbackend.Run(t, func(t *testing.T, tb *testbackend.Backend) {
		fn(t, cliOpen(t, tb.URL, false))
	})
}

// cliOpenBackend migrates the database at url and opens the test's driver
// on it.
func cliOpenBackend(t *testing.T, url string) *cliBackend {
	t.Helper()
	return cliOpen(t, url, true)
}

// cliOpen opens the test's driver on the database at url, migrating it
// first when asked.
func cliOpen(t *testing.T, url string, migrate bool) *cliBackend {
	t.Helper()
	drv, err := connect.Open(context.Background(), url, &connect.Options{Migrate: migrate})
	require.NoError(t, err, "open %s", url)
	t.Cleanup(func() { drv.Close() })
	return &cliBackend{url: url, drv: drv}
}

// cliConnect opens a connection that is closed when t ends.
func cliConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err, "connect")
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(context.Background())) })
	return conn
}

// cliResult is what one run of the command printed and returned.
type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// cliRun runs the rheo command in-process with stdin.
func cliRun(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// run runs a command against the backend's database.
func (b *cliBackend) run(t *testing.T, args ...string) cliResult {
	t.Helper()
	return cliRun(t, "", append(args, "--database-url", b.url)...)
}

// ok runs a command that must succeed and returns its stdout.
func (b *cliBackend) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := b.run(t, args...)
	require.Equal(t, cli.ExitOK, r.code, "rheo %s: %s", strings.Join(args, " "), r)
	return r.stdout
}

// fails runs a command that must fail with code, printing one line on
// stderr that contains want, and nothing on stdout.
func (b *cliBackend) fails(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	cliWantFailure(t, b.run(t, args...), code, want)
}

func cliWantFailure(t *testing.T, r cliResult, code int, want string) {
	t.Helper()
	msg := fmt.Sprintf("want exit %d with %q on stderr and nothing on stdout; got %s", code, want, r)
	require.Equal(t, code, r.code, msg)
	require.Contains(t, r.stderr, want, msg)
	require.Empty(t, r.stdout, msg)
	if code == cli.ExitFailure {
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "want one line on stderr, got %q", r.stderr)
	}
}

// cliJSON decodes a command's --output json.
func cliJSON[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(out), &v), "decode %q", out)
	return v
}

// cliStream creates a stream with partitions and a group "billing" with
// maxAttempts through the test's driver.
func (b *cliBackend) cliStream(t *testing.T, stream string, partitions, maxAttempts int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.drv.CreateStream(ctx, stream, partitions))
	require.NoError(t, b.drv.CreateGroup(ctx, stream, "billing", &rheo.CreateGroupOptions{MaxAttempts: maxAttempts}))
}

// cliAppend appends n events with keys k0..k(n-1) through the test's
// driver and returns them.
func (b *cliBackend) cliAppend(t *testing.T, stream string, n int) []rheo.Event {
	t.Helper()
	var evs []rheo.Event
	for i := range n {
		ev, err := b.drv.Append(context.Background(), stream, json.RawMessage(fmt.Sprintf(`{"type":"placed","n":%d}`, i)),
			&rheo.AppendOptions{Key: fmt.Sprintf("k%d", i)})
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	return evs
}

// cliDeadLetter leases and rejects one event of stream for "billing" and
// returns its lease.
func (b *cliBackend) cliDeadLetter(t *testing.T, stream, reason string) rheo.Lease {
	t.Helper()
	ctx := context.Background()
	leases, err := b.drv.Fetch(ctx, stream, "billing", &rheo.FetchOptions{MaxCount: 1})
	require.NoError(t, err, "fetch one lease")
	require.Len(t, leases, 1, "fetch one lease")
	require.NoError(t, b.drv.Reject(ctx, leases[0].LeaseID, reason))
	return leases[0]
}

func (b *cliBackend) lag(t *testing.T, stream string) rheo.Lag {
	t.Helper()
	lag, err := b.drv.Lag(context.Background(), stream, "billing", nil)
	require.NoError(t, err)
	return lag
}

// TestCLIDemo runs its cases in parallel: a demo spends most of its
// seconds waiting out the worker's retry back-off.
func TestCLIDemo(t *testing.T) {
	t.Parallel()
	t.Run("the demo runs on a temporary SQLite file without flags", func(t *testing.T) {
		t.Parallel()
		r := cliRun(t, "", "demo")
		require.Equal(t, cli.ExitOK, r.code, "demo: %s", r)
		require.Contains(t, r.stdout, "Demo complete", "demo: %s", r)
		for _, want := range []string{"dead letters of risk", "replay risk from sequence", "lag after consuming", "on SQLite",
			"correlation id order-007: the order and the trade it caused"} {
			assert.Contains(t, r.stdout, want, "demo output lacks %q", want)
		}
	})
	t.Run("the demo runs on PostgreSQL, twice on the same database, and drops its stream", func(t *testing.T) {
		t.Parallel()
		b := cliOpen(t, testbackend.PostgresURL(t), false)
		for range 2 {
			out := b.ok(t, "demo")
			for _, want := range []string{"Demo complete", "on PostgreSQL", "Dropped the demo's stream"} {
				require.Contains(t, out, want, "demo output:\n%s", out)
			}
		}
		streams, err := b.drv.ListStreams(context.Background())
		require.NoError(t, err)
		require.Empty(t, streams, "two demo runs left %d streams, want none", len(streams))
	})
	t.Run("the demo with --keep on PostgreSQL keeps its stream", func(t *testing.T) {
		t.Parallel()
		b := cliOpen(t, testbackend.PostgresURL(t), false)
		out := b.ok(t, "demo", "--keep")
		require.Contains(t, out, "is kept (--keep)", "demo --keep output:\n%s", out)
		streams, err := b.drv.ListStreams(context.Background())
		require.NoError(t, err, "demo --keep: list the streams")
		require.Len(t, streams, 1, "demo --keep left %d streams, want its own", len(streams))
	})
	t.Run("the demo installs Rheo into a database that has none, and says so", func(t *testing.T) {
		t.Parallel()
		for _, url := range []string{testdb.NewDatabase(t), "sqlite://" + filepath.Join(t.TempDir(), "new.db")} {
			r := cliRun(t, "", "demo", "--database-url", url)
			require.Equal(t, cli.ExitOK, r.code, "demo on %s: %s", url, r)
			require.Contains(t, r.stdout, "Rheo was not installed in this database: installed it, as rheo-migrate up does", "demo on %s: %s", url, r)
			require.Contains(t, r.stdout, "Demo complete", "demo on %s: %s", url, r)
			r = cliRun(t, "", "demo", "--database-url", url)
			require.Equal(t, cli.ExitOK, r.code, "second demo on %s: %s", url, r)
			require.NotContains(t, r.stdout, "installed it", "second demo on %s: %s", url, r)
		}
	})
}

// TestCLIDemoEnvironment runs the demo with and without $DATABASE_URL,
// which a parallel test cannot set.
func TestCLIDemoEnvironment(t *testing.T) {
	t.Setenv(cli.EnvDatabaseURL, "")
	t.Run("the demo runs on $DATABASE_URL when --database-url is not given", func(t *testing.T) {
		b := cliOpenBackend(t, "sqlite://"+filepath.Join(t.TempDir(), "env.db"))
		t.Setenv(cli.EnvDatabaseURL, b.url)
		r := cliRun(t, "", "demo", "--keep")
		require.Equal(t, cli.ExitOK, r.code, "demo with DATABASE_URL: %s", r)
		require.Contains(t, r.stdout, "(from $DATABASE_URL)", "demo with DATABASE_URL: %s", r)
		require.Contains(t, r.stdout, "is kept (--keep)", "demo with DATABASE_URL: %s", r)
		streams, err := b.drv.ListStreams(context.Background())
		require.NoError(t, err, "demo --keep on $DATABASE_URL: list the streams")
		require.Len(t, streams, 1, "demo --keep on $DATABASE_URL left %d streams, want its own", len(streams))
	})
	t.Run("--keep without a database URL is refused, before anything runs", func(t *testing.T) {
		cliWantFailure(t, cliRun(t, "", "demo", "--keep"), cli.ExitUsage,
			"rheo demo: --keep keeps the demo's stream on the database of --database-url or $DATABASE_URL, and neither is set")
	})
}

func TestCLIStreamsAndGroups(t *testing.T) {
	t.Parallel()
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		t.Run("streams lists nothing on a new database", func(t *testing.T) {
			got := cliJSON[[]rheo.StreamSummary](t, b.ok(t, "streams", "--output", "json"))
			require.Empty(t, got, "streams = %+v, want none", got)
		})
		t.Run("create-stream creates a stream that streams lists", func(t *testing.T) {
			out := b.ok(t, "create-stream", "orders", "--partitions", "4")
			require.Contains(t, out, `created stream "orders" with 4 partition(s)`, "create-stream printed %q", out)
			got := cliJSON[[]rheo.StreamSummary](t, b.ok(t, "streams", "--output", "json"))
			require.Len(t, got, 1, "streams = %+v, want orders with 4 partitions", got)
			require.Equal(t, "orders", got[0].Name, "streams = %+v, want orders with 4 partitions", got)
			require.Equal(t, 4, got[0].PartitionCount, "streams = %+v, want orders with 4 partitions", got)
			table := b.ok(t, "streams")
			require.True(t, strings.HasPrefix(table, "STREAM  PARTITIONS  CREATED_AT\norders  4  "), "streams table:\n%s", table)
		})
		t.Run("create-stream of an existing stream fails and changes nothing", func(t *testing.T) {
			b.fails(t, cli.ExitFailure, `stream "orders" already exists; list streams with: rheo streams`,
				"create-stream", "orders", "--partitions", "2")
			got := cliJSON[[]rheo.StreamSummary](t, b.ok(t, "streams", "--output", "json"))
			require.Len(t, got, 1, "streams = %+v, want orders unchanged", got)
			require.Equal(t, 4, got[0].PartitionCount, "streams = %+v, want orders unchanged", got)
		})
		t.Run("create-stream with an invalid name or count reports the reason", func(t *testing.T) {
			b.fails(t, cli.ExitUsage, "invalid_argument: invalid stream name", "create-stream", "bad name")
			b.fails(t, cli.ExitUsage, "invalid_partition_count", "create-stream", "zero", "--partitions", "0")
		})
		t.Run("create-group creates a group that groups lists", func(t *testing.T) {
			out := b.ok(t, "create-group", "orders", "billing", "--max-attempts", "3", "--output", "json")
			created := cliJSON[map[string]any](t, out)
			require.Equal(t, "billing", created["group"], "create-group printed %s", out)
			require.Equal(t, float64(3), created["max_attempts"], "create-group printed %s", out)
			b.ok(t, "create-group", "orders", "audit")
			got := cliJSON[[]rheo.GroupSummary](t, b.ok(t, "groups", "orders", "--output", "json"))
			msg := fmt.Sprintf("groups = %+v, want audit (5 attempts) and billing (3)", got)
			require.Len(t, got, 2, msg)
			require.Equal(t, "audit", got[0].Name, msg)
			require.Equal(t, 5, got[0].MaxAttempts, msg)
			require.Equal(t, "billing", got[1].Name, msg)
			require.Equal(t, 3, got[1].MaxAttempts, msg)
			table := b.ok(t, "groups", "orders")
			require.True(t, strings.HasPrefix(table, "GROUP    MAX_ATTEMPTS  ORDERING  CREATED_AT\naudit    5             none      "), "groups table:\n%s", table)
		})
		t.Run("create-group of an existing group fails", func(t *testing.T) {
			b.fails(t, cli.ExitFailure, `group "billing" already exists on stream "orders"`, "create-group", "orders", "billing")
		})
		t.Run("create-group can start after a sequence", func(t *testing.T) {
			b.cliAppend(t, "orders", 3)
			b.ok(t, "create-group", "orders", "late", "--start-after", "100")
			lag := cliJSON[rheo.Lag](t, b.ok(t, "lag", "orders", "late", "--output", "json"))
			require.Zero(t, lag.Total, "lag of a group started after 100 = %+v, want frontier 100 and no lag", lag)
			require.Equal(t, int64(100), lag.Partitions[0].Frontier, "lag of a group started after 100 = %+v, want frontier 100 and no lag", lag)
		})
		t.Run("create-group rejects bad flags before touching the database", func(t *testing.T) {
			b.fails(t, cli.ExitUsage, "--start-after and --start-at are exclusive",
				"create-group", "orders", "x", "--start-after", "1", "--start-at", "2026-01-01T00:00:00Z")
			b.fails(t, cli.ExitUsage, "--max-attempts must be at least 1", "create-group", "orders", "x", "--max-attempts", "0")
			b.fails(t, cli.ExitUsage, "not an RFC 3339 time", "create-group", "orders", "x", "--start-at", "yesterday")
		})
		t.Run("unknown streams are named with what to do", func(t *testing.T) {
			want := `stream "nope" not found; list streams with: rheo streams`
			b.fails(t, cli.ExitFailure, want, "groups", "nope")
			b.fails(t, cli.ExitFailure, want, "create-group", "nope", "billing")
		})
	})
}

func TestCLIOrdering(t *testing.T) {
	t.Parallel()
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		ctx := context.Background()
		require.NoError(t, b.drv.CreateStream(ctx, "orders", 1))
		orderings := func(t *testing.T) map[string]rheo.Ordering {
			t.Helper()
			got := map[string]rheo.Ordering{}
			for _, g := range cliJSON[[]rheo.GroupSummary](t, b.ok(t, "groups", "orders", "--output", "json")) {
				got[g.Name] = g.Ordering
			}
			return got
		}
		t.Run("create-group takes an ordering, none by default, and groups shows it", func(t *testing.T) {
			out := b.ok(t, "create-group", "orders", "billing", "--ordering", "key")
			require.Contains(t, out, `created group "billing" on stream "orders" (at most 5 attempts per event, ordering key)`, "create-group printed %q", out)
			created := cliJSON[map[string]any](t, b.ok(t, "create-group", "orders", "audit", "--output", "json"))
			require.Equal(t, "none", created["ordering"], "create-group without --ordering printed %v", created)
			b.ok(t, "create-group", "orders", "ledger", "--ordering", "partition")
			want := map[string]rheo.Ordering{"audit": rheo.OrderingNone, "billing": rheo.OrderingKey, "ledger": rheo.OrderingPartition}
			require.Equal(t, want, orderings(t), "groups")
			table := b.ok(t, "groups", "orders")
			require.Contains(t, table, "\nbilling  5             key       ", "groups table:\n%s", table)
		})
		t.Run("a key group hands out one event of a key at a time", func(t *testing.T) {
			for _, k := range []string{"a", "a", "b"} {
				b.ok(t, "append", "orders", "--key", k, `{"type":"placed"}`)
			}
			leases, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 10})
			require.NoError(t, err, "fetch of the key group")
			require.Len(t, leases, 2, "fetch of the key group: %+v; want events 1 and 3", leases)
			require.Equal(t, int64(1), leases[0].Event.Sequence, "fetch of the key group: %+v; want events 1 and 3", leases)
			require.Equal(t, int64(3), leases[1].Event.Sequence, "fetch of the key group: %+v; want events 1 and 3", leases)
			info := cliJSON[rheo.GroupInfo](t, b.ok(t, "info", "orders", "billing", "--output", "json"))
			msg := fmt.Sprintf("info = %+v, want lag 3 with 2 in flight and the blocked event in neither count", info)
			require.Equal(t, int64(3), info.Lag, msg)
			require.Equal(t, int64(2), info.InFlight, msg)
			require.Zero(t, info.PendingRetry, msg)
		})
		t.Run("set-ordering changes a group's ordering", func(t *testing.T) {
			out := b.ok(t, "set-ordering", "orders", "audit", "partition")
			require.Contains(t, out, `group "audit" of stream "orders" now has ordering partition`, "set-ordering printed %q", out)
			got := cliJSON[map[string]any](t, b.ok(t, "set-ordering", "orders", "billing", "none", "--output", "json"))
			require.Equal(t, "none", got["ordering"], "set-ordering printed %v", got)
			require.Equal(t, "billing", got["group"], "set-ordering printed %v", got)
			want := map[string]rheo.Ordering{"audit": rheo.OrderingPartition, "billing": rheo.OrderingNone, "ledger": rheo.OrderingPartition}
			require.Equal(t, want, orderings(t), "groups")
		})
		t.Run("an unknown mode is a bad command line and changes nothing", func(t *testing.T) {
			b.fails(t, cli.ExitUsage, "invalid_argument: ordering must be none, key or partition", "set-ordering", "orders", "audit", "fifo")
			b.fails(t, cli.ExitUsage, "invalid_argument: ordering must be none, key or partition",
				"create-group", "orders", "x", "--ordering", "strict")
			b.fails(t, cli.ExitUsage, "missing MODE", "set-ordering", "orders", "audit")
			got := orderings(t)
			require.Equal(t, rheo.OrderingPartition, got["audit"], "groups = %v, want audit unchanged and no group x", got)
			require.Len(t, got, 3, "groups = %v, want audit unchanged and no group x", got)
		})
		t.Run("set-ordering of a missing group names it", func(t *testing.T) {
			b.fails(t, cli.ExitFailure, `group "nope" not found on stream "orders"`, "set-ordering", "orders", "nope", "key")
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "set-ordering", "nope", "audit", "key")
		})
	})
}

func TestCLIAppend(t *testing.T) {
	t.Parallel()
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		b.cliStream(t, "orders", 4, 5)

		t.Run("append routes one event by key and prints where it went", func(t *testing.T) {
			ev := cliJSON[rheo.Event](t, b.ok(t, "append", "orders", `{"type":"placed","total":12}`,
				"--key", "customer-7", "--metadata", `{"correlation_id":"c-1"}`, "--output", "json"))
			msg := fmt.Sprintf("appended %+v, want partition %d sequence 1", ev, rheo.PartitionForKey("customer-7", 4))
			require.Equal(t, rheo.PartitionForKey("customer-7", 4), ev.Partition, msg)
			require.Equal(t, int64(1), ev.Sequence, msg)
			require.Equal(t, "customer-7", ev.Key, msg)
			require.Equal(t, "placed", ev.Type, msg)
			var meta map[string]string
			require.NoError(t, json.Unmarshal(ev.Metadata, &meta), "metadata = %s, want the correlation id", ev.Metadata)
			require.Equal(t, "c-1", meta["correlation_id"], "metadata = %s, want the correlation id", ev.Metadata)
			table := b.ok(t, "append", "orders", `{"type":"placed"}`, "--partition", "2")
			require.True(t, strings.HasPrefix(table, "STREAM  PARTITION  SEQUENCE  ID"), "append table:\n%s", table)
			require.Contains(t, table, "orders  2          1  ", "append table:\n%s", table)
		})
		t.Run("append with an id is idempotent, and another payload under it fails", func(t *testing.T) {
			first := cliJSON[rheo.Event](t, b.ok(t, "append", "orders", `{"type":"paid"}`, "--id", "pay-1", "--output", "json"))
			again := cliJSON[rheo.Event](t, b.ok(t, "append", "orders", `{"type":"paid"}`, "--id", "pay-1", "--output", "json"))
			require.Equal(t, first.Sequence, again.Sequence, "repeat = %+v, want the stored %+v", again, first)
			require.Equal(t, first.Partition, again.Partition, "repeat = %+v, want the stored %+v", again, first)
			require.Equal(t, "pay-1", again.ID, "repeat = %+v, want the stored %+v", again, first)
			b.fails(t, cli.ExitFailure, "already_exists", "append", "orders", `{"type":"refunded"}`, "--id", "pay-1")
		})
		t.Run("append reads JSON lines from stdin in batches", func(t *testing.T) {
			var in strings.Builder
			const n = 1203 // more than two batches
			for i := range n {
				fmt.Fprintf(&in, "{\"type\":\"line\",\"key\":\"k%d\"}\n", i)
				if i%100 == 0 {
					in.WriteString("\n") // blank lines are skipped
				}
			}
			r := cliRun(t, in.String(), "append", "batch-stream", "--database-url", b.url, "--output", "json")
			cliWantFailure(t, r, cli.ExitFailure, `stream "batch-stream" not found`)
			b.ok(t, "create-stream", "batch-stream", "--partitions", "3")
			r = cliRun(t, in.String(), "append", "batch-stream", "--database-url", b.url, "--output", "json")
			require.Equal(t, cli.ExitOK, r.code, "append from stdin (no progress when stderr is not a terminal): %s", r)
			require.Empty(t, r.stderr, "append from stdin (no progress when stderr is not a terminal): %s", r)
			got := cliJSON[struct {
				Appended   int64 `json:"appended"`
				Partitions []struct {
					Partition     int   `json:"partition"`
					Events        int64 `json:"events"`
					FirstSequence int64 `json:"first_sequence"`
					LastSequence  int64 `json:"last_sequence"`
				} `json:"partitions"`
			}](t, r.stdout)
			var sum int64
			for _, p := range got.Partitions {
				sum += p.Events
				assert.Equal(t, int64(1), p.FirstSequence, "partition %d: sequences %d..%d for %d events, want 1..%d", p.Partition, p.FirstSequence, p.LastSequence, p.Events, p.Events)
				assert.Equal(t, p.Events, p.LastSequence, "partition %d: sequences %d..%d for %d events, want 1..%d", p.Partition, p.FirstSequence, p.LastSequence, p.Events, p.Events)
			}
			msg := fmt.Sprintf("appended %d (%d over %d partitions), want %d over 3", got.Appended, sum, len(got.Partitions), n)
			require.Equal(t, int64(n), got.Appended, msg)
			require.Equal(t, int64(n), sum, msg)
			require.Len(t, got.Partitions, 3, msg)
		})
		t.Run("a bad line on stdin is named, after appending the lines before it", func(t *testing.T) {
			before := b.lag(t, "orders").Total
			r := cliRun(t, "{\"type\":\"ok\"}\nnot json\n{}\n", "append", "orders", "--database-url", b.url)
			cliWantFailure(t, r, cli.ExitFailure,
				"rheo: stdin line 2 is not valid JSON; 1 event appended (stdin line 1), none from line 2 on; resume from line 2 once it is fixed\n")
			after := b.lag(t, "orders").Total
			require.Equal(t, before+1, after, "%d events were appended, want the one before the bad line", after-before)
		})
		t.Run("append rejects what is not a JSON object", func(t *testing.T) {
			b.fails(t, cli.ExitUsage, "the payload is not valid JSON", "append", "orders", `{"type":`)
			b.fails(t, cli.ExitUsage, "invalid_argument: payload must be a JSON object", "append", "orders", `[1,2]`)
			b.fails(t, cli.ExitUsage, "invalid_partition", "append", "orders", `{}`, "--partition", "9")
			r := cliRun(t, "{}\n", "append", "orders", "--id", "x", "--database-url", b.url)
			cliWantFailure(t, r, cli.ExitUsage, "--id applies to a single event")
		})
	})
}

func TestCLIGroupState(t *testing.T) {
	t.Parallel()
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		b.cliStream(t, "orders", 3, 2)
		evs := b.cliAppend(t, "orders", 9)
		dead := b.cliDeadLetter(t, "orders", "bad address")

		t.Run("lag shows each partition and the total", func(t *testing.T) {
			lag := cliJSON[rheo.Lag](t, b.ok(t, "lag", "orders", "billing", "--output", "json"))
			want := b.lag(t, "orders")
			require.Len(t, lag.Partitions, 3, "lag = %+v, want %+v (all but the dead letter)", lag, want)
			require.Equal(t, want.Total, lag.Total, "lag = %+v, want %+v (all but the dead letter)", lag, want)
			require.Equal(t, int64(len(evs))-1, lag.Total, "lag = %+v, want %+v (all but the dead letter)", lag, want)
			one := cliJSON[rheo.Lag](t, b.ok(t, "lag", "orders", "billing", "--partition", "1", "--output", "json"))
			require.Len(t, one.Partitions, 1, "lag of partition 1 = %+v, want %+v", one, want.Partitions[1])
			require.Equal(t, want.Partitions[1], one.Partitions[0], "lag of partition 1")
			table := b.ok(t, "lag", "orders", "billing")
			lines := strings.Split(strings.TrimSpace(table), "\n")
			require.Len(t, lines, 5, "lag table:\n%s", table)
			require.True(t, strings.HasPrefix(lines[0], "PARTITION  FRONTIER  HIGH_WATERMARK  LAG"), "lag table:\n%s", table)
			require.True(t, strings.HasPrefix(lines[4], "total"), "lag table:\n%s", table)
			require.True(t, strings.HasSuffix(lines[4], fmt.Sprint(want.Total)), "lag table:\n%s", table)
		})
		t.Run("info summarises the group", func(t *testing.T) {
			leases, err := b.drv.Fetch(context.Background(), "orders", "billing", &rheo.FetchOptions{MaxCount: 2})
			require.NoError(t, err, "fetch")
			require.Len(t, leases, 2, "fetch: %d leases", len(leases))
			info := cliJSON[struct {
				Stream string `json:"stream"`
				Group  string `json:"group"`
				rheo.GroupInfo
			}](t, b.ok(t, "info", "orders", "billing", "--output", "json"))
			msg := fmt.Sprintf("info = %+v, want 2 in flight, 1 dead letter, lag %d", info, len(evs)-1)
			require.Equal(t, "orders", info.Stream, msg)
			require.Equal(t, "billing", info.Group, msg)
			require.Equal(t, int64(2), info.InFlight, msg)
			require.Equal(t, int64(1), info.DeadLetters, msg)
			require.Equal(t, int64(len(evs))-1, info.Lag, msg)
			require.NotNil(t, info.OldestUnsettledTS, msg)
			table := b.ok(t, "info", "orders", "billing")
			require.Contains(t, table, "INFLIGHT", "info table:\n%s", table)
			require.Contains(t, table, "orders  billing", "info table:\n%s", table)
			for _, l := range leases {
				require.NoError(t, b.drv.Ack(context.Background(), l.LeaseID))
			}
		})
		t.Run("leases lists the deliveries in progress, the soonest due first", func(t *testing.T) {
			ctx := context.Background()
			soon, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 1, ConsumerID: "w-soon", LeaseDuration: time.Minute})
			require.NoError(t, err, "fetch")
			require.Len(t, soon, 1, "fetch: %v", soon)
			late, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 1, ConsumerID: "w-late", LeaseDuration: time.Hour})
			require.NoError(t, err, "fetch")
			require.Len(t, late, 1, "fetch: %v", late)
			got := cliJSON[[]rheo.Delivery](t, b.ok(t, "leases", "orders", "billing", "--output", "json"))
			msg := fmt.Sprintf("leases = %+v, want the minute's lease then the hour's", got)
			require.Len(t, got, 2, msg)
			require.Equal(t, soon[0].Event.ID, got[0].EventID, msg)
			require.Equal(t, "w-soon", got[0].ConsumerID, msg)
			require.Equal(t, late[0].Event.ID, got[1].EventID, msg)
			require.Equal(t, "leased", got[1].State, msg)
			table := b.ok(t, "leases", "orders", "billing", "--limit", "1")
			lines := strings.Split(strings.TrimSpace(table), "\n")
			require.Len(t, lines, 2, "leases table:\n%s", table)
			require.True(t, strings.HasPrefix(lines[0], "EVENT_ID"), "leases table:\n%s", table)
			require.Contains(t, lines[1], "w-soon", "leases table:\n%s", table)
			for _, l := range append(soon, late...) {
				require.NoError(t, b.drv.Ack(ctx, l.LeaseID))
			}
		})
		t.Run("dead-letters shows the reason and the payload", func(t *testing.T) {
			dls := cliJSON[[]rheo.DeadLetter](t, b.ok(t, "dead-letters", "orders", "billing", "--output", "json"))
			msg := fmt.Sprintf("dead letters = %+v, want %s rejected for bad address", dls, dead.Event.ID)
			require.Len(t, dls, 1, msg)
			require.Equal(t, dead.Event.ID, dls[0].Event.ID, msg)
			require.Equal(t, "bad address", dls[0].Reason, msg)
			require.Equal(t, 1, dls[0].Attempt, msg)
			require.Contains(t, string(dls[0].Event.Payload), `"type"`, msg)
			table := b.ok(t, "dead-letters", "orders", "billing")
			for _, want := range []string{dead.Event.ID, "bad address", `{"`} {
				require.Contains(t, table, want, "dead-letters table:\n%s", table)
			}
		})
		t.Run("dead-letters pages with --limit and --after", func(t *testing.T) {
			second := b.cliDeadLetter(t, "orders", "")
			r := b.run(t, "dead-letters", "orders", "billing", "--limit", "1")
			first := cliJSON[[]rheo.DeadLetter](t, b.ok(t, "dead-letters", "orders", "billing", "--limit", "1", "--output", "json"))
			require.Zero(t, r.code, "a full page does not say how to get the next: %s", r)
			require.Contains(t, r.stderr, "next page: rheo dead-letters orders billing --limit 1 --after "+first[0].Event.ID, "a full page does not say how to get the next: %s", r)
			next := cliJSON[[]rheo.DeadLetter](t, b.ok(t, "dead-letters", "orders", "billing", "--after", first[0].Event.ID, "--output", "json"))
			ids := map[string]bool{first[0].Event.ID: true}
			for _, d := range next {
				ids[d.Event.ID] = true
			}
			msg := fmt.Sprintf("pages %v and %+v, want %s and %s", first[0].Event.ID, next, dead.Event.ID, second.Event.ID)
			require.Len(t, next, 1, msg)
			require.True(t, ids[dead.Event.ID], msg)
			require.True(t, ids[second.Event.ID], msg)
			b.fails(t, cli.ExitFailure, `--after "nope" is not a dead letter of group "billing"`,
				"dead-letters", "orders", "billing", "--after", "nope")
			b.fails(t, cli.ExitUsage, "--limit must be at least 1", "dead-letters", "orders", "billing", "--limit", "0")
		})
		t.Run("unknown streams and groups are named with what to do", func(t *testing.T) {
			for _, cmd := range []string{"lag", "info", "dead-letters"} {
				b.fails(t, cli.ExitFailure, `stream "nope" not found; list streams with: rheo streams`, cmd, "nope", "billing")
				b.fails(t, cli.ExitFailure, `group "nobody" not found on stream "orders"; list groups with: rheo groups orders`,
					cmd, "orders", "nobody")
			}
		})
	})
}

func TestCLIReplayAndReset(t *testing.T) {
	t.Parallel()
	type replayOut struct {
		DryRun     bool `json:"dry_run"`
		Partitions []struct {
			Partition int   `json:"partition"`
			Events    int64 `json:"events"`
		} `json:"partitions"`
		Total int64 `json:"total"`
	}
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		ctx := context.Background()
		b.cliStream(t, "orders", 2, 5)
		evs := b.cliAppend(t, "orders", 8)
		// Settle everything: the last fetched event is dead-lettered.
		leases, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 100})
		require.NoError(t, err, "fetch")
		require.Len(t, leases, len(evs), "fetch: %d leases", len(leases))
		for _, l := range leases[:len(leases)-1] {
			require.NoError(t, b.drv.Ack(ctx, l.LeaseID))
		}
		dead := leases[len(leases)-1]
		require.NoError(t, b.drv.Reject(ctx, dead.LeaseID, "poison"))
		hwm := map[int]int64{}
		for _, ev := range evs {
			hwm[ev.Partition] = max(hwm[ev.Partition], ev.Sequence)
		}

		t.Run("replay --dry-run counts per partition and changes nothing", func(t *testing.T) {
			got := cliJSON[replayOut](t, b.ok(t, "replay", "orders", "billing", "--from-sequence", "1", "--dry-run", "--output", "json"))
			msg := fmt.Sprintf("dry run = %+v, want %d and %d", got, hwm[0]-1, hwm[1]-1)
			require.True(t, got.DryRun, msg)
			require.Len(t, got.Partitions, 2, msg)
			require.Equal(t, hwm[0]-1+hwm[1]-1, got.Total, msg)
			for _, p := range got.Partitions {
				require.Equal(t, hwm[p.Partition]-1, p.Events, "dry run of partition %d", p.Partition)
			}
			require.Zero(t, b.lag(t, "orders").Total, "lag after a dry run")
			table := b.ok(t, "replay", "orders", "billing", "--from-sequence", "1", "--dry-run")
			require.Contains(t, table, "WOULD_REPLAY", "dry-run table:\n%s", table)
			require.Contains(t, table, "dry run: nothing was changed", "dry-run table:\n%s", table)
		})
		t.Run("replay by event id reopens a dead letter", func(t *testing.T) {
			got := cliJSON[replayOut](t, b.ok(t, "replay", "orders", "billing", "--event-id", dead.Event.ID, "--output", "json"))
			require.False(t, got.DryRun, "replay by id = %+v, want 1", got)
			require.Equal(t, int64(1), got.Total, "replay by id = %+v, want 1", got)
			dls, _ := b.drv.DeadLetters(ctx, "orders", "billing", nil)
			require.Empty(t, dls, "dead letters after the replay")
			again, err := b.drv.Fetch(ctx, "orders", "billing", nil)
			require.NoError(t, err, "fetch after the replay")
			msg := fmt.Sprintf("fetch after the replay = %+v; want %s at attempt 1", again, dead.Event.ID)
			require.Len(t, again, 1, msg)
			require.Equal(t, dead.Event.ID, again[0].Event.ID, msg)
			require.Equal(t, 1, again[0].Attempt, msg)
			require.NoError(t, b.drv.Ack(ctx, again[0].LeaseID))
		})
		t.Run("replay from a sequence in one partition moves only its frontier back", func(t *testing.T) {
			table := b.ok(t, "replay", "orders", "billing", "--from-sequence", "0", "--partition", "1")
			require.Contains(t, table, "REPLAYED", "replay table:\n%s", table)
			require.Contains(t, table, fmt.Sprintf("total      %d", hwm[1]), "replay table:\n%s", table)
			lag := b.lag(t, "orders")
			require.Zero(t, lag.Partitions[0].Lag, "lag after the replay = %+v, want partition 1 rewound to 0", lag)
			require.Equal(t, hwm[1], lag.Partitions[1].Lag, "lag after the replay = %+v, want partition 1 rewound to 0", lag)
		})
		t.Run("replay from a time uses RFC 3339", func(t *testing.T) {
			got := cliJSON[replayOut](t, b.ok(t, "replay", "orders", "billing", "--from-time",
				evs[0].TS.Add(-time.Hour).Format(time.RFC3339), "--dry-run", "--output", "json"))
			require.Equal(t, hwm[0], got.Total, "replay from an hour before the first event, want partition 0's events (partition 1 is pending already)")
		})
		t.Run("replay needs exactly one selector", func(t *testing.T) {
			b.fails(t, cli.ExitUsage, "give exactly one of --from-sequence, --event-id and --from-time", "replay", "orders", "billing")
			b.fails(t, cli.ExitUsage, "give exactly one of", "replay", "orders", "billing", "--from-sequence", "1", "--event-id", "x")
			b.fails(t, cli.ExitUsage, "invalid_partition", "replay", "orders", "billing", "--from-sequence", "1", "--partition", "5")
			b.fails(t, cli.ExitFailure, `group "nobody" not found`, "replay", "orders", "nobody", "--from-sequence", "1")
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "replay", "nope", "billing", "--from-sequence", "1")
		})
		t.Run("reset without --confirm changes nothing", func(t *testing.T) {
			before := b.lag(t, "orders")
			b.fails(t, cli.ExitUsage, "rheo reset: --confirm is required: reset drops", "reset", "orders", "billing", "--start-after", "2")
			b.fails(t, cli.ExitUsage, "--confirm is required", "reset", "nope", "billing")
			require.Equal(t, before.Total, b.lag(t, "orders").Total, "the lag changed without --confirm")
		})
		t.Run("reset --confirm places the cursors and prints the lag", func(t *testing.T) {
			got := cliJSON[struct {
				Lag rheo.Lag `json:"lag"`
			}](t, b.ok(t, "reset", "orders", "billing", "--confirm", "--start-after", "2", "--output", "json"))
			want := max(0, hwm[0]-2) + max(0, hwm[1]-2)
			require.Equal(t, want, got.Lag.Total, "lag after reset = %+v, want total %d from frontier 2", got.Lag, want)
			require.Equal(t, int64(2), got.Lag.Partitions[0].Frontier, "lag after reset = %+v, want total %d from frontier 2", got.Lag, want)
			table := b.ok(t, "reset", "orders", "billing", "--confirm")
			require.Contains(t, table, `reset group "billing" on stream "orders"`, "reset table:\n%s", table)
			require.Contains(t, table, fmt.Sprintf("%d", len(evs)), "reset table:\n%s", table)
			b.fails(t, cli.ExitFailure, `group "nobody" not found`, "reset", "orders", "nobody", "--confirm")
		})
	})
}

func TestCLIRetentionAndPrune(t *testing.T) {
	t.Parallel()
	type rangeOut struct {
		MaxAge     *string `json:"max_age"`
		Partitions []struct {
			Partition     int   `json:"partition"`
			LowWatermark  int64 `json:"low_watermark"`
			HighWatermark int64 `json:"high_watermark"`
			Retained      int64 `json:"retained"`
		} `json:"partitions"`
	}
	type pruneOut struct {
		DryRun     bool `json:"dry_run"`
		Force      bool `json:"force"`
		Batches    int  `json:"batches"`
		Partitions []struct {
			Partition    int   `json:"partition"`
			Events       int64 `json:"events"`
			LowWatermark int64 `json:"low_watermark"`
		} `json:"partitions"`
		Total int64 `json:"total"`
	}
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		ctx := context.Background()
		b.cliStream(t, "orders", 2, 5)
		// Three events two days old in each partition, then two new ones in
		// partition 0. billing settles partition 0 only.
		old := time.Now().Add(-48 * time.Hour)
		for i := range 6 {
			p := i % 2
			_, err := b.drv.Append(ctx, "orders", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
				&rheo.AppendOptions{Partition: &p, TS: &old})
			require.NoError(t, err)
		}
		for i := range 2 {
			p := 0
			_, err := b.drv.Append(ctx, "orders", json.RawMessage(fmt.Sprintf(`{"new":%d}`, i)), &rheo.AppendOptions{Partition: &p})
			require.NoError(t, err)
		}
		leases, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 100, Partitions: []int{0}})
		require.NoError(t, err, "fetch partition 0")
		require.Len(t, leases, 5, "fetch partition 0: %d leases", len(leases))
		for _, l := range leases {
			require.NoError(t, b.drv.Ack(ctx, l.LeaseID))
		}
		lows := func() []int64 {
			info, err := b.drv.StreamInfo(ctx, "orders")
			require.NoError(t, err)
			return []int64{info.Partitions[0].LowWatermark, info.Partitions[1].LowWatermark}
		}

		t.Run("retention without --max-age shows the watermarks of each partition", func(t *testing.T) {
			got := cliJSON[rangeOut](t, b.ok(t, "retention", "orders", "--output", "json"))
			msg := fmt.Sprintf("retention = %+v, want no max age and 5 and 3 events retained from 1", got)
			require.Nil(t, got.MaxAge, msg)
			require.Len(t, got.Partitions, 2, msg)
			require.Equal(t, int64(5), got.Partitions[0].HighWatermark, msg)
			require.Equal(t, int64(1), got.Partitions[0].LowWatermark, msg)
			require.Equal(t, int64(5), got.Partitions[0].Retained, msg)
			require.Equal(t, int64(3), got.Partitions[1].Retained, msg)
			table := b.ok(t, "retention", "orders")
			require.Contains(t, table, `stream "orders" keeps its events forever`, "retention table:\n%s", table)
			require.Contains(t, table, "PARTITION  LOW_WATERMARK  HIGH_WATERMARK  RETAINED\n0          1              5               5", "retention table:\n%s", table)
		})
		t.Run("prune of a stream without retention fails and says how to set one", func(t *testing.T) {
			b.fails(t, cli.ExitFailure, `stream "orders" has no retention, so nothing is pruned; set one with: rheo retention orders --max-age 30d`,
				"prune", "orders")
		})
		t.Run("retention --max-age takes Go durations, days and weeks", func(t *testing.T) {
			for _, c := range [][2]string{{"2w", "2w"}, {"14d", "2w"}, {"36h", "36h0m0s"}, {"1d12h", "36h0m0s"},
				{"90m", "1h30m0s"}, {"1.5d", "36h0m0s"}, {"1d", "1d"}} {
				got := cliJSON[rangeOut](t, b.ok(t, "retention", "orders", "--max-age", c[0], "--output", "json"))
				require.NotNil(t, got.MaxAge, "--max-age %s shows no max age, want %s", c[0], c[1])
				require.Equal(t, c[1], *got.MaxAge, "--max-age %s", c[0])
			}
			table := b.ok(t, "retention", "orders")
			require.Contains(t, table, `stream "orders" keeps its events for 1d`, "retention table:\n%s", table)
		})
		t.Run("retention rejects what is not a positive duration", func(t *testing.T) {
			for _, age := range []string{"0", "0s", "0d", "-1d", "3x", "1d-2h", "300000d", "", "never"} {
				b.fails(t, cli.ExitUsage, "invalid value", "retention", "orders", "--max-age", age)
			}
			got := cliJSON[rangeOut](t, b.ok(t, "retention", "orders", "--output", "json"))
			require.NotNil(t, got.MaxAge, "the retention changed to none")
			require.Equal(t, "1d", *got.MaxAge, "the retention changed")
		})
		t.Run("prune --dry-run counts per partition and changes nothing", func(t *testing.T) {
			got := cliJSON[pruneOut](t, b.ok(t, "prune", "orders", "--dry-run", "--output", "json"))
			msg := fmt.Sprintf("dry run = %+v, want 3 events of partition 0 (billing has not passed partition 1)", got)
			require.True(t, got.DryRun, msg)
			require.Equal(t, int64(3), got.Total, msg)
			require.Len(t, got.Partitions, 2, msg)
			require.Equal(t, int64(3), got.Partitions[0].Events, msg)
			require.Equal(t, int64(4), got.Partitions[0].LowWatermark, msg)
			require.Zero(t, got.Partitions[1].Events, msg)
			require.Equal(t, []int64{1, 1}, lows(), "low watermarks after a dry run")
			table := b.ok(t, "prune", "orders", "--dry-run", "--force")
			for _, want := range []string{"WOULD_PRUNE", "total      6", "dry run: nothing was changed"} {
				require.Contains(t, table, want, "dry-run table:\n%s", table)
			}
		})
		t.Run("prune deletes the aged events every group has passed and prints the watermarks", func(t *testing.T) {
			table := b.ok(t, "prune", "orders")
			require.Contains(t, table, "PARTITION  PRUNED  LOW_WATERMARK  HIGH_WATERMARK\n0          3       4              5", "prune table:\n%s", table)
			require.Contains(t, table, `pruned 3 event(s) of stream "orders" in 2 transaction(s)`, "prune table:\n%s", table)
			require.Equal(t, []int64{4, 1}, lows(), "low watermarks")
			second := cliJSON[pruneOut](t, b.ok(t, "prune", "orders", "--output", "json"))
			require.Zero(t, second.Total, "a second prune = %+v, want nothing in one call", second)
			require.Equal(t, 1, second.Batches, "a second prune = %+v, want nothing in one call", second)
		})
		t.Run("prune --force deletes what groups have not settled, in batches of --max-count", func(t *testing.T) {
			got := cliJSON[pruneOut](t, b.ok(t, "prune", "orders", "--force", "--max-count", "1", "--output", "json"))
			msg := fmt.Sprintf("prune --force = %+v, want partition 1's 3 events in 3 batches and an empty one", got)
			require.True(t, got.Force, msg)
			require.Equal(t, int64(3), got.Total, msg)
			require.Equal(t, 4, got.Batches, msg)
			require.Equal(t, int64(3), got.Partitions[1].Events, msg)
			require.Equal(t, int64(4), got.Partitions[1].LowWatermark, msg)
			lag := b.lag(t, "orders")
			require.Equal(t, int64(3), lag.Partitions[1].Frontier, "billing's lag after --force = %+v, want partition 1 past the pruned events", lag)
			require.Zero(t, lag.Partitions[1].Lag, "billing's lag after --force = %+v, want partition 1 past the pruned events", lag)
		})
		t.Run("retention --max-age forever removes the retention", func(t *testing.T) {
			got := cliJSON[rangeOut](t, b.ok(t, "retention", "orders", "--max-age", "forever", "--output", "json"))
			msg := fmt.Sprintf("retention forever = %+v, want no max age and the watermarks kept", got)
			require.Nil(t, got.MaxAge, msg)
			require.Equal(t, int64(4), got.Partitions[0].LowWatermark, msg)
			require.Equal(t, int64(2), got.Partitions[0].Retained, msg)
			b.fails(t, cli.ExitFailure, "has no retention", "prune", "orders", "--force")
		})
		t.Run("prune and retention reject bad flags and name unknown streams", func(t *testing.T) {
			b.fails(t, cli.ExitUsage, "--max-count must be at least 1, got 0", "prune", "orders", "--max-count", "0")
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "prune", "nope")
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "prune", "nope", "--dry-run")
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "retention", "nope")
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "retention", "nope", "--max-age", "1d")
		})
	})
}

func TestCLIDrop(t *testing.T) {
	t.Parallel()
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		ctx := context.Background()
		b.cliStream(t, "orders", 2, 5)
		b.cliAppend(t, "orders", 4)
		require.NoError(t, b.drv.CreateGroup(ctx, "orders", "audit", nil))
		held := b.cliDeadLetter(t, "orders", "poison")
		groups := func() []string {
			gs, err := b.drv.ListGroups(ctx, "orders")
			require.NoError(t, err)
			var names []string
			for _, g := range gs {
				names = append(names, g.Name)
			}
			return names
		}

		t.Run("drop-group and drop-stream without --confirm change nothing", func(t *testing.T) {
			b.fails(t, cli.ExitUsage, "rheo drop-group: --confirm is required", "drop-group", "orders", "audit")
			b.fails(t, cli.ExitUsage, "rheo drop-group: --confirm is required", "drop-group", "nope", "audit")
			b.fails(t, cli.ExitUsage, "rheo drop-stream: --confirm is required", "drop-stream", "orders")
			require.Equal(t, []string{"audit", "billing"}, groups(), "groups, want both")
		})
		t.Run("drop-group removes the group and its dead letters", func(t *testing.T) {
			got := cliJSON[map[string]any](t, b.ok(t, "drop-group", "orders", "billing", "--confirm", "--output", "json"))
			require.Equal(t, true, got["dropped"], "drop-group printed %v", got)
			require.Equal(t, "billing", got["group"], "drop-group printed %v", got)
			require.Equal(t, []string{"audit"}, groups(), "groups, want audit only")
			require.NoError(t, b.drv.CreateGroup(ctx, "orders", "billing", nil))
			dls, err := b.drv.DeadLetters(ctx, "orders", "billing", nil)
			require.NoError(t, err, "dead letters of billing created anew")
			require.Empty(t, dls, "dead letters of billing created anew, want none (%s was dead)", held.Event.ID)
			require.Equal(t, "dropped group \"billing\" of stream \"orders\"\n", b.ok(t, "drop-group", "orders", "billing", "--confirm"), "drop-group printed")
			b.fails(t, cli.ExitFailure, `group "billing" not found on stream "orders"`, "drop-group", "orders", "billing", "--confirm")
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "drop-group", "nope", "billing", "--confirm")
		})
		t.Run("drop-stream prints the events deleted", func(t *testing.T) {
			got := cliJSON[map[string]any](t, b.ok(t, "drop-stream", "orders", "--confirm", "--output", "json"))
			require.Equal(t, "orders", got["stream"], "drop-stream printed %v", got)
			require.Equal(t, float64(4), got["events_deleted"], "drop-stream printed %v", got)
			b.cliStream(t, "short", 1, 1)
			b.cliAppend(t, "short", 2)
			require.Equal(t, "dropped stream \"short\": 2 event(s) deleted\n", b.ok(t, "drop-stream", "short", "--confirm"), "drop-stream printed")
			streams := cliJSON[[]rheo.StreamSummary](t, b.ok(t, "streams", "--output", "json"))
			require.Empty(t, streams, "streams after the drops = %+v, want none", streams)
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "drop-stream", "nope", "--confirm")
		})
	})
}

// cliSignalBuffer is a buffer safe for concurrent use that signals every
// write.
type cliSignalBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{}
}

func (b *cliSignalBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.written <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

func (b *cliSignalBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the buffer holds want, failing when nothing is
// written for 20 seconds.
func (b *cliSignalBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	// Each write restarts the wait: a slow machine that is still printing
	// is given the time it needs.
	for !strings.Contains(b.String(), want) {
		select {
		case <-b.written:
		case <-time.After(20 * time.Second):
			require.FailNow(t, fmt.Sprintf("waited 20 s for %q, with nothing new written; got:\n%s", want, b.String()))
		}
	}
}

func TestCLITail(t *testing.T) {
	t.Parallel()
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		b.cliStream(t, "orders", 2, 5)
		evs := b.cliAppend(t, "orders", 7)

		t.Run("tail prints the last events in time order", func(t *testing.T) {
			lines := strings.Split(strings.TrimSpace(b.ok(t, "tail", "orders", "-n", "3", "--output", "json")), "\n")
			require.Len(t, lines, 3, "tail -n 3 printed %d lines", len(lines))
			for i, line := range lines {
				require.Equal(t, evs[len(evs)-3+i].ID, cliJSON[rheo.Event](t, line).ID, "line %d", i)
			}
			all := b.ok(t, "tail", "orders", "-n", "100")
			require.Equal(t, len(evs), strings.Count(all, "\n"), "tail -n 100 printed:\n%s", all)
			require.Contains(t, all, evs[0].ID, "tail -n 100 printed:\n%s", all)
			p1 := b.ok(t, "tail", "orders", "--partition", "1", "--output", "json")
			for line := range strings.Lines(p1) {
				ev := cliJSON[rheo.Event](t, line)
				require.Equal(t, 1, ev.Partition, "tail --partition 1 printed %+v", ev)
			}
		})
		t.Run("tail --follow prints events appended after it started", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := &cliSignalBuffer{written: make(chan struct{}, 1)}
			var errOut bytes.Buffer
			done := make(chan int)
			go func() {
				done <- cli.Run(ctx, []string{"tail", "orders", "-n", "1", "--follow", "--output", "json", "--database-url", b.url},
					strings.NewReader(""), out, &errOut)
			}()
			out.waitFor(t, evs[len(evs)-1].ID)
			live, err := b.drv.Append(context.Background(), "orders", json.RawMessage(`{"type":"live"}`), &rheo.AppendOptions{Key: "live"})
			require.NoError(t, err)
			out.waitFor(t, live.ID)
			cancel()
			require.Equal(t, cli.ExitOK, <-done, "tail --follow ended: %s", errOut.String())
		})
		t.Run("tail of an unknown stream or partition fails", func(t *testing.T) {
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "tail", "nope")
			b.fails(t, cli.ExitUsage, "invalid_partition", "tail", "orders", "--partition", "2")
		})
	})
}

func TestCLIDatabaseErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no database URL", []string{"streams"}, cli.ExitUsage, "no database given: pass --database-url URL or set DATABASE_URL"},
		{"a URL of an unknown kind", []string{"streams", "--database-url", "mysql://u:secret@db/app"}, cli.ExitUsage,
			`bad database URL in --database-url: unsupported database URL scheme "mysql"`},
		{"an unreachable server", []string{"lag", "orders", "billing", "--database-url", "postgres://u:secret@127.0.0.1:1/app?connect_timeout=2"},
			cli.ExitFailure, "cannot reach the database postgres://u:xxxxx@127.0.0.1:1/app?connect_timeout=2: connection refused"},
		{"a missing SQLite file", []string{"streams", "--database-url", "sqlite:///nonexistent/rheo.db"}, cli.ExitFailure,
			"no SQLite database at /nonexistent/rheo.db; create one with: rheo-migrate up --database-url sqlite:///nonexistent/rheo.db"},
		{"a bad --output", []string{"streams", "--output", "yaml"}, cli.ExitUsage, `invalid value "yaml" for flag -output`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(cli.EnvDatabaseURL, "")
			r := cliRun(t, "", tt.args...)
			cliWantFailure(t, r, tt.code, tt.want)
			require.NotContains(t, r.stderr, "secret", "stderr repeats the password: %s", r.stderr)
		})
	}
	t.Run("a PostgreSQL database without the schema says how to install it", func(t *testing.T) {
		url := testdb.NewDatabase(t)
		r := cliRun(t, "", "streams", "--database-url", url)
		cliWantFailure(t, r, cli.ExitFailure, "has no Rheo schema; install it with: rheo-migrate up --database-url 'postgres://")
	})
	t.Run("DATABASE_URL is read when --database-url is not given", func(t *testing.T) {
		b := cliOpenBackend(t, "sqlite://"+filepath.Join(t.TempDir(), "env.db"))
		b.cliStream(t, "from-env", 1, 1)
		t.Setenv(cli.EnvDatabaseURL, b.url)
		r := cliRun(t, "", "streams")
		require.Equal(t, cli.ExitOK, r.code, "streams with DATABASE_URL: %s", r)
		require.Contains(t, r.stdout, "from-env", "streams with DATABASE_URL: %s", r)
	})
}

func TestCLIUsage(t *testing.T) {
	t.Setenv(cli.EnvDatabaseURL, "")
	t.Run("help lists every command", func(t *testing.T) {
		r := cliRun(t, "", "help")
		require.Equal(t, cli.ExitOK, r.code, "help: %s", r)
		for _, cmd := range []string{"demo", "streams", "groups", "lag", "info", "dead-letters", "replay", "reset",
			"retention", "prune", "append", "query", "tail", "create-stream", "create-group", "drop-group", "drop-stream"} {
			assert.Contains(t, r.stdout, "\n  "+cmd+" ", "help does not list %s:\n%s", cmd, r.stdout)
		}
	})
	t.Run("no arguments print the usage and fail", func(t *testing.T) {
		r := cliRun(t, "")
		require.Equal(t, cli.ExitUsage, r.code, "rheo: %s", r)
		require.Contains(t, r.stderr, "Usage: rheo COMMAND", "rheo: %s", r)
	})
	t.Run("a command's -h and help COMMAND print its flags", func(t *testing.T) {
		for _, args := range [][]string{{"replay", "-h"}, {"help", "replay"}, {"replay", "--help"}} {
			r := cliRun(t, "", args...)
			require.Equal(t, cli.ExitOK, r.code, "rheo %v: %s", args, r)
			for _, want := range []string{"Usage: rheo replay STREAM GROUP", "-dry-run", "-database-url"} {
				require.Contains(t, r.stdout, want, "rheo %v: %s", args, r)
			}
		}
	})
	t.Run("unknown commands and flags and missing arguments are usage errors", func(t *testing.T) {
		cliWantFailure(t, cliRun(t, "", "frobnicate"), cli.ExitUsage, `unknown command "frobnicate"; list the commands with: rheo help`)
		cliWantFailure(t, cliRun(t, "", "lag", "orders"), cli.ExitUsage, "rheo lag: missing GROUP")
		cliWantFailure(t, cliRun(t, "", "lag", "orders", "billing", "extra"), cli.ExitUsage, `unexpected argument "extra"`)
		cliWantFailure(t, cliRun(t, "", "streams", "--nope"), cli.ExitUsage, "flag provided but not defined: -nope")
		cliWantFailure(t, cliRun(t, "", "help", "frobnicate"), cli.ExitUsage, `unknown command "frobnicate"`)
	})
	t.Run("flags may follow the arguments, and -- ends the flags", func(t *testing.T) {
		b := cliOpenBackend(t, "sqlite://"+filepath.Join(t.TempDir(), "args.db"))
		r := cliRun(t, "", "create-stream", "--database-url", b.url, "--", "-dash")
		cliWantFailure(t, r, cli.ExitUsage, "invalid stream name")
		r = cliRun(t, "", "create-stream", "s1", "--partitions", "2", "--database-url", b.url, "--output", "json")
		require.Equal(t, cli.ExitOK, r.code, "flags after the argument: %s", r)
		require.Equal(t, float64(2), cliJSON[map[string]any](t, r.stdout)["partition_count"], "flags after the argument: %s", r)
	})
}

func TestCLIQuery(t *testing.T) {
	t.Parallel()
	type page struct {
		Events []rheo.Event `json:"events"`
		Cursor string       `json:"cursor"`
	}
	ids := func(evs []rheo.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		return out
	}
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		ctx := context.Background()
		b.cliStream(t, "orders", 3, 5)
		// Orders o-0..o-8 of customers c-0..c-2, each followed by its
		// payment, correlated by order.
		var placed, paid []rheo.Event
		for i := range 9 {
			customer := fmt.Sprintf("c-%d", i%3)
			order := fmt.Sprintf("o-%d", i)
			p, err := b.drv.Append(ctx, "orders", json.RawMessage(fmt.Sprintf(`{"type":"placed","customer":%q,"total":%d}`, customer, 10*i)),
				&rheo.AppendOptions{Key: customer, ID: order + ".placed", Metadata: rheo.Lineage{CorrelationID: order}.Metadata()})
			require.NoError(t, err)
			meta, err := rheo.CausedBy(p, nil)
			require.NoError(t, err)
			q, err := b.drv.Append(ctx, "orders", json.RawMessage(`{"type":"paid"}`),
				&rheo.AppendOptions{Key: customer, ID: order + ".paid", Metadata: meta})
			require.NoError(t, err)
			placed, paid = append(placed, p), append(paid, q)
		}

		t.Run("query by correlation id finds an order and its payment", func(t *testing.T) {
			got := cliJSON[page](t, b.ok(t, "query", "orders", "--correlation-id", "o-4", "--output", "json"))
			require.Equal(t, []string{"o-4.placed", "o-4.paid"}, ids(got.Events), "query --correlation-id o-4")
			table := b.ok(t, "query", "orders", "--correlation-id", "o-4")
			require.True(t, strings.HasPrefix(table, "TS "), "query table:\n%s", table)
			require.Contains(t, table, "CORRELATION_ID", "query table:\n%s", table)
			require.Equal(t, 2, strings.Count(table, "o-4."), "query table:\n%s", table)
		})
		t.Run("query by type and payload", func(t *testing.T) {
			got := cliJSON[page](t, b.ok(t, "query", "orders", "--type", "placed", "--payload", `{"customer":"c-1"}`, "--output", "json"))
			require.Equal(t, []string{"o-1.placed", "o-4.placed", "o-7.placed"}, ids(got.Events), "query")
			byKey := cliJSON[page](t, b.ok(t, "query", "orders", "--key", "c-2", "--type", "paid", "--output", "json"))
			require.Equal(t, []string{"o-2.paid", "o-5.paid", "o-8.paid"}, ids(byKey.Events), "query --key c-2 --type paid")
		})
		t.Run("query pages with --limit and --after, in either order and direction", func(t *testing.T) {
			byTime := func(a, b rheo.Event) int {
				return cmp.Or(a.TS.Compare(b.TS), a.Partition-b.Partition, cmp.Compare(a.Sequence, b.Sequence))
			}
			bySequence := func(a, b rheo.Event) int {
				return cmp.Or(cmp.Compare(a.Sequence, b.Sequence), a.Partition-b.Partition)
			}
			for _, order := range []struct {
				name string
				cmp  func(a, b rheo.Event) int
			}{{"time", byTime}, {"sequence", bySequence}} {
				for _, desc := range []bool{false, true} {
					var all []rheo.Event
					after := ""
					for range 10 {
						args := []string{"query", "orders", "--type", "placed", "--order", order.name, "--limit", "4", "--output", "json"}
						if desc {
							args = append(args, "--desc")
						}
						if after != "" {
							args = append(args, "--after", after)
						}
						got := cliJSON[page](t, b.ok(t, args...))
						all = append(all, got.Events...)
						if len(got.Events) < 4 {
							break
						}
						after = got.Cursor
					}
					want := slices.Clone(placed)
					slices.SortFunc(want, order.cmp)
					if desc {
						slices.Reverse(want)
					}
					require.Equal(t, ids(want), ids(all), "pages of --order %s (desc %v)", order.name, desc)
				}
			}
			r := b.run(t, "query", "orders", "--limit", "2")
			require.Equal(t, cli.ExitOK, r.code, "a full page does not say how to get the next: %s", r)
			require.Contains(t, r.stderr, "next page: the same command with --after time:asc:", "a full page does not say how to get the next: %s", r)
		})
		t.Run("query by partition, sequence and time", func(t *testing.T) {
			p := paid[0].Partition
			got := cliJSON[page](t, b.ok(t, "query", "orders", "--partition", fmt.Sprint(p), "--after-sequence", "1",
				"--until-sequence", "2", "--output", "json"))
			require.Equal(t, []string{paid[0].ID}, ids(got.Events), "query of partition %d sequence 2", p)
			future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			got = cliJSON[page](t, b.ok(t, "query", "orders", "--from", future, "--output", "json"))
			require.Empty(t, got.Events, "query from an hour ahead = %v, want nothing", ids(got.Events))
			got = cliJSON[page](t, b.ok(t, "query", "orders", "--to", future, "--limit", "100", "--output", "json"))
			require.Len(t, got.Events, 18, "query up to an hour ahead returned %d events, want all 18", len(got.Events))
		})
		t.Run("query errors name the problem", func(t *testing.T) {
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "query", "nope")
			b.fails(t, cli.ExitUsage, "invalid_partition", "query", "orders", "--partition", "3")
			b.fails(t, cli.ExitUsage, "--payload is not valid JSON", "query", "orders", "--payload", "{")
			b.fails(t, cli.ExitUsage, "--metadata and --correlation-id are exclusive", "query", "orders",
				"--metadata", "{}", "--correlation-id", "x")
			b.fails(t, cli.ExitUsage, "invalid_argument", "query", "orders", "--payload", "[1]")
			cursor := cliJSON[page](t, b.ok(t, "query", "orders", "--type", "paid", "--limit", "1", "--order", "sequence", "--output", "json")).Cursor
			b.fails(t, cli.ExitFailure, "cursor_not_found", "query", "orders", "--type", "placed", "--order", "sequence", "--after", cursor)
			b.fails(t, cli.ExitUsage, "is not a cursor of --order time", "query", "orders", "--after", cursor)
			timeCursor := cliJSON[page](t, b.ok(t, "query", "orders", "--limit", "1", "--output", "json")).Cursor
			b.fails(t, cli.ExitUsage, "is a cursor of --order time", "query", "orders", "--order", "sequence", "--after", timeCursor)
			b.fails(t, cli.ExitUsage, "the cursor of a query in the other direction; leave out --desc", "query", "orders", "--desc", "--after", timeCursor)
			b.fails(t, cli.ExitUsage, "--order must be time or sequence", "query", "orders", "--order", "ts")
		})
	})
}

// TestCLIServe runs rheo serve on a free port: /metrics shows the
// database's true values, /healthz answers 200, and cancelling the
// command (SIGINT, SIGTERM) shuts it down.
func TestCLIServe(t *testing.T) {
	t.Parallel()
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		b.cliStream(t, "orders", 2, 5)
		ctx := context.Background()
		for range 3 {
			_, err := b.drv.Append(ctx, "orders", json.RawMessage(`{"k": 1}`), &rheo.AppendOptions{Partition: new(int)})
			require.NoError(t, err)
		}

		runCtx, cancel := context.WithCancel(ctx)
		stdout := &testlog.Buffer{}
		var stderr bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- cli.Run(runCtx, []string{"serve", "--listen", "127.0.0.1:0", "--database-url", b.url}, nil, stdout, &stderr)
		}()
		var base string
		deadline := time.Now().Add(30 * time.Second)
		for base == "" {
			if m := regexp.MustCompile(`listening on (http://\S+) `).FindStringSubmatch(stdout.String()); m != nil {
				base = m[1]
			} else if time.Now().After(deadline) {
				cancel()
				require.FailNow(t, fmt.Sprintf("rheo serve did not say where it listens: %q, stderr %q", stdout.String(), stderr.String()))
			}
		}

		get := func(path string) (int, string) {
			t.Helper()
			resp, err := http.Get(base + path)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(body)
		}
		code, body := get("/healthz")
		assert.Equal(t, http.StatusOK, code, "/healthz: %q, want 200 ok", body)
		assert.Equal(t, "ok\n", body, "/healthz: %d, want 200 ok", code)
		code, body = get("/metrics")
		assert.Equal(t, http.StatusOK, code, "/metrics:\n%s", body)
		for _, want := range []string{
			`rheo_group_lag{group="billing",partition="0",stream="orders"} 3`,
			`rheo_group_lag{group="billing",partition="1",stream="orders"} 0`,
			`rheo_group_inflight{group="billing",stream="orders"} 0`,
			`rheo_group_pending_retry{group="billing",stream="orders"} 0`,
			`rheo_group_dead_letters{group="billing",stream="orders"} 0`,
			`rheo_group_oldest_unsettled_age_seconds{group="billing",stream="orders"}`,
			`rheo_stream_high_watermark{partition="0",stream="orders"} 3`,
			`rheo_stream_high_watermark{partition="1",stream="orders"} 0`,
			`rheo_scrape_success 1`,
		} {
			assert.Contains(t, body, want, "/metrics (%d) lacks %q", code, want)
		}

		if strings.HasPrefix(b.url, "postgres") {
			// The database goes away: its connections are cut.
			admin := cliConnect(t, testdb.ServerURL(t))
			cfg, err := pgx.ParseConfig(b.url)
			require.NoError(t, err)
			name := cfg.Database
			_, err = admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			require.NoError(t, err)
			code, body = get("/healthz")
			assert.Equal(t, http.StatusServiceUnavailable, code, "/healthz without a database: %q, want 503", body)
		}

		cancel()
		select {
		case code := <-done:
			assert.Equal(t, cli.ExitOK, code, "rheo serve exited after the interrupt, want 0; stderr %q", stderr.String())
		case <-time.After(30 * time.Second):
			require.FailNow(t, "rheo serve did not stop after the interrupt")
		}
	})
}
