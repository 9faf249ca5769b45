package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver/redis/redistest"
	"github.com/rheo-go/rheo/internal/testlog"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// result is what one run of the command printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs one command line of this build of rheo against url.
func run(t *testing.T, url, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), append(args, "--database-url", url), strings.NewReader(stdin), &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// ok runs a command that must succeed and returns its stdout.
func ok(t *testing.T, url string, args ...string) string {
	t.Helper()
	r := run(t, url, "", args...)
	require.Equal(t, cli.ExitOK, r.code, "rheo %s: %s", strings.Join(args, " "), r)
	return r.stdout
}

// streamName is a stream of the test's own on a shared server.
func streamName(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

// TestCommandsOnRedis runs the operator's commands of this build of rheo
// against Redis, one server and a cluster: what rheo does on PostgreSQL
// and SQLite, and, where Redis has no transactions, what it says
// instead.
func TestCommandsOnRedis(t *testing.T) {
	for _, dep := range []struct {
		name string
		url  func(tb testing.TB) string
	}{
		{"standalone", redistest.StandaloneURL},
		{"cluster", redistest.ClusterURL},
	} {
		t.Run(dep.name, func(t *testing.T) {
			url := dep.url(t)
			ctx := context.Background()
			stream := streamName(t)
			ok(t, url, "create-stream", stream, "--partitions", "2")
			ok(t, url, "create-group", stream, "billing", "--max-attempts", "3")
			r := run(t, url, "{\"type\":\"placed\",\"n\":1}\n{\"type\":\"placed\",\"n\":2}\n{\"type\":\"paid\",\"n\":3}\n", "append", stream)
			require.Equal(t, cli.ExitOK, r.code, "append: %s", r)

			// A dead letter and an ack, through a driver of the test's.
			drv, err := connect.Open(ctx, url, nil)
			require.NoError(t, err)
			defer drv.Close()
			leases, err := drv.Fetch(ctx, stream, "billing", &rheo.FetchOptions{MaxCount: 2})
			require.NoError(t, err)
			require.Len(t, leases, 2)
			require.NoError(t, drv.Reject(ctx, leases[0].LeaseID, "poison"))
			require.NoError(t, drv.Ack(ctx, leases[1].LeaseID))

			require.Contains(t, ok(t, url, "streams"), stream)
			require.Contains(t, ok(t, url, "groups", stream), "billing")
			var lag rheo.Lag
			require.NoError(t, json.Unmarshal([]byte(ok(t, url, "lag", stream, "billing", "--output", "json")), &lag))
			assert.Equal(t, int64(1), lag.Total, "lag after one reject and one ack of three")
			assert.Contains(t, ok(t, url, "info", stream, "billing"), "DEAD_LETTERS")
			assert.Contains(t, ok(t, url, "dead-letters", stream, "billing"), "poison")
			assert.Contains(t, ok(t, url, "tail", stream, "-n", "3"), `"type":"paid"`)
			assert.Contains(t, ok(t, url, "query", stream, "--type", "paid"), `"n":3`)

			r = run(t, url, "", "replay", stream, "billing", "--from-sequence", "0", "--dry-run")
			assert.Equal(t, cli.ExitFailure, r.code, "replay --dry-run: %s", r)
			assert.Contains(t, r.stderr, "the redis", "replay --dry-run names the driver: %s", r)
			assert.Contains(t, r.stderr, "cannot run a replay in a transaction (it is no driver.Transactor)", "%s", r)
			assert.Contains(t, r.stderr, "nothing was changed", "%s", r)
			require.NoError(t, json.Unmarshal([]byte(ok(t, url, "lag", stream, "billing", "--output", "json")), &lag))
			assert.Equal(t, int64(1), lag.Total, "lag after the refused dry run")

			out := ok(t, url, "replay", stream, "billing", "--from-sequence", "0", "--output", "json")
			var replayed struct{ Total int64 }
			require.NoError(t, json.Unmarshal([]byte(out), &replayed), "%s", out)
			assert.Equal(t, int64(2), replayed.Total, "events replayed: the acked one and the dead letter")
			require.NoError(t, json.Unmarshal([]byte(ok(t, url, "lag", stream, "billing", "--output", "json")), &lag))
			assert.Equal(t, int64(3), lag.Total, "lag after the replay of everything")

			r = run(t, url, "", "prune", stream, "--dry-run")
			assert.Equal(t, cli.ExitFailure, r.code, "prune --dry-run: %s", r)

			ok(t, url, "drop-stream", stream, "--confirm")
		})
	}
}

// TestUnreachableRedis checks what rheo says of a Redis it cannot
// reach: one line, naming the URL without its password.
func TestUnreachableRedis(t *testing.T) {
	goredis.SetLogger(quiet{}) // as main does
	r := run(t, "redis://:secret@127.0.0.1:1/0", "", "lag", "orders", "billing")
	assert.Equal(t, cli.ExitFailure, r.code, "%s", r)
	assert.Equal(t, "rheo: cannot reach the database redis://:xxxxx@127.0.0.1:1/0: connection refused; "+
		"check --database-url, and that the database is up\n", r.stderr, "%s", r)
	assert.Empty(t, r.stdout)
}

// TestServeOnRedis runs rheo serve against Redis: the health check, the
// metrics of a stream and the dashboard's page of a group.
func TestServeOnRedis(t *testing.T) {
	url := redistest.StandaloneURL(t)
	stream := streamName(t)
	ok(t, url, "create-stream", stream)
	ok(t, url, "create-group", stream, "billing")
	r := run(t, url, "{\"type\":\"placed\"}\n", "append", stream)
	require.Equal(t, cli.ExitOK, r.code, "append: %s", r)
	t.Cleanup(func() { run(t, url, "", "drop-stream", stream, "--confirm") })

	ctx, cancel := context.WithCancel(context.Background())
	stdout := &testlog.Buffer{}
	var stderr testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--database-url", url}, nil, stdout, &stderr)
	}()
	defer func() {
		cancel()
		assert.Equal(t, cli.ExitOK, <-done, "rheo serve's exit, stderr %q", stderr.String())
	}()
	var base string
	deadline := time.Now().Add(30 * time.Second)
	for base == "" {
		if m := regexp.MustCompile(`listening on (http://\S+) `).FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
		} else {
			require.False(t, time.Now().After(deadline), "rheo serve did not say where it listens: %q, stderr %q", stdout.String(), stderr.String())
			time.Sleep(10 * time.Millisecond)
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
	assert.Equal(t, http.StatusOK, code, "/healthz: %q", body)
	code, body = get("/metrics")
	assert.Equal(t, http.StatusOK, code, "/metrics")
	assert.Contains(t, body, stream, "/metrics names the stream")
	code, body = get("/streams/" + stream + "/groups/billing")
	assert.Equal(t, http.StatusOK, code, "the group's page: %q", body)
	assert.Contains(t, body, "billing", "the group's page")
}
