package main

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuickRetention runs the opt-in retention workloads in quick mode
// and checks that each reported its figures and that every database it
// created is gone. It asserts nothing about the timings.
func TestQuickRetention(t *testing.T) {
	serverURL := testServerURL(t)
	c, err := parseFlags([]string{"--quick", "--workloads", "prune,prunelatency,horizon", "--database-url", serverURL}, io.Discard)
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	require.NoError(t, c.execute(t.Context(), &stdout, &stderr), "quick run failed\n%s", stderr.String())
	out := stdout.String()
	for _, want := range []string{
		"retention sizes: prune 20k aged + 1k young",
		"rheo prune append 20k aged wall: ",
		"rheo prune prune 20k active_time: ",
		"rheo prune prune/append active_time: ",
		"rheo prune events heap after VACUUM: ",
		"rheo prune events indexes after appending 20k again: ",
		"rheo prune growth of heap+indexes on appending again: ",
		"rheo prune fetch per lease pruned/0, after VACUUM: ",
		"rheo prunelatency append call p99, without prune: ",
		"rheo prunelatency send to handler p99, without prune, after: ",
		"rheo prunelatency fetch call p99, paced prune (1000 per 10ms): ",
		"rheo prunelatency pruned, Pruner: ",
		"rheo prunelatency append call p99, Pruner's pace on another stream: ",
		"rheo prunelatency window, Pruner: ",
		"rheo prune prune WAL: ",
		"rheo horizon fetch call p99, first interval, held: ",
		"rheo horizon drain rate, last interval, released: ",
		"rheo horizon deliveries at the release: ",
		"rheo horizon partitions after VACUUM: ",
		"rheo relations of the prune workload after a second VACUUM:",
		"rheo horizon workload: draining 2k events, a REPEATABLE READ snapshot held",
	} {
		assert.Contains(t, out, want, "output lacks %q:\n%s", want, out)
	}
	assert.NotContains(t, out, "ratio rheo/river", "the retention workloads are Rheo's alone, but River figures were reported:\n%s", out)

	conn, err := pgx.Connect(t.Context(), serverURL)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), `SELECT datname FROM pg_database WHERE datname = ANY ($1)`, c.srv.created)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Empty(t, left, "databases left behind: %v", left)
}

// TestRetentionWorkloadsAreOptIn checks that the retention workloads run
// only when named.
func TestRetentionWorkloadsAreOptIn(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	for _, w := range optInWorkloads {
		assert.False(t, slices.Contains(c.workloads, w), "workload %s runs by default", w)
	}
	c, err = parseFlags([]string{"--workloads", "horizon,append"}, io.Discard)
	require.NoError(t, err)
	assert.True(t, c.runs("horizon") && c.runs("append") && !c.runs("prune"), "--workloads horizon,append runs %v", c.workloads)
	_, err = parseFlags([]string{"--prunelatency-duration", "0s"}, io.Discard)
	assert.Error(t, err, "a zero --prunelatency-duration was accepted")
}
