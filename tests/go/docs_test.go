package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testskip"
)

// readRepo reads a file of the repository by its path from the root.
func readRepo(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	require.NoError(t, err)
	return string(b)
}

// sqlBlocks returns the ```sql blocks of a Markdown text.
func sqlBlocks(doc string) []string {
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestOpsGuide runs every SQL block of docs/ops.md, in order, against a
// migrated database holding a group with leases in flight, a pending
// retry, acked events and a dead letter.
func TestOpsGuide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testbackend.Postgres(t)
	drv := b.Open(t, nil)
	require.NoError(t, drv.CreateStream(ctx, "orders", 4))
	require.NoError(t, drv.CreateGroup(ctx, "orders", "billing", &rheo.CreateGroupOptions{MaxAttempts: 3}))
	for i := range 40 {
		_, err := drv.Append(ctx, "orders", json.RawMessage(fmt.Sprintf(`{"type":"order.placed","total":%d}`, i)), &rheo.AppendOptions{
			Key:      fmt.Sprintf("customer-%d", i%7),
			Metadata: json.RawMessage(fmt.Sprintf(`{"correlation_id":"order-%d"}`, 40+i%5)),
		})
		require.NoError(t, err)
	}
	_, err := drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 6, ConsumerID: "worker-a", LeaseDuration: 5 * time.Second})
	require.NoError(t, err)
	acked, err := drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 10, ConsumerID: "worker-b"})
	require.NoError(t, err)
	for _, l := range acked {
		require.NoError(t, drv.Ack(ctx, l.LeaseID))
	}
	rejected, err := drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 1})
	require.NoError(t, err)
	require.Len(t, rejected, 1)
	require.NoError(t, drv.Reject(ctx, rejected[0].LeaseID, "bad address"))
	retried, err := drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 1})
	require.NoError(t, err)
	require.Len(t, retried, 1)
	_, err = drv.Retry(ctx, retried[0].LeaseID, &rheo.RetryOptions{Reason: "timeout", Delay: time.Minute})
	require.NoError(t, err)

	blocks := sqlBlocks(readRepo(t, "docs/ops.md"))
	require.GreaterOrEqual(t, len(blocks), 20, "the guide's SQL blocks in docs/ops.md")
	conn, err := pgx.Connect(ctx, b.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	for i, block := range blocks {
		_, err := conn.PgConn().Exec(ctx, block).ReadAll()
		require.NoError(t, err, "docs/ops.md SQL block %d:\n%s", i+1, block)
	}
	// The guide ends by resetting the group to the beginning.
	lag, err := drv.Lag(ctx, "orders", "billing", nil)
	require.NoError(t, err)
	assert.Equal(t, int64(40), lag.Total, "lag after the guide's last reset: all 40 events")
	dls, err := drv.DeadLetters(ctx, "orders", "billing", nil)
	require.NoError(t, err)
	assert.Empty(t, dls, "dead letters after the reset")
}

