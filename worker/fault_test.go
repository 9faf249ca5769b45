package worker_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/faultproxy"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/rheotest"
	"github.com/rheo-go/rheo/worker"
)

// The child process of TestWorkerSurvivesSIGKILL is this test binary run
// with these variables set; TestMain hands it to runChild.
const (
	childEnv        = "RHEO_WORKER_CHILD" // "postgres" or "sqlite"
	childDSNEnv     = "RHEO_WORKER_CHILD_DSN"
	childStreamEnv  = "RHEO_WORKER_CHILD_STREAM"
	childClockEnv   = "RHEO_WORKER_CHILD_CLOCK"
	childAcksEnv    = "RHEO_WORKER_CHILD_ACKS"
	childConcurrent = 4
	childDemand     = 16 // leases the child holds at most: running, queued, acking
)

// runChild consumes the stream named by the environment: it acks the
// first RHEO_WORKER_CHILD_ACKS events it handles, printing "acked <id>"
// once each ack is committed, then blocks in every handler, printing
// "blocked <id>", until the parent kills it.
func runChild() int {
	ctx := context.Background()
	at, err := time.Parse(time.RFC3339Nano, os.Getenv(childClockEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	acks, err := strconv.Atoi(os.Getenv(childAcksEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	clock := rheotest.NewClock(at)
	var drv driver.Driver
	if os.Getenv(childEnv) == "postgres" {
		drv, err = postgres.Open(ctx, os.Getenv(childDSNEnv), &postgres.Options{Clock: clock})
	} else {
		drv, err = sqlite.Open(ctx, os.Getenv(childDSNEnv), &sqlite.Options{Clock: clock})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out := &lineWriter{w: os.Stdout}
	var mu sync.Mutex
	handled := 0
	w, err := worker.New(drv, &worker.Config{
		Stream:        os.Getenv(childStreamEnv),
		Group:         "g",
		Concurrency:   childConcurrent,
		MaxDemand:     childDemand,
		LeaseDuration: leaseDuration,
		Clock:         clock,
		Hooks:         []any{ackPrinter{out}},
		Handler: func(ctx context.Context, l rheo.Lease) error {
			mu.Lock()
			handled++
			n := handled
			mu.Unlock()
			if n <= acks {
				return nil
			}
			out.println("blocked " + l.Event.ID)
			<-ctx.Done()
			return ctx.Err()
		},
	})
	if err == nil {
		err = w.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Wait to be killed.
	time.Sleep(time.Hour)
	return 1
}

type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) println(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, s)
}

type ackPrinter struct{ out *lineWriter }

func (p ackPrinter) Acked(_ context.Context, i worker.AckInfo) {
	p.out.println("acked " + i.Lease.Event.ID)
}

func TestWorkerSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	const events, childAcks = 200, 50
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		// A worker killed mid-batch loses nothing.
		clock := rheotest.NewClock(time.Time{})
		drv := b.Open(t, clock)
		stream, group := newStream(t, drv, 2, 5)
		appended := appendSpread(t, drv, stream, events)

		exe, err := os.Executable()
		require.NoError(t, err)
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(),
			childEnv+"="+b.Name, childDSNEnv+"="+b.DSN, childStreamEnv+"="+stream,
			childClockEnv+"="+clock.Now().Format(time.RFC3339Nano), childAcksEnv+"="+strconv.Itoa(childAcks))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})

		// Kill the child once its acks are committed and every one of
		// its handlers holds a lease.
		childAcked, blocked := map[string]bool{}, map[string]bool{}
		lines, stopReading := make(chan string), make(chan struct{})
		t.Cleanup(func() { close(stopReading) })
		go func() {
			defer close(lines)
			scanner := bufio.NewScanner(stdout)
			for scanner.Scan() {
				select {
				case lines <- scanner.Text():
				case <-stopReading:
					return
				}
			}
		}()
		for len(childAcked) < childAcks || len(blocked) < childConcurrent {
			line, ok := receiveOK(t, "the child's next line", lines)
			require.True(t, ok, "the child's output ended")
			word, id, _ := strings.Cut(line, " ")
			switch word {
			case "acked":
				childAcked[id] = true
			case "blocked":
				blocked[id] = true
			}
		}
		require.NoError(t, cmd.Process.Kill())
		for range lines {
			// What the child printed before it died.
		}
		_ = cmd.Wait()

		// The child's leases expire without anyone waiting for them.
		clock.Advance(leaseDuration + time.Second)
		rec := &recorder{}
		var mu sync.Mutex
		handled := map[string]int{}
		workertest.StartWorker(t, drv, &worker.Config{
			Stream: stream, Group: group, Concurrency: 8, LeaseDuration: leaseDuration,
			Clock: clock, Hooks: []any{rec},
			Handler: func(ctx context.Context, l rheo.Lease) error {
				mu.Lock()
				defer mu.Unlock()
				handled[l.Event.ID]++
				return nil
			},
		})
		rec.WaitFor(t, "every event the child did not ack", func(s recorded) bool {
			return len(s.Acked) == events-childAcks
		})

		mu.Lock()
		defer mu.Unlock()
		for _, e := range appended {
			if childAcked[e.ID] {
				assert.Zero(t, handled[e.ID], "event %s was acked by the child", e.ID)
			} else {
				assert.Equal(t, 1, handled[e.ID], "event %s", e.ID)
			}
		}
		// The child's leases are delivered again: those of its blocked
		// handlers and those it had queued for them.
		s := rec.Snapshot()
		require.GreaterOrEqual(t, len(s.Redelivered), childConcurrent, "the child's leases are delivered again")
		require.LessOrEqual(t, len(s.Redelivered), childDemand, "the child held at most MaxDemand leases")
		redelivered := map[string]bool{}
		for _, r := range s.Redelivered {
			redelivered[r.Lease.Event.ID] = true
			assert.False(t, childAcked[r.Lease.Event.ID])
			assert.Equal(t, 2, r.Lease.Attempt)
		}
		for id := range blocked {
			assert.True(t, redelivered[id], "the blocked handler's event %s is delivered again", id)
		}
		assert.Equal(t, int64(0), groupInfo(t, drv, stream, group).Lag)
		assert.Empty(t, workertest.DeadLetters(t, drv, stream, group))
	})
}

