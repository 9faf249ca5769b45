package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain runs one consumer process instead of the tests when the
// processes workload starts this test binary as one: it re-executes its
// own executable, which under go test is this binary.
func TestMain(m *testing.M) {
	if isConsumerProcess() {
		os.Exit(consumerMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// testServerURL returns the PostgreSQL server to run against: the one
// RHEO_TEST_DATABASE_URL names, else the local default. Without a
// reachable server the test is skipped, except under CI=true.
func testServerURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("RHEO_TEST_DATABASE_URL")
	if u == "" {
		u = defaultServerURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		msg := "no PostgreSQL server for the benchmark harness: " + err.Error()
		if os.Getenv("CI") == "true" {
			require.FailNow(t, msg)
		}
		t.Skip(msg)
	}
	_ = conn.Close(ctx)
	return u
}

// TestQuickRun runs the whole harness in quick mode and checks that every
// workload reported its figures for every system (Rheo on Redis
// included, on a private redis-server, where redis-server is installed)
// and that every database it created is gone. It asserts nothing about
// the timings.
func TestQuickRun(t *testing.T) {
	serverURL := testServerURL(t)
	args := []string{"--quick", "--database-url", serverURL}
	withRedis := hasRedisServer(t)
	if !withRedis {
		args = append(args, "--redis=false")
	}
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	require.NoError(t, c.execute(t.Context(), &stdout, &stderr), "quick run failed\n%s", stderr.String())
	out := stdout.String()
	wants := []string{
		"postgresql: ", "shared_buffers=", "synchronous_commit=", "fsync=", "wal_level=", "max_connections=",
		"ratio rheo/river append b=1: ",
		"ratio rheo/river append b=1000 vs InsertManyFast: ",
		"ratio rheo/river drain c=1: ",
		"ratio rheo/river drain c=8: ",
		"ratio rheo/river slow 5ms c=64: ",
		"ratio rheo/river slow 5ms c=64 slots in handlers: ",
		"ratio rheo/river competing 4x16 total: ",
		"ratio rheo/river competing 4x16 smallest share: ",
		"rheo competing 4x16 fetch calls per event: ",
		"rheo competing single c=64 total: ",
		"rheo competing 16 processes x8 total: ",
		"rheo competing 16 processes x8 smallest share: ",
		"rheo competing 16 processes x8 largest share: ",
		"rheo competing 16 processes x8 fetch calls per event: ",
		"rheo competing single c=128 fetch calls per event: ",
		"rheo append b=1000 raw insert: ",
		"ratio rheo/river slow 5ms c=64 ideal from handler time: ",
		"ratio rheo/river slow 5ms c=64 of ideal from handler time: ",
		// The lines of issue 24 but the horizon's (opt-in; TestQuickThroughput).
		"\nratio rheo competing 4x16 / single c=64: ",
		"\nratio rheo competing 16 processes x8 / single c=128: ",
		"\nrheo WAL per consumed event: ",
		"\nratio rheo append b=1000 / raw insert: ",
		"\nratio rheo slow 5ms c=64 / ideal from handler time: ",
		"ratio rheo/river latency 200/s p99: ",
		"ratio rheo/river fanout groups=4: ",
		"ratio rheo/river fanout extra group WAL: ",
		"ratio rheo/river cost WAL consume: ",
		"rheo cost deliveries+indexes after drain: ",
		"rheo fetch per lease 5k/1k: ",
		"rheo ops group_info 500 behind, 5k events, 1 partition: ",
		"rheo ops replay from_ts, last 500, 5k events, 4 partitions: ",
		"rheo ops create_group start_at, last 500, 5k events, 1 partition: ",
		"rheo ops fetch(1), 0 in flight, 5k events, 4 partitions: ",
		"rheo ops fetch(1), 1k in flight, 5k events, 1 partition: ",
		"rheo ops on 5k events, 4 partitions (River has no equivalent)",
		"seq_tup_read",            // the ops counters are listed
		"deliveries_lease_id_key", // the size of every Rheo index is listed
		"river_job_pkey",
	}
	redisWants := []string{
		"redis: 7", "aof_enabled=1 appendfsync=everysec",
		"rheo on redis median",
		"rheo on redis append b=1000 vs InsertManyFast: ",
		"ratio rheo redis/postgres append b=1000 vs InsertManyFast: ",
		"ratio rheo redis/postgres drain c=1: ",
		"ratio rheo redis/postgres drain c=8: ",
		"ratio rheo redis/postgres latency 200/s p50: ",
		"ratio rheo redis/postgres latency 200/s p99: ",
		"rheo on redis memory per retained event: ",
		"rheo on redis memory per retained event, one group drained: ",
	}
	if withRedis {
		wants = append(wants, redisWants...)
	} else {
		assert.NotContains(t, out, "rheo on redis", "--redis=false measured Rheo on Redis")
	}
	for _, want := range wants {
		assert.Contains(t, out, want, "output lacks %q:\n%s", want, out)
	}
	// The closing lines are the summary, one per figure.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	assert.True(t, strings.HasPrefix(last, "rheo ") || strings.HasPrefix(last, "ratio "), "the last line is not a figure: %q", last)

	conn, err := pgx.Connect(t.Context(), serverURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	require.NotEmpty(t, c.srv.created, "the run created no databases")
	var left []string
	rows, err := conn.Query(t.Context(), `SELECT datname FROM pg_database WHERE datname = ANY ($1)`, c.srv.created)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Empty(t, left, "databases left behind: %v", left)
}

// TestQuickThroughput runs --workloads throughput in quick mode: Rheo
// only, and the six lines of issue 24 at the end, in their order.
func TestQuickThroughput(t *testing.T) {
	serverURL := testServerURL(t)
	c, err := parseFlags([]string{"--quick", "--workloads", "throughput", "--database-url", serverURL}, io.Discard)
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	require.NoError(t, c.execute(t.Context(), &stdout, &stderr), "quick run failed\n%s", stderr.String())
	out := stdout.String()
	assert.NotContains(t, out, "ratio rheo/river", "River ran")
	assert.NotRegexp(t, `(?m)^river `, out, "River ran")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 6)
	number := `[0-9.e+-]+`
	wants := []string{
		`^ratio rheo competing 4x16 / single c=64: ` + number + `$`,
		`^ratio rheo competing 16 processes x8 / single c=128: ` + number + `$`,
		`^rheo WAL per consumed event: ` + number + ` bytes$`,
		`^rheo fetch p50 under a held snapshot after 1s: ` + number + ` ms$`,
		`^ratio rheo append b=1000 / raw insert: ` + number + `$`,
		`^ratio rheo slow 5ms c=64 / ideal from handler time: ` + number + `$`,
	}
	for i, want := range wants {
		assert.Regexp(t, want, lines[len(lines)-6+i], "line %d of the six", i+1)
	}
}

// TestInterruptedRunDropsDatabases cancels a run while it works and
// checks that it still drops what it created.
func TestInterruptedRunDropsDatabases(t *testing.T) {
	serverURL := testServerURL(t)
	c, err := parseFlags([]string{"--quick", "--workloads", "drain", "--n", "1000000", "--database-url", serverURL}, io.Discard)
	require.NoError(t, err)
	c.srv, err = newServer(t.Context(), serverURL)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		// Cancel once the drain's database (after the template) exists
		// and events are going in.
		for ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			if c.srv.createdCount() >= 2 {
				time.Sleep(500 * time.Millisecond)
				cancel()
				return
			}
		}
	}()
	err = c.execute(ctx, io.Discard, io.Discard)
	cancel()
	require.Error(t, err, "the interrupted run reported success")
	conn, err := pgx.Connect(t.Context(), serverURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var left int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_database WHERE datname = ANY ($1)`,
		c.srv.created).Scan(&left))
	assert.Zero(t, left, "%d of %d databases left behind after the interrupt", left, len(c.srv.created))
}

func TestParseFlags(t *testing.T) {
	t.Run("quick mode shrinks the sizes not given", func(t *testing.T) {
		c, err := parseFlags([]string{"--quick", "--n", "500"}, io.Discard)
		require.NoError(t, err)
		assert.True(t, c.n == 500 && c.rounds == 1 && c.costN == 2000 && c.latencyDuration == time.Second, "n=%d rounds=%d cost-n=%d latency-duration=%s", c.n, c.rounds, c.costN, c.latencyDuration)
	})
	t.Run("--redis=false leaves Rheo on Redis out", func(t *testing.T) {
		c, err := parseFlags([]string{"--redis=false"}, io.Discard)
		require.NoError(t, err)
		assert.True(t, c.redisSizes.off && c.redisSizes.memoryN == 100_000, "off=%v memory-n=%d", c.redisSizes.off, c.redisSizes.memoryN)
	})
	t.Run("the full mode keeps the defaults", func(t *testing.T) {
		c, err := parseFlags(nil, io.Discard)
		require.NoError(t, err)
		assert.True(t, c.n == 100_000 && c.rounds == 3 && c.serverURL == defaultServerURL && len(c.workloads) == len(workloadNames), "n=%d rounds=%d url=%s workloads=%v", c.n, c.rounds, c.serverURL, c.workloads)
	})
	t.Run("one workload runs alone", func(t *testing.T) {
		c, err := parseFlags([]string{"--workloads", "ops"}, io.Discard)
		require.NoError(t, err)
		assert.True(t, len(c.workloads) == 1 && c.runs("ops") && c.opsEvents == 2_000_000 && len(c.opsPartitions) == 2, "workloads=%v ops-events=%d ops-partitions=%v", c.workloads, c.opsEvents, c.opsPartitions)
	})
	t.Run("throughput names its workloads, Rheo only and batches of 1000", func(t *testing.T) {
		c, err := parseFlags([]string{"--workloads", "drain,throughput,cost"}, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, []string{"drain", "append", "slow", "competing", "processes", "cost", "horizon"}, c.workloads)
		assert.True(t, !c.riverOn && c.redisSizes.off && slices.Equal(c.batches, []int{1000}), "river=%v redis off=%v batches=%v", c.riverOn, c.redisSizes.off, c.batches)
		assert.True(t, c.retention.horizonHold == 2*time.Minute && c.retention.horizonRate == 10_000, "hold=%s rate=%d", c.retention.horizonHold, c.retention.horizonRate)
	})
	t.Run("throughput keeps the flags given", func(t *testing.T) {
		c, err := parseFlags([]string{"--workloads", "throughput", "--river", "--batches", "100,1000"}, io.Discard)
		require.NoError(t, err)
		assert.True(t, c.riverOn && slices.Equal(c.batches, []int{100, 1000}), "river=%v batches=%v", c.riverOn, c.batches)
	})
	t.Run("more leases in flight than events are refused", func(t *testing.T) {
		_, err := parseFlags([]string{"--ops-events", "1000", "--ops-inflight", "990", "--ops-calls", "20"}, io.Discard)
		assert.Error(t, err, "no error")
	})
	t.Run("an unknown workload is refused", func(t *testing.T) {
		_, err := parseFlags([]string{"--workloads", "append,nope"}, io.Discard)
		assert.Error(t, err, "no error")
	})
	t.Run("a non-positive list entry is refused", func(t *testing.T) {
		_, err := parseFlags([]string{"--concurrency", "1,0"}, io.Discard)
		assert.Error(t, err, "no error")
	})
}

func TestStatistics(t *testing.T) {
	t.Run("median of odd and even counts", func(t *testing.T) {
		m := median([]float64{3, 1, 2})
		assert.Equal(t, 2.0, m, "median = %v, want 2", m)
		m = median([]float64{4, 1, 3, 2})
		assert.Equal(t, 2.5, m, "median = %v, want 2.5", m)
	})
	t.Run("percentiles by nearest rank", func(t *testing.T) {
		var d []time.Duration
		for i := 1; i <= 100; i++ {
			d = append(d, time.Duration(i)*time.Millisecond)
		}
		for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond} {
			got := percentile(d, p)
			assert.Equal(t, want, got, "p%v = %v, want %v", p, got, want)
		}
	})
	t.Run("the summary has one line per figure, ratio where both ran", func(t *testing.T) {
		r := newResults()
		r.add(systemRheo, "drain c=1", "events/s", 300)
		r.add(systemRiver, "drain c=1", "events/s", 100)
		r.add(systemRheo, "fetch per lease", "µs", 12)
		var b bytes.Buffer
		r.writeSummary(&b)
		want := "ratio rheo/river drain c=1: 3.00\nrheo fetch per lease: 12.0 µs\n"
		assert.Equal(t, want, b.String(), "summary:\n%s\nwant:\n%s", b.String(), want)
	})
	t.Run("Rheo on Redis has a line of its own, and its ratio to PostgreSQL", func(t *testing.T) {
		r := newResults()
		r.add(systemRheo, "drain c=1", "events/s", 300)
		r.add(systemRiver, "drain c=1", "events/s", 100)
		r.add(systemRedis, "drain c=1", "events/s", 600)
		r.add(systemRedis, "memory per retained event", "bytes/event", 150)
		var b bytes.Buffer
		r.writeSummary(&b)
		want := "ratio rheo/river drain c=1: 3.00\n" +
			"rheo on redis drain c=1: 600.0 events/s\nratio rheo redis/postgres drain c=1: 2.00\n" +
			"rheo on redis memory per retained event: 150.0 bytes/event\n"
		assert.Equal(t, want, b.String(), "summary:\n%s\nwant:\n%s", b.String(), want)
		b.Reset()
		r.writeTable(&b)
		assert.Contains(t, b.String(), "rheo on redis median", "the table has Redis's column")
	})
}

// hasRedisServer reports whether redis-server is on PATH for the runs of
// Rheo on Redis; under CI=true its absence fails t.
func hasRedisServer(t *testing.T) bool {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		require.NotEqual(t, "true", os.Getenv("CI"), "no redis-server for Rheo on Redis (apt-get install redis-server)")
		return false
	}
	return true
}

// TestRedisRunDropsStreams checks that a run of Rheo on Redis drops the
// streams it created, and that the private server goes with close.
func TestRedisRunDropsStreams(t *testing.T) {
	if !hasRedisServer(t) {
		t.Skip("no redis-server")
	}
	ctx := t.Context()
	r, err := startRedis(ctx, redisSizes{server: "redis-server"})
	require.NoError(t, err)
	require.NoError(t, r.withRheo(ctx, func(s *rheoSystem) error {
		_, err := s.stream(ctx, 2)
		return err
	}))
	require.NoError(t, r.withRheo(ctx, func(s *rheoSystem) error {
		streams, err := s.drv.ListStreams(ctx)
		require.NoError(t, err)
		assert.Empty(t, streams, "streams left by the run before")
		return nil
	}))
	used, err := r.usedMemory(ctx)
	require.NoError(t, err)
	assert.Positive(t, used, "used_memory")
	require.NoError(t, r.close())
	_, err = r.command(ctx, "PING")
	assert.Error(t, err, "the private server still answers after close")
}