// TestReadme checks that the README's code is what runs: its Go
// quickstart is the body of Example in example_test.go, and its psql
// session (its ```sql blocks; other SQL, such as the grants of its
// Roles section, is fenced as ```postgresql) runs in psql against a
// migrated database.
func TestReadme(t *testing.T) {
	t.Parallel()
	readme := readRepo(t, "README.md")
	t.Run("the Go quickstart is example_test.go", func(t *testing.T) {
		blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(readme, -1)
		require.Len(t, blocks, 1, "the README's Go blocks")
		body := regexp.MustCompile(`(?s)\nfunc Example\(\) \{\n(.*)\n\}\n`).FindStringSubmatch(readRepo(t, "example_test.go"))
		require.NotNil(t, body, "example_test.go has a func Example")
		var want strings.Builder
		for line := range strings.Lines(body[1] + "\n") {
			want.WriteString(strings.TrimPrefix(line, "\t"))
		}
		require.Equal(t, want.String(), blocks[0][1], "the README's Go block is the body of Example in example_test.go")
	})
	t.Run("the psql session runs", func(t *testing.T) {
		psql, err := exec.LookPath("psql")
		if err != nil {
			testskip.Missing(t, "psql", "psql is not installed; apt-get install postgresql-client")
		}
		b := testbackend.Postgres(t)
		cmd := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", b.DSN, "-f", "-")
		cmd.Stdin = strings.NewReader(strings.Join(sqlBlocks(readme), ""))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "psql:\n%s", out)
		ctx := context.Background()
		info, err := b.Open(t, nil).GroupInfo(ctx, "orders", "billing")
		require.NoError(t, err)
		// Three events: the first fetched (a first sequence) acked, the
		// second retrying.
		assert.Equal(t, int64(2), info.Lag, "lag after the README's session")
		assert.Equal(t, int64(1), info.PendingRetry, "pending retries after the README's session")
		conn, err := pgx.Connect(ctx, b.DSN)
		require.NoError(t, err)
		defer conn.Close(ctx)
		var invoices int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM invoices").Scan(&invoices))
		assert.Equal(t, 1, invoices, "the invoice committed with the ack")
	})
}

// rate renders an events/s figure the way the README quotes it: in
// thousands, with one decimal below 10k.
func rate(v float64) string {
	if v < 10000 {
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(v/1000, 'f', 0, 64) + "k"
}

// TestReadmeFacts checks what the README says about building and the
// throughput, and what docs/deploy.md says about the background vacuum,
// against where the facts live: BENCHMARKS.md's current results,
// docs/worker.md's defaults and docs/security.md.
func TestReadmeFacts(t *testing.T) {
	t.Parallel()
	read := func(path string) string { return strings.Join(strings.Fields(readRepo(t, path)), " ") }
	readme, bench, worker, security := read("README.md"), read("BENCHMARKS.md"), read("docs/worker.md"), read("docs/security.md")
	deploy := read("docs/deploy.md")
	median := func(row string) float64 {
		t.Helper()
		m := regexp.MustCompile(`\| ` + regexp.QuoteMeta(row) + ` \| ([0-9.]+) \[`).FindStringSubmatch(bench)
		require.NotNil(t, m, "BENCHMARKS.md has a result row %q", row)
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		return v
	}
	concurrency := regexp.MustCompile("\\| `Concurrency` \\| ([0-9]+) \\|").FindStringSubmatch(worker)
	require.NotNil(t, concurrency, "docs/worker.md gives the default Concurrency")
	for _, want := range []string{
		"appends about " + rate(median("append b=1000 vs InsertMany (events/s)")) + " events/s from two producers in batches of 1000",
		"drains about " + rate(median("drain c=64 (events/s)")) + " events/s at a `Concurrency` of 64, or " +
			rate(median("drain c=8 (events/s)")) + "/s at 8",
		"the worker's default `Concurrency` is " + concurrency[1],
		// The set-up commands' first run, and builds without cgo.
		"The first run of either compiles SQLite's C code, which takes a minute or more and needs a C compiler such as gcc",
		"A PostgreSQL-only build (`CGO_ENABLED=0`) needs no C compiler",
	} {
		assert.Contains(t, readme, want, "README.md")
	}
	// The background vacuum and who may run it.
	for _, want := range []string{
		"runs `VACUUM` on `rheo.deliveries` in the background, every 20,000 settles",
		"Before PostgreSQL 17 only the table's owner, the database's owner or a superuser may vacuum it",
	} {
		assert.Contains(t, deploy, want, "docs/deploy.md")
	}
	for _, want := range []string{
		"Before PostgreSQL 17 only the table's owner, the database's owner or a superuser may",
		"after every 20,000 settles",
	} {
		assert.Contains(t, security, want, "docs/security.md still says what docs/deploy.md quotes of it about the vacuum")
	}
}