func TestWorkerSurvivesConnectionLoss(t *testing.T) {
	t.Parallel()
	const events, concurrency, maxDemand = 300, 8, 32
	b := testbackend.Postgres(t)
	u, err := url.Parse(b.DSN)
	require.NoError(t, err)
	p := faultproxy.New(t, u.Host)

	clock := rheotest.NewClock(time.Time{})
	admin := openPostgres(t, b.DSN, clock)
	drv := openPostgres(t, p.URL(t, b.DSN), clock)
	stream, group := newStream(t, admin, 4, 5)
	appended := appendSpread(t, admin, stream, events)

	rec := &recorder{}
	var mu sync.Mutex
	handled := map[string]int{}
	cut := make(chan struct{})
	workertest.StartWorker(t, drv, &worker.Config{
		Stream: stream, Group: group, Concurrency: concurrency, MaxDemand: maxDemand, LeaseDuration: leaseDuration,
		Clock: clock, Hooks: []any{rec},
		Handler: func(ctx context.Context, l rheo.Lease) error {
			mu.Lock()
			defer mu.Unlock()
			handled[l.Event.ID]++
			if len(handled) == events/3 {
				close(cut)
			}
			return nil
		},
	})

	workertest.Receive(t, "a third of the events", cut)
	p.CutAll()
	rec.WaitFor(t, "fetch errors", func(s recorded) bool { return len(s.FetchFailed) >= 2 })
	for _, f := range rec.Snapshot().FetchFailed {
		assert.True(t, errors.Is(f.Err, rheo.ErrBackendUnavailable) || errors.Is(f.Err, rheo.ErrAmbiguous),
			"fetch error %v is backend_unavailable or ambiguous", f.Err)
	}
	p.Restore()

	// Leases whose settle was lost with the connection are left to expire:
	// move the clock on whenever the worker makes no progress.
	last := -1
	progressing(t, "every event is terminal", func() (int, bool) {
		if groupInfo(t, admin, stream, group).Lag == 0 {
			return 0, true
		}
		n := len(rec.Snapshot().Acked)
		if n == last {
			clock.Advance(time.Second)
		}
		last = n
		time.Sleep(20 * time.Millisecond)
		return n, false
	})

	mu.Lock()
	defer mu.Unlock()
	duplicates := 0
	for _, e := range appended {
		require.GreaterOrEqual(t, handled[e.ID], 1, "event %s was never handled", e.ID)
		duplicates += handled[e.ID] - 1
	}
	// The leases held at the cut (running, queued or acking) and those of a
	// fetch whose answer was lost are at most MaxDemand.
	assert.LessOrEqual(t, duplicates, maxDemand, "only leases held at the cut are delivered again")
	assert.Empty(t, workertest.DeadLetters(t, admin, stream, group))
	t.Logf("%d events handled again after the cut; %d fetch errors", duplicates, len(rec.Snapshot().FetchFailed))
}

func TestCompetingWorkers(t *testing.T) {
	t.Parallel()
	const events, workers = 10000, 8
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		// 8 workers handle every event exactly once.
		admin := b.Open(t, nil)
		stream, group := newStream(t, admin, 4, 5)
		appended := appendSpread(t, admin, stream, events)

		var mu sync.Mutex
		handled := map[string]int{}
		total := 0
		start := time.Now()
		for range workers {
			drv := b.Open(t, nil)
			workertest.StartWorker(t, drv, &worker.Config{
				Stream: stream, Group: group, Concurrency: 16,
				Handler: func(ctx context.Context, l rheo.Lease) error {
					mu.Lock()
					defer mu.Unlock()
					handled[l.Event.ID]++
					total++
					return nil
				},
			})
		}
		eventually(t, "every event is terminal", func() bool {
			return groupInfo(t, admin, stream, group).Lag == 0
		})
		t.Logf("%d events drained by %d workers in %s", events, workers, time.Since(start))

		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, events, total, "no faults, so no duplicates")
		for _, e := range appended {
			assert.Equal(t, 1, handled[e.ID], "event %s", e.ID)
		}
		assert.Empty(t, workertest.DeadLetters(t, admin, stream, group))
	})
}
