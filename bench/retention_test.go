package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestQuickRetention runs the opt-in retention workloads in quick mode
// and checks that each reported its figures and that every database it
// created is gone. It asserts nothing about the timings.
func TestQuickRetention(t *testing.T) {
	serverURL := testServerURL(t)
	c, err := parseFlags([]string{"--quick", "--workloads", "prune,prunelatency,horizon", "--database-url", serverURL}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := c.execute(t.Context(), &stdout, &stderr); err != nil {
		t.Fatalf("quick run failed: %v\n%s", err, stderr.String())
	}
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
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ratio rheo/river") {
		t.Errorf("the retention workloads are Rheo's alone, but River figures were reported:\n%s", out)
	}

	conn, err := pgx.Connect(t.Context(), serverURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), `SELECT datname FROM pg_database WHERE datname = ANY ($1)`, c.srv.created)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("databases left behind: %v", left)
	}
}

// TestRetentionWorkloadsAreOptIn checks that the retention workloads run
// only when named.
func TestRetentionWorkloadsAreOptIn(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range optInWorkloads {
		if slices.Contains(c.workloads, w) {
			t.Errorf("workload %s runs by default", w)
		}
	}
	c, err = parseFlags([]string{"--workloads", "horizon,append"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.runs("horizon") || !c.runs("append") || c.runs("prune") {
		t.Errorf("--workloads horizon,append runs %v", c.workloads)
	}
	if _, err := parseFlags([]string{"--prunelatency-duration", "0s"}, io.Discard); err == nil {
		t.Error("a zero --prunelatency-duration was accepted")
	}
}
