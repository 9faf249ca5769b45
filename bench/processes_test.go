package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// childPIDs lists the processes whose parent is this one, from /proc
// (none when it cannot be read).
func childPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …: comm may hold spaces, so split after it.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestInterruptedProcessesLeaveNothing cancels the processes workload
// while its consumer processes drain, and checks that none of them is
// left running and that its databases are dropped.
func TestInterruptedProcessesLeaveNothing(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc to list the consumer processes")
	}
	serverURL := testServerURL(t)
	c, err := parseFlags([]string{"--quick", "--workloads", "processes", "--processes-n", "50000", "--database-url", serverURL}, io.Discard)
	require.NoError(t, err)
	c.srv, err = newServer(t.Context(), serverURL)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	seen := make(chan int, 1)
	go func() {
		// Cancel once every consumer process runs.
		for ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			if n := len(childPIDs()); n >= c.processSizes.procs {
				seen <- n
				time.Sleep(300 * time.Millisecond)
				cancel()
				return
			}
		}
	}()
	err = c.execute(ctx, io.Discard, io.Discard)
	cancel()
	require.Error(t, err, "the interrupted run reported success")
	select {
	case n := <-seen:
		t.Logf("cancelled with %d consumer processes running", n)
	default:
		require.FailNow(t, "the run ended before its consumer processes all ran", "%v", err)
	}
	assert.Empty(t, childPIDs(), "consumer processes left running")
	conn, err := pgx.Connect(t.Context(), serverURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var left int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_database WHERE datname = ANY ($1)`,
		c.srv.created).Scan(&left))
	assert.Zero(t, left, "%d of %d databases left behind after the interrupt", left, len(c.srv.created))
}
