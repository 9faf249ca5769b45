package cli_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { drv.Close() })
	return &cliBackend{url: url, drv: drv}
}

// cliConnect opens a connection that is closed when t ends.
func cliConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
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
	if r.code != cli.ExitOK {
		t.Fatalf("rheo %s: %s", strings.Join(args, " "), r)
	}
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
	if r.code != code || !strings.Contains(r.stderr, want) || r.stdout != "" {
		t.Fatalf("want exit %d with %q on stderr and nothing on stdout; got %s", code, want, r)
	}
	if code == cli.ExitFailure && strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("want one line on stderr, got %q", r.stderr)
	}
}

// cliJSON decodes a command's --output json.
func cliJSON[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	return v
}

// cliStream creates a stream with partitions and a group "billing" with
// maxAttempts through the test's driver.
func (b *cliBackend) cliStream(t *testing.T, stream string, partitions, maxAttempts int) {
	t.Helper()
	ctx := context.Background()
	if err := b.drv.CreateStream(ctx, stream, partitions); err != nil {
		t.Fatal(err)
	}
	if err := b.drv.CreateGroup(ctx, stream, "billing", &rheo.CreateGroupOptions{MaxAttempts: maxAttempts}); err != nil {
		t.Fatal(err)
	}
}

// cliAppend appends n events with keys k0..k(n-1) through the test's
// driver and returns them.
func (b *cliBackend) cliAppend(t *testing.T, stream string, n int) []rheo.Event {
	t.Helper()
	var evs []rheo.Event
	for i := range n {
		ev, err := b.drv.Append(context.Background(), stream, json.RawMessage(fmt.Sprintf(`{"type":"placed","n":%d}`, i)),
			&rheo.AppendOptions{Key: fmt.Sprintf("k%d", i)})
		if err != nil {
			t.Fatal(err)
		}
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
	if err != nil || len(leases) != 1 {
		t.Fatalf("fetch one lease: %v, %d leases", err, len(leases))
	}
	if err := b.drv.Reject(ctx, leases[0].LeaseID, reason); err != nil {
		t.Fatal(err)
	}
	return leases[0]
}

func (b *cliBackend) lag(t *testing.T, stream string) rheo.Lag {
	t.Helper()
	lag, err := b.drv.Lag(context.Background(), stream, "billing", nil)
	if err != nil {
		t.Fatal(err)
	}
	return lag
}

// TestCLIDemo runs its cases in parallel: a demo spends most of its
// seconds waiting out the worker's retry back-off.
func TestCLIDemo(t *testing.T) {
	t.Parallel()
	t.Run("the demo runs on a temporary SQLite file without flags", func(t *testing.T) {
		t.Parallel()
		r := cliRun(t, "", "demo")
		if r.code != cli.ExitOK || !strings.Contains(r.stdout, "Demo complete") {
			t.Fatalf("demo: %s", r)
		}
		for _, want := range []string{"dead letters of risk", "replay risk from sequence", "lag after consuming", "on SQLite",
			"correlation id order-007: the order and the trade it caused"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("demo output lacks %q", want)
			}
		}
	})
	t.Run("the demo runs on PostgreSQL, twice on the same database, and drops its stream", func(t *testing.T) {
		t.Parallel()
		b := cliOpen(t, testbackend.PostgresURL(t), false)
		for range 2 {
			out := b.ok(t, "demo")
			if !strings.Contains(out, "Demo complete") || !strings.Contains(out, "on PostgreSQL") ||
				!strings.Contains(out, "Dropped the demo's stream") {
				t.Fatalf("demo output:\n%s", out)
			}
		}
		streams, err := b.drv.ListStreams(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(streams) != 0 {
			t.Fatalf("two demo runs left %d streams, want none", len(streams))
		}
	})
	t.Run("the demo with --keep on PostgreSQL keeps its stream", func(t *testing.T) {
		t.Parallel()
		b := cliOpen(t, testbackend.PostgresURL(t), false)
		out := b.ok(t, "demo", "--keep")
		if !strings.Contains(out, "is kept (--keep)") {
			t.Fatalf("demo --keep output:\n%s", out)
		}
		if streams, err := b.drv.ListStreams(context.Background()); err != nil || len(streams) != 1 {
			t.Fatalf("demo --keep left %d streams (%v), want its own", len(streams), err)
		}
	})
	t.Run("the demo installs Rheo into a database that has none, and says so", func(t *testing.T) {
		t.Parallel()
		for _, url := range []string{testdb.NewDatabase(t), "sqlite://" + filepath.Join(t.TempDir(), "new.db")} {
			r := cliRun(t, "", "demo", "--database-url", url)
			if r.code != cli.ExitOK || !strings.Contains(r.stdout, "Rheo was not installed in this database: installed it, as rheo-migrate up does") ||
				!strings.Contains(r.stdout, "Demo complete") {
				t.Fatalf("demo on %s: %s", url, r)
			}
			r = cliRun(t, "", "demo", "--database-url", url)
			if r.code != cli.ExitOK || strings.Contains(r.stdout, "installed it") {
				t.Fatalf("second demo on %s: %s", url, r)
			}
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
		if r.code != cli.ExitOK || !strings.Contains(r.stdout, "(from $DATABASE_URL)") || !strings.Contains(r.stdout, "is kept (--keep)") {
			t.Fatalf("demo with DATABASE_URL: %s", r)
		}
		if streams, err := b.drv.ListStreams(context.Background()); err != nil || len(streams) != 1 {
			t.Fatalf("demo --keep on $DATABASE_URL left %d streams (%v), want its own", len(streams), err)
		}
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
			if got := cliJSON[[]rheo.StreamSummary](t, b.ok(t, "streams", "--output", "json")); len(got) != 0 {
				t.Fatalf("streams = %+v, want none", got)
			}
		})
		t.Run("create-stream creates a stream that streams lists", func(t *testing.T) {
			out := b.ok(t, "create-stream", "orders", "--partitions", "4")
			if !strings.Contains(out, `created stream "orders" with 4 partition(s)`) {
				t.Fatalf("create-stream printed %q", out)
			}
			got := cliJSON[[]rheo.StreamSummary](t, b.ok(t, "streams", "--output", "json"))
			if len(got) != 1 || got[0].Name != "orders" || got[0].PartitionCount != 4 {
				t.Fatalf("streams = %+v, want orders with 4 partitions", got)
			}
			table := b.ok(t, "streams")
			if !strings.HasPrefix(table, "STREAM  PARTITIONS  CREATED_AT\norders  4  ") {
				t.Fatalf("streams table:\n%s", table)
			}
		})
		t.Run("create-stream of an existing stream fails and changes nothing", func(t *testing.T) {
			b.fails(t, cli.ExitFailure, `stream "orders" already exists; list streams with: rheo streams`,
				"create-stream", "orders", "--partitions", "2")
			got := cliJSON[[]rheo.StreamSummary](t, b.ok(t, "streams", "--output", "json"))
			if len(got) != 1 || got[0].PartitionCount != 4 {
				t.Fatalf("streams = %+v, want orders unchanged", got)
			}
		})
		t.Run("create-stream with an invalid name or count reports the reason", func(t *testing.T) {
			b.fails(t, cli.ExitUsage, "invalid_argument: invalid stream name", "create-stream", "bad name")
			b.fails(t, cli.ExitUsage, "invalid_partition_count", "create-stream", "zero", "--partitions", "0")
		})
		t.Run("create-group creates a group that groups lists", func(t *testing.T) {
			out := b.ok(t, "create-group", "orders", "billing", "--max-attempts", "3", "--output", "json")
			created := cliJSON[map[string]any](t, out)
			if created["group"] != "billing" || created["max_attempts"] != float64(3) {
				t.Fatalf("create-group printed %s", out)
			}
			b.ok(t, "create-group", "orders", "audit")
			got := cliJSON[[]rheo.GroupSummary](t, b.ok(t, "groups", "orders", "--output", "json"))
			if len(got) != 2 || got[0].Name != "audit" || got[0].MaxAttempts != 5 || got[1].Name != "billing" || got[1].MaxAttempts != 3 {
				t.Fatalf("groups = %+v, want audit (5 attempts) and billing (3)", got)
			}
			if table := b.ok(t, "groups", "orders"); !strings.HasPrefix(table, "GROUP    MAX_ATTEMPTS  ORDERING  CREATED_AT\naudit    5             none      ") {
				t.Fatalf("groups table:\n%s", table)
			}
		})
		t.Run("create-group of an existing group fails", func(t *testing.T) {
			b.fails(t, cli.ExitFailure, `group "billing" already exists on stream "orders"`, "create-group", "orders", "billing")
		})
		t.Run("create-group can start after a sequence", func(t *testing.T) {
			b.cliAppend(t, "orders", 3)
			b.ok(t, "create-group", "orders", "late", "--start-after", "100")
			lag := cliJSON[rheo.Lag](t, b.ok(t, "lag", "orders", "late", "--output", "json"))
			if lag.Total != 0 || lag.Partitions[0].Frontier != 100 {
				t.Fatalf("lag of a group started after 100 = %+v, want frontier 100 and no lag", lag)
			}
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
		if err := b.drv.CreateStream(ctx, "orders", 1); err != nil {
			t.Fatal(err)
		}
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
			if !strings.Contains(out, `created group "billing" on stream "orders" (at most 5 attempts per event, ordering key)`) {
				t.Fatalf("create-group printed %q", out)
			}
			created := cliJSON[map[string]any](t, b.ok(t, "create-group", "orders", "audit", "--output", "json"))
			if created["ordering"] != "none" {
				t.Fatalf("create-group without --ordering printed %v", created)
			}
			b.ok(t, "create-group", "orders", "ledger", "--ordering", "partition")
			want := map[string]rheo.Ordering{"audit": rheo.OrderingNone, "billing": rheo.OrderingKey, "ledger": rheo.OrderingPartition}
			if got := orderings(t); !maps.Equal(got, want) {
				t.Fatalf("groups = %v, want %v", got, want)
			}
			table := b.ok(t, "groups", "orders")
			if !strings.Contains(table, "\nbilling  5             key       ") {
				t.Fatalf("groups table:\n%s", table)
			}
		})
		t.Run("a key group hands out one event of a key at a time", func(t *testing.T) {
			for _, k := range []string{"a", "a", "b"} {
				b.ok(t, "append", "orders", "--key", k, `{"type":"placed"}`)
			}
			leases, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 10})
			if err != nil || len(leases) != 2 || leases[0].Event.Sequence != 1 || leases[1].Event.Sequence != 3 {
				t.Fatalf("fetch of the key group: %+v, %v; want events 1 and 3", leases, err)
			}
			info := cliJSON[rheo.GroupInfo](t, b.ok(t, "info", "orders", "billing", "--output", "json"))
			if info.Lag != 3 || info.InFlight != 2 || info.PendingRetry != 0 {
				t.Fatalf("info = %+v, want lag 3 with 2 in flight and the blocked event in neither count", info)
			}
		})
		t.Run("set-ordering changes a group's ordering", func(t *testing.T) {
			out := b.ok(t, "set-ordering", "orders", "audit", "partition")
			if !strings.Contains(out, `group "audit" of stream "orders" now has ordering partition`) {
				t.Fatalf("set-ordering printed %q", out)
			}
			got := cliJSON[map[string]any](t, b.ok(t, "set-ordering", "orders", "billing", "none", "--output", "json"))
			if got["ordering"] != "none" || got["group"] != "billing" {
				t.Fatalf("set-ordering printed %v", got)
			}
			want := map[string]rheo.Ordering{"audit": rheo.OrderingPartition, "billing": rheo.OrderingNone, "ledger": rheo.OrderingPartition}
			if got := orderings(t); !maps.Equal(got, want) {
				t.Fatalf("groups = %v, want %v", got, want)
			}
		})
		t.Run("an unknown mode is a bad command line and changes nothing", func(t *testing.T) {
			b.fails(t, cli.ExitUsage, "invalid_argument: ordering must be none, key or partition", "set-ordering", "orders", "audit", "fifo")
			b.fails(t, cli.ExitUsage, "invalid_argument: ordering must be none, key or partition",
				"create-group", "orders", "x", "--ordering", "strict")
			b.fails(t, cli.ExitUsage, "missing MODE", "set-ordering", "orders", "audit")
			if got := orderings(t); got["audit"] != rheo.OrderingPartition || len(got) != 3 {
				t.Fatalf("groups = %v, want audit unchanged and no group x", got)
			}
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
			if ev.Partition != rheo.PartitionForKey("customer-7", 4) || ev.Sequence != 1 || ev.Key != "customer-7" || ev.Type != "placed" {
				t.Fatalf("appended %+v, want partition %d sequence 1", ev, rheo.PartitionForKey("customer-7", 4))
			}
			var meta map[string]string
			if err := json.Unmarshal(ev.Metadata, &meta); err != nil || meta["correlation_id"] != "c-1" {
				t.Fatalf("metadata = %s, want the correlation id", ev.Metadata)
			}
			table := b.ok(t, "append", "orders", `{"type":"placed"}`, "--partition", "2")
			if !strings.HasPrefix(table, "STREAM  PARTITION  SEQUENCE  ID") || !strings.Contains(table, "orders  2          1  ") {
				t.Fatalf("append table:\n%s", table)
			}
		})
		t.Run("append with an id is idempotent, and another payload under it fails", func(t *testing.T) {
			first := cliJSON[rheo.Event](t, b.ok(t, "append", "orders", `{"type":"paid"}`, "--id", "pay-1", "--output", "json"))
			again := cliJSON[rheo.Event](t, b.ok(t, "append", "orders", `{"type":"paid"}`, "--id", "pay-1", "--output", "json"))
			if again.Sequence != first.Sequence || again.Partition != first.Partition || again.ID != "pay-1" {
				t.Fatalf("repeat = %+v, want the stored %+v", again, first)
			}
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
			if r.code != cli.ExitOK || r.stderr != "" {
				t.Fatalf("append from stdin (no progress when stderr is not a terminal): %s", r)
			}
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
				if p.FirstSequence != 1 || p.LastSequence != p.Events {
					t.Errorf("partition %d: sequences %d..%d for %d events, want 1..%d", p.Partition, p.FirstSequence, p.LastSequence, p.Events, p.Events)
				}
			}
			if got.Appended != n || sum != n || len(got.Partitions) != 3 {
				t.Fatalf("appended %d (%d over %d partitions), want %d over 3", got.Appended, sum, len(got.Partitions), n)
			}
		})
		t.Run("a bad line on stdin is named, after appending the lines before it", func(t *testing.T) {
			before := b.lag(t, "orders").Total
			r := cliRun(t, "{\"type\":\"ok\"}\nnot json\n{}\n", "append", "orders", "--database-url", b.url)
			cliWantFailure(t, r, cli.ExitFailure,
				"rheo: stdin line 2 is not valid JSON; 1 event appended (stdin line 1), none from line 2 on; resume from line 2 once it is fixed\n")
			if after := b.lag(t, "orders").Total; after != before+1 {
				t.Fatalf("%d events were appended, want the one before the bad line", after-before)
			}
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
			if len(lag.Partitions) != 3 || lag.Total != want.Total || lag.Total != int64(len(evs))-1 {
				t.Fatalf("lag = %+v, want %+v (all but the dead letter)", lag, want)
			}
			one := cliJSON[rheo.Lag](t, b.ok(t, "lag", "orders", "billing", "--partition", "1", "--output", "json"))
			if len(one.Partitions) != 1 || one.Partitions[0] != want.Partitions[1] {
				t.Fatalf("lag of partition 1 = %+v, want %+v", one, want.Partitions[1])
			}
			table := b.ok(t, "lag", "orders", "billing")
			lines := strings.Split(strings.TrimSpace(table), "\n")
			if len(lines) != 5 || !strings.HasPrefix(lines[0], "PARTITION  FRONTIER  HIGH_WATERMARK  LAG") ||
				!strings.HasPrefix(lines[4], "total") || !strings.HasSuffix(lines[4], fmt.Sprint(want.Total)) {
				t.Fatalf("lag table:\n%s", table)
			}
		})
		t.Run("info summarises the group", func(t *testing.T) {
			leases, err := b.drv.Fetch(context.Background(), "orders", "billing", &rheo.FetchOptions{MaxCount: 2})
			if err != nil || len(leases) != 2 {
				t.Fatalf("fetch: %v, %d leases", err, len(leases))
			}
			info := cliJSON[struct {
				Stream string `json:"stream"`
				Group  string `json:"group"`
				rheo.GroupInfo
			}](t, b.ok(t, "info", "orders", "billing", "--output", "json"))
			if info.Stream != "orders" || info.Group != "billing" || info.InFlight != 2 || info.DeadLetters != 1 ||
				info.Lag != int64(len(evs))-1 || info.OldestUnsettledTS == nil {
				t.Fatalf("info = %+v, want 2 in flight, 1 dead letter, lag %d", info, len(evs)-1)
			}
			table := b.ok(t, "info", "orders", "billing")
			if !strings.Contains(table, "INFLIGHT") || !strings.Contains(table, "orders  billing") {
				t.Fatalf("info table:\n%s", table)
			}
			for _, l := range leases {
				if err := b.drv.Ack(context.Background(), l.LeaseID); err != nil {
					t.Fatal(err)
				}
			}
		})
		t.Run("leases lists the deliveries in progress, the soonest due first", func(t *testing.T) {
			ctx := context.Background()
			soon, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 1, ConsumerID: "w-soon", LeaseDuration: time.Minute})
			if err != nil || len(soon) != 1 {
				t.Fatalf("fetch: %v, %v", soon, err)
			}
			late, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 1, ConsumerID: "w-late", LeaseDuration: time.Hour})
			if err != nil || len(late) != 1 {
				t.Fatalf("fetch: %v, %v", late, err)
			}
			got := cliJSON[[]rheo.Delivery](t, b.ok(t, "leases", "orders", "billing", "--output", "json"))
			if len(got) != 2 || got[0].EventID != soon[0].Event.ID || got[0].ConsumerID != "w-soon" ||
				got[1].EventID != late[0].Event.ID || got[1].State != "leased" {
				t.Fatalf("leases = %+v, want the minute's lease then the hour's", got)
			}
			table := b.ok(t, "leases", "orders", "billing", "--limit", "1")
			if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 2 ||
				!strings.HasPrefix(lines[0], "EVENT_ID") || !strings.Contains(lines[1], "w-soon") {
				t.Fatalf("leases table:\n%s", table)
			}
			for _, l := range append(soon, late...) {
				if err := b.drv.Ack(ctx, l.LeaseID); err != nil {
					t.Fatal(err)
				}
			}
		})
		t.Run("dead-letters shows the reason and the payload", func(t *testing.T) {
			dls := cliJSON[[]rheo.DeadLetter](t, b.ok(t, "dead-letters", "orders", "billing", "--output", "json"))
			if len(dls) != 1 || dls[0].Event.ID != dead.Event.ID || dls[0].Reason != "bad address" || dls[0].Attempt != 1 ||
				!bytes.Contains(dls[0].Event.Payload, []byte(`"type"`)) {
				t.Fatalf("dead letters = %+v, want %s rejected for bad address", dls, dead.Event.ID)
			}
			table := b.ok(t, "dead-letters", "orders", "billing")
			if !strings.Contains(table, dead.Event.ID) || !strings.Contains(table, "bad address") || !strings.Contains(table, `{"`) {
				t.Fatalf("dead-letters table:\n%s", table)
			}
		})
		t.Run("dead-letters pages with --limit and --after", func(t *testing.T) {
			second := b.cliDeadLetter(t, "orders", "")
			r := b.run(t, "dead-letters", "orders", "billing", "--limit", "1")
			first := cliJSON[[]rheo.DeadLetter](t, b.ok(t, "dead-letters", "orders", "billing", "--limit", "1", "--output", "json"))
			if r.code != 0 || !strings.Contains(r.stderr, "next page: rheo dead-letters orders billing --limit 1 --after "+first[0].Event.ID) {
				t.Fatalf("a full page does not say how to get the next: %s", r)
			}
			next := cliJSON[[]rheo.DeadLetter](t, b.ok(t, "dead-letters", "orders", "billing", "--after", first[0].Event.ID, "--output", "json"))
			ids := map[string]bool{first[0].Event.ID: true}
			for _, d := range next {
				ids[d.Event.ID] = true
			}
			if len(next) != 1 || !ids[dead.Event.ID] || !ids[second.Event.ID] {
				t.Fatalf("pages %v and %+v, want %s and %s", first[0].Event.ID, next, dead.Event.ID, second.Event.ID)
			}
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
		if err != nil || len(leases) != len(evs) {
			t.Fatalf("fetch: %v, %d leases", err, len(leases))
		}
		for _, l := range leases[:len(leases)-1] {
			if err := b.drv.Ack(ctx, l.LeaseID); err != nil {
				t.Fatal(err)
			}
		}
		dead := leases[len(leases)-1]
		if err := b.drv.Reject(ctx, dead.LeaseID, "poison"); err != nil {
			t.Fatal(err)
		}
		hwm := map[int]int64{}
		for _, ev := range evs {
			hwm[ev.Partition] = max(hwm[ev.Partition], ev.Sequence)
		}

		t.Run("replay --dry-run counts per partition and changes nothing", func(t *testing.T) {
			got := cliJSON[replayOut](t, b.ok(t, "replay", "orders", "billing", "--from-sequence", "1", "--dry-run", "--output", "json"))
			if !got.DryRun || len(got.Partitions) != 2 || got.Total != hwm[0]-1+hwm[1]-1 {
				t.Fatalf("dry run = %+v, want %d and %d", got, hwm[0]-1, hwm[1]-1)
			}
			for _, p := range got.Partitions {
				if p.Events != hwm[p.Partition]-1 {
					t.Fatalf("dry run of partition %d = %d, want %d", p.Partition, p.Events, hwm[p.Partition]-1)
				}
			}
			if lag := b.lag(t, "orders"); lag.Total != 0 {
				t.Fatalf("lag after a dry run = %d, want 0", lag.Total)
			}
			table := b.ok(t, "replay", "orders", "billing", "--from-sequence", "1", "--dry-run")
			if !strings.Contains(table, "WOULD_REPLAY") || !strings.Contains(table, "dry run: nothing was changed") {
				t.Fatalf("dry-run table:\n%s", table)
			}
		})
		t.Run("replay by event id reopens a dead letter", func(t *testing.T) {
			got := cliJSON[replayOut](t, b.ok(t, "replay", "orders", "billing", "--event-id", dead.Event.ID, "--output", "json"))
			if got.DryRun || got.Total != 1 {
				t.Fatalf("replay by id = %+v, want 1", got)
			}
			if dls, _ := b.drv.DeadLetters(ctx, "orders", "billing", nil); len(dls) != 0 {
				t.Fatalf("dead letters after the replay: %+v, want none", dls)
			}
			again, err := b.drv.Fetch(ctx, "orders", "billing", nil)
			if err != nil || len(again) != 1 || again[0].Event.ID != dead.Event.ID || again[0].Attempt != 1 {
				t.Fatalf("fetch after the replay = %+v, %v; want %s at attempt 1", again, err, dead.Event.ID)
			}
			if err := b.drv.Ack(ctx, again[0].LeaseID); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("replay from a sequence in one partition moves only its frontier back", func(t *testing.T) {
			table := b.ok(t, "replay", "orders", "billing", "--from-sequence", "0", "--partition", "1")
			if !strings.Contains(table, "REPLAYED") || !strings.Contains(table, fmt.Sprintf("total      %d", hwm[1])) {
				t.Fatalf("replay table:\n%s", table)
			}
			lag := b.lag(t, "orders")
			if lag.Partitions[0].Lag != 0 || lag.Partitions[1].Lag != hwm[1] {
				t.Fatalf("lag after the replay = %+v, want partition 1 rewound to 0", lag)
			}
		})
		t.Run("replay from a time uses RFC 3339", func(t *testing.T) {
			got := cliJSON[replayOut](t, b.ok(t, "replay", "orders", "billing", "--from-time",
				evs[0].TS.Add(-time.Hour).Format(time.RFC3339), "--dry-run", "--output", "json"))
			if got.Total != hwm[0] {
				t.Fatalf("replay from an hour before the first event would reopen %d, want partition 0's %d (partition 1 is pending already)", got.Total, hwm[0])
			}
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
			if after := b.lag(t, "orders"); after.Total != before.Total {
				t.Fatalf("lag went from %d to %d without --confirm", before.Total, after.Total)
			}
		})
		t.Run("reset --confirm places the cursors and prints the lag", func(t *testing.T) {
			got := cliJSON[struct {
				Lag rheo.Lag `json:"lag"`
			}](t, b.ok(t, "reset", "orders", "billing", "--confirm", "--start-after", "2", "--output", "json"))
			want := max(0, hwm[0]-2) + max(0, hwm[1]-2)
			if got.Lag.Total != want || got.Lag.Partitions[0].Frontier != 2 {
				t.Fatalf("lag after reset = %+v, want total %d from frontier 2", got.Lag, want)
			}
			table := b.ok(t, "reset", "orders", "billing", "--confirm")
			if !strings.Contains(table, `reset group "billing" on stream "orders"`) || !strings.Contains(table, fmt.Sprintf("%d", len(evs))) {
				t.Fatalf("reset table:\n%s", table)
			}
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
			if _, err := b.drv.Append(ctx, "orders", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
				&rheo.AppendOptions{Partition: &p, TS: &old}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			p := 0
			if _, err := b.drv.Append(ctx, "orders", json.RawMessage(fmt.Sprintf(`{"new":%d}`, i)), &rheo.AppendOptions{Partition: &p}); err != nil {
				t.Fatal(err)
			}
		}
		leases, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 100, Partitions: []int{0}})
		if err != nil || len(leases) != 5 {
			t.Fatalf("fetch partition 0: %v, %d leases", err, len(leases))
		}
		for _, l := range leases {
			if err := b.drv.Ack(ctx, l.LeaseID); err != nil {
				t.Fatal(err)
			}
		}
		lows := func() []int64 {
			info, err := b.drv.StreamInfo(ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			return []int64{info.Partitions[0].LowWatermark, info.Partitions[1].LowWatermark}
		}

		t.Run("retention without --max-age shows the watermarks of each partition", func(t *testing.T) {
			got := cliJSON[rangeOut](t, b.ok(t, "retention", "orders", "--output", "json"))
			if got.MaxAge != nil || len(got.Partitions) != 2 || got.Partitions[0].HighWatermark != 5 ||
				got.Partitions[0].LowWatermark != 1 || got.Partitions[0].Retained != 5 || got.Partitions[1].Retained != 3 {
				t.Fatalf("retention = %+v, want no max age and 5 and 3 events retained from 1", got)
			}
			table := b.ok(t, "retention", "orders")
			if !strings.Contains(table, `stream "orders" keeps its events forever`) ||
				!strings.Contains(table, "PARTITION  LOW_WATERMARK  HIGH_WATERMARK  RETAINED\n0          1              5               5") {
				t.Fatalf("retention table:\n%s", table)
			}
		})
		t.Run("prune of a stream without retention fails and says how to set one", func(t *testing.T) {
			b.fails(t, cli.ExitFailure, `stream "orders" has no retention, so nothing is pruned; set one with: rheo retention orders --max-age 30d`,
				"prune", "orders")
		})
		t.Run("retention --max-age takes Go durations, days and weeks", func(t *testing.T) {
			for _, c := range [][2]string{{"2w", "2w"}, {"14d", "2w"}, {"36h", "36h0m0s"}, {"1d12h", "36h0m0s"},
				{"90m", "1h30m0s"}, {"1.5d", "36h0m0s"}, {"1d", "1d"}} {
				got := cliJSON[rangeOut](t, b.ok(t, "retention", "orders", "--max-age", c[0], "--output", "json"))
				if got.MaxAge == nil || *got.MaxAge != c[1] {
					t.Fatalf("--max-age %s shows %v, want %s", c[0], got.MaxAge, c[1])
				}
			}
			if table := b.ok(t, "retention", "orders"); !strings.Contains(table, `stream "orders" keeps its events for 1d`) {
				t.Fatalf("retention table:\n%s", table)
			}
		})
		t.Run("retention rejects what is not a positive duration", func(t *testing.T) {
			for _, age := range []string{"0", "0s", "0d", "-1d", "3x", "1d-2h", "300000d", "", "never"} {
				b.fails(t, cli.ExitUsage, "invalid value", "retention", "orders", "--max-age", age)
			}
			if got := cliJSON[rangeOut](t, b.ok(t, "retention", "orders", "--output", "json")); got.MaxAge == nil || *got.MaxAge != "1d" {
				t.Fatalf("the retention changed to %v", got.MaxAge)
			}
		})
		t.Run("prune --dry-run counts per partition and changes nothing", func(t *testing.T) {
			got := cliJSON[pruneOut](t, b.ok(t, "prune", "orders", "--dry-run", "--output", "json"))
			if !got.DryRun || got.Total != 3 || len(got.Partitions) != 2 || got.Partitions[0].Events != 3 ||
				got.Partitions[0].LowWatermark != 4 || got.Partitions[1].Events != 0 {
				t.Fatalf("dry run = %+v, want 3 events of partition 0 (billing has not passed partition 1)", got)
			}
			if l := lows(); !slices.Equal(l, []int64{1, 1}) {
				t.Fatalf("low watermarks after a dry run = %v, want [1 1]", l)
			}
			table := b.ok(t, "prune", "orders", "--dry-run", "--force")
			if !strings.Contains(table, "WOULD_PRUNE") || !strings.Contains(table, "total      6") ||
				!strings.Contains(table, "dry run: nothing was changed") {
				t.Fatalf("dry-run table:\n%s", table)
			}
		})
		t.Run("prune deletes the aged events every group has passed and prints the watermarks", func(t *testing.T) {
			table := b.ok(t, "prune", "orders")
			if !strings.Contains(table, "PARTITION  PRUNED  LOW_WATERMARK  HIGH_WATERMARK\n0          3       4              5") ||
				!strings.Contains(table, `pruned 3 event(s) of stream "orders" in 2 transaction(s)`) {
				t.Fatalf("prune table:\n%s", table)
			}
			if l := lows(); !slices.Equal(l, []int64{4, 1}) {
				t.Fatalf("low watermarks = %v, want [4 1]", l)
			}
			if got := cliJSON[pruneOut](t, b.ok(t, "prune", "orders", "--output", "json")); got.Total != 0 || got.Batches != 1 {
				t.Fatalf("a second prune = %+v, want nothing in one call", got)
			}
		})
		t.Run("prune --force deletes what groups have not settled, in batches of --max-count", func(t *testing.T) {
			got := cliJSON[pruneOut](t, b.ok(t, "prune", "orders", "--force", "--max-count", "1", "--output", "json"))
			if !got.Force || got.Total != 3 || got.Batches != 4 || got.Partitions[1].Events != 3 || got.Partitions[1].LowWatermark != 4 {
				t.Fatalf("prune --force = %+v, want partition 1's 3 events in 3 batches and an empty one", got)
			}
			if lag := b.lag(t, "orders"); lag.Partitions[1].Frontier != 3 || lag.Partitions[1].Lag != 0 {
				t.Fatalf("billing's lag after --force = %+v, want partition 1 past the pruned events", lag)
			}
		})
		t.Run("retention --max-age forever removes the retention", func(t *testing.T) {
			got := cliJSON[rangeOut](t, b.ok(t, "retention", "orders", "--max-age", "forever", "--output", "json"))
			if got.MaxAge != nil || got.Partitions[0].LowWatermark != 4 || got.Partitions[0].Retained != 2 {
				t.Fatalf("retention forever = %+v, want no max age and the watermarks kept", got)
			}
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
		if err := b.drv.CreateGroup(ctx, "orders", "audit", nil); err != nil {
			t.Fatal(err)
		}
		held := b.cliDeadLetter(t, "orders", "poison")
		groups := func() []string {
			gs, err := b.drv.ListGroups(ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
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
			if g := groups(); !slices.Equal(g, []string{"audit", "billing"}) {
				t.Fatalf("groups = %v, want both", g)
			}
		})
		t.Run("drop-group removes the group and its dead letters", func(t *testing.T) {
			got := cliJSON[map[string]any](t, b.ok(t, "drop-group", "orders", "billing", "--confirm", "--output", "json"))
			if got["dropped"] != true || got["group"] != "billing" {
				t.Fatalf("drop-group printed %v", got)
			}
			if g := groups(); !slices.Equal(g, []string{"audit"}) {
				t.Fatalf("groups = %v, want audit only", g)
			}
			if err := b.drv.CreateGroup(ctx, "orders", "billing", nil); err != nil {
				t.Fatal(err)
			}
			if dls, err := b.drv.DeadLetters(ctx, "orders", "billing", nil); err != nil || len(dls) != 0 {
				t.Fatalf("dead letters of billing created anew: %v, %v; want none (%s was dead)", dls, err, held.Event.ID)
			}
			if out := b.ok(t, "drop-group", "orders", "billing", "--confirm"); out != "dropped group \"billing\" of stream \"orders\"\n" {
				t.Fatalf("drop-group printed %q", out)
			}
			b.fails(t, cli.ExitFailure, `group "billing" not found on stream "orders"`, "drop-group", "orders", "billing", "--confirm")
			b.fails(t, cli.ExitFailure, `stream "nope" not found`, "drop-group", "nope", "billing", "--confirm")
		})
		t.Run("drop-stream prints the events deleted", func(t *testing.T) {
			got := cliJSON[map[string]any](t, b.ok(t, "drop-stream", "orders", "--confirm", "--output", "json"))
			if got["stream"] != "orders" || got["events_deleted"] != float64(4) {
				t.Fatalf("drop-stream printed %v", got)
			}
			b.cliStream(t, "short", 1, 1)
			b.cliAppend(t, "short", 2)
			if out := b.ok(t, "drop-stream", "short", "--confirm"); out != "dropped stream \"short\": 2 event(s) deleted\n" {
				t.Fatalf("drop-stream printed %q", out)
			}
			if streams := cliJSON[[]rheo.StreamSummary](t, b.ok(t, "streams", "--output", "json")); len(streams) != 0 {
				t.Fatalf("streams after the drops = %+v, want none", streams)
			}
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
			t.Fatalf("waited 20 s for %q, with nothing new written; got:\n%s", want, b.String())
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
			if len(lines) != 3 {
				t.Fatalf("tail -n 3 printed %d lines", len(lines))
			}
			for i, line := range lines {
				if ev := cliJSON[rheo.Event](t, line); ev.ID != evs[len(evs)-3+i].ID {
					t.Fatalf("line %d is %s, want %s", i, ev.ID, evs[len(evs)-3+i].ID)
				}
			}
			all := b.ok(t, "tail", "orders", "-n", "100")
			if strings.Count(all, "\n") != len(evs) || !strings.Contains(all, evs[0].ID) {
				t.Fatalf("tail -n 100 printed:\n%s", all)
			}
			p1 := b.ok(t, "tail", "orders", "--partition", "1", "--output", "json")
			for line := range strings.Lines(p1) {
				if ev := cliJSON[rheo.Event](t, line); ev.Partition != 1 {
					t.Fatalf("tail --partition 1 printed %+v", ev)
				}
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
			if err != nil {
				t.Fatal(err)
			}
			out.waitFor(t, live.ID)
			cancel()
			if code := <-done; code != cli.ExitOK {
				t.Fatalf("tail --follow ended with %d: %s", code, errOut.String())
			}
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
			if strings.Contains(r.stderr, "secret") {
				t.Fatalf("stderr repeats the password: %s", r.stderr)
			}
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
		if r.code != cli.ExitOK || !strings.Contains(r.stdout, "from-env") {
			t.Fatalf("streams with DATABASE_URL: %s", r)
		}
	})
}

func TestCLIUsage(t *testing.T) {
	t.Setenv(cli.EnvDatabaseURL, "")
	t.Run("help lists every command", func(t *testing.T) {
		r := cliRun(t, "", "help")
		if r.code != cli.ExitOK {
			t.Fatalf("help: %s", r)
		}
		for _, cmd := range []string{"demo", "streams", "groups", "lag", "info", "dead-letters", "replay", "reset",
			"retention", "prune", "append", "query", "tail", "create-stream", "create-group", "drop-group", "drop-stream"} {
			if !strings.Contains(r.stdout, "\n  "+cmd+" ") {
				t.Errorf("help does not list %s:\n%s", cmd, r.stdout)
			}
		}
	})
	t.Run("no arguments print the usage and fail", func(t *testing.T) {
		if r := cliRun(t, ""); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "Usage: rheo COMMAND") {
			t.Fatalf("rheo: %s", r)
		}
	})
	t.Run("a command's -h and help COMMAND print its flags", func(t *testing.T) {
		for _, args := range [][]string{{"replay", "-h"}, {"help", "replay"}, {"replay", "--help"}} {
			r := cliRun(t, "", args...)
			if r.code != cli.ExitOK || !strings.Contains(r.stdout, "Usage: rheo replay STREAM GROUP") ||
				!strings.Contains(r.stdout, "-dry-run") || !strings.Contains(r.stdout, "-database-url") {
				t.Fatalf("rheo %v: %s", args, r)
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
		if r.code != cli.ExitOK || cliJSON[map[string]any](t, r.stdout)["partition_count"] != float64(2) {
			t.Fatalf("flags after the argument: %s", r)
		}
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
			if err != nil {
				t.Fatal(err)
			}
			meta, err := rheo.CausedBy(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			q, err := b.drv.Append(ctx, "orders", json.RawMessage(`{"type":"paid"}`),
				&rheo.AppendOptions{Key: customer, ID: order + ".paid", Metadata: meta})
			if err != nil {
				t.Fatal(err)
			}
			placed, paid = append(placed, p), append(paid, q)
		}

		t.Run("query by correlation id finds an order and its payment", func(t *testing.T) {
			got := cliJSON[page](t, b.ok(t, "query", "orders", "--correlation-id", "o-4", "--output", "json"))
			if want := []string{"o-4.placed", "o-4.paid"}; !slices.Equal(ids(got.Events), want) {
				t.Fatalf("query --correlation-id o-4 = %v, want %v", ids(got.Events), want)
			}
			table := b.ok(t, "query", "orders", "--correlation-id", "o-4")
			if !strings.HasPrefix(table, "TS ") || !strings.Contains(table, "CORRELATION_ID") || strings.Count(table, "o-4.") != 2 {
				t.Fatalf("query table:\n%s", table)
			}
		})
		t.Run("query by type and payload", func(t *testing.T) {
			got := cliJSON[page](t, b.ok(t, "query", "orders", "--type", "placed", "--payload", `{"customer":"c-1"}`, "--output", "json"))
			if want := []string{"o-1.placed", "o-4.placed", "o-7.placed"}; !slices.Equal(ids(got.Events), want) {
				t.Fatalf("query = %v, want %v", ids(got.Events), want)
			}
			byKey := cliJSON[page](t, b.ok(t, "query", "orders", "--key", "c-2", "--type", "paid", "--output", "json"))
			if want := []string{"o-2.paid", "o-5.paid", "o-8.paid"}; !slices.Equal(ids(byKey.Events), want) {
				t.Fatalf("query --key c-2 --type paid = %v, want %v", ids(byKey.Events), want)
			}
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
					if !slices.Equal(ids(all), ids(want)) {
						t.Fatalf("pages of --order %s (desc %v) = %v, want %v", order.name, desc, ids(all), ids(want))
					}
				}
			}
			r := b.run(t, "query", "orders", "--limit", "2")
			if r.code != cli.ExitOK || !strings.Contains(r.stderr, "next page: the same command with --after time:asc:") {
				t.Fatalf("a full page does not say how to get the next: %s", r)
			}
		})
		t.Run("query by partition, sequence and time", func(t *testing.T) {
			p := paid[0].Partition
			got := cliJSON[page](t, b.ok(t, "query", "orders", "--partition", fmt.Sprint(p), "--after-sequence", "1",
				"--until-sequence", "2", "--output", "json"))
			if len(got.Events) != 1 || got.Events[0].ID != paid[0].ID {
				t.Fatalf("query of partition %d sequence 2 = %v, want %s", p, ids(got.Events), paid[0].ID)
			}
			future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			if got := cliJSON[page](t, b.ok(t, "query", "orders", "--from", future, "--output", "json")); len(got.Events) != 0 {
				t.Fatalf("query from an hour ahead = %v, want nothing", ids(got.Events))
			}
			if got := cliJSON[page](t, b.ok(t, "query", "orders", "--to", future, "--limit", "100", "--output", "json")); len(got.Events) != 18 {
				t.Fatalf("query up to an hour ahead returned %d events, want all 18", len(got.Events))
			}
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
			if _, err := b.drv.Append(ctx, "orders", json.RawMessage(`{"k": 1}`), &rheo.AppendOptions{Partition: new(int)}); err != nil {
				t.Fatal(err)
			}
		}

		runCtx, cancel := context.WithCancel(ctx)
		stdout := &cliSyncBuffer{}
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
				t.Fatalf("rheo serve did not say where it listens: %q, stderr %q", stdout.String(), stderr.String())
			}
		}

		get := func(path string) (int, string) {
			t.Helper()
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, string(body)
		}
		code, body := get("/healthz")
		if code != http.StatusOK || body != "ok\n" {
			t.Errorf("/healthz: %d %q, want 200 ok", code, body)
		}
		code, body = get("/metrics")
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
			if code != http.StatusOK || !strings.Contains(body, want) {
				t.Errorf("/metrics (%d) lacks %q:\n%s", code, want, body)
			}
		}

		if strings.HasPrefix(b.url, "postgres") {
			// The database goes away: its connections are cut.
			admin := cliConnect(t, testdb.ServerURL(t))
			cfg, err := pgx.ParseConfig(b.url)
			if err != nil {
				t.Fatal(err)
			}
			name := cfg.Database
			if _, err := admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
				t.Fatal(err)
			}
			if code, body := get("/healthz"); code != http.StatusServiceUnavailable {
				t.Errorf("/healthz without a database: %d %q, want 503", code, body)
			}
		}

		cancel()
		select {
		case code := <-done:
			if code != cli.ExitOK {
				t.Errorf("rheo serve exited %d after the interrupt, want 0; stderr %q", code, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("rheo serve did not stop after the interrupt")
		}
	})
}

// cliSyncBuffer is a bytes.Buffer safe for one writer and one reader.
type cliSyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *cliSyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *cliSyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
