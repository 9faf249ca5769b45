package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/worker"
)

// The processes workload drains one group with consumers that are
// separate OS processes: the harness runs its own executable again, with
// consumerEnv set, once per consumer.
const workloadProcesses = "processes"

// consumerEnv, set to 1 in a process's environment, makes the harness's
// executable (or the test binary, see TestMain) run one consumer process
// instead of the benchmark.
const consumerEnv = "RHEO_BENCH_CONSUMER"

// readyTimeout bounds the wait for every consumer process to connect.
const readyTimeout = time.Minute

// progressInterval is how often a consumer process reports its acks.
const progressInterval = 50 * time.Millisecond

// fetchRecorder counts a worker's fetch calls, through its FetchedHook
// and FetchFailedHook, and keeps the start time of each.
type fetchRecorder struct {
	mu     sync.Mutex
	starts []int64 // Unix nanoseconds
}

// Fetched implements worker.FetchedHook.
func (f *fetchRecorder) Fetched(_ context.Context, info worker.FetchInfo) {
	f.add(time.Now().Add(-info.Duration))
}

// FetchFailed implements worker.FetchFailedHook; a failed call counts as
// a call that started when it was reported.
func (f *fetchRecorder) FetchFailed(context.Context, worker.FetchErrorInfo) { f.add(time.Now()) }

func (f *fetchRecorder) add(start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, start.UnixNano())
}

// snapshot is a copy of the start times recorded so far.
func (f *fetchRecorder) snapshot() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts)
}

// fetchesBefore counts the fetch calls in starts that began at or before
// t (Unix nanoseconds).
func fetchesBefore(starts []int64, t int64) int {
	n := 0
	for _, s := range starts {
		if s <= t {
			n++
		}
	}
	return n
}

// lastAck counts a worker's committed acks and keeps the time of the
// last, and tells total (nil: nobody) of each.
type lastAck struct {
	n     atomic.Int64
	last  atomic.Int64 // Unix nanoseconds
	total *counter
}

// Acked implements worker.AckedHook.
func (a *lastAck) Acked(ctx context.Context, info worker.AckInfo) {
	a.n.Add(1)
	a.last.Store(time.Now().UnixNano())
	if a.total != nil {
		a.total.Acked(ctx, info)
	}
}

// consumerReport is one line a consumer process writes on its stdout:
// ready once connected, then its acks every progressInterval, and a final
// line after its worker stopped.
type consumerReport struct {
	Ready bool  `json:"ready,omitempty"`
	Acked int64 `json:"acked"`
	Final bool  `json:"final,omitempty"`
	// LastAck is the time of the process's last committed ack, Unix
	// nanoseconds (final line only).
	LastAck int64 `json:"last_ack,omitempty"`
	// FetchStarts are the start times of its fetch calls, Unix
	// nanoseconds (final line only).
	FetchStarts []int64 `json:"fetch_starts,omitempty"`
}

// consumerArgs are what a consumer process is told on its command line.
type consumerArgs struct {
	url         string
	stream      string
	group       string
	concurrency int
	conns       int
}

func (a consumerArgs) list() []string {
	return []string{"--database-url", a.url, "--stream", a.stream, "--group", a.group,
		"--concurrency", strconv.Itoa(a.concurrency), "--conns", strconv.Itoa(a.conns)}
}

// isConsumerProcess reports whether this process was started as a
// consumer process.
func isConsumerProcess() bool { return os.Getenv(consumerEnv) == "1" }

// consumerMain runs one consumer process: it connects (a pool of --conns
// connections, all opened), writes its ready line, starts its worker on
// the line "start" from stdin, reports its acks until the line "stop" or
// the end of stdin (the parent is gone), then stops the worker and writes
// its final line. It returns the exit code.
func consumerMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var a consumerArgs
	fs := flag.NewFlagSet("bench consumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&a.url, "database-url", "", "database `URL`")
	fs.StringVar(&a.stream, "stream", "", "stream")
	fs.StringVar(&a.group, "group", "", "group")
	fs.IntVar(&a.concurrency, "concurrency", 1, "handler concurrency")
	fs.IntVar(&a.conns, "conns", 1, "connections of the pool")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := runConsumer(context.Background(), a, stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "bench consumer:", err)
		return 1
	}
	return 0
}

// runConsumer is consumerMain's work, after its flags.
func runConsumer(ctx context.Context, a consumerArgs, stdin io.Reader, stdout io.Writer) error {
	pool, err := ownPool(ctx, &database{url: a.url}, a.conns)
	if err != nil {
		return err
	}
	defer pool.Close()
	drv := postgres.New(pool, nil)
	defer drv.Close()
	acks := &lastAck{}
	fetches := &fetchRecorder{}
	w, err := worker.New(drv, &worker.Config{
		Stream: a.stream, Group: a.group, Handler: noopHandler, Concurrency: a.concurrency,
		Hooks: []any{acks, fetches},
	})
	if err != nil {
		return err
	}
	out := json.NewEncoder(stdout)
	var outMu sync.Mutex
	write := func(r consumerReport) error {
		outMu.Lock()
		defer outMu.Unlock()
		return out.Encode(r)
	}
	if err := write(consumerReport{Ready: true}); err != nil {
		return err
	}
	lines := bufio.NewScanner(stdin)
	if !lines.Scan() || lines.Text() != "start" {
		return errors.New("stdin ended before the start line")
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	stopped := make(chan struct{})
	progress := make(chan error, 1)
	go func() {
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case <-stopped:
				progress <- nil
				return
			case <-t.C:
				if err := write(consumerReport{Acked: acks.n.Load()}); err != nil {
					progress <- err
					return
				}
			}
		}
	}()
	// "stop", or the end of stdin: the parent is done, or gone.
	for lines.Scan() {
		if lines.Text() == "stop" {
			break
		}
	}
	serr := w.Stop(context.WithoutCancel(ctx))
	close(stopped)
	if err := <-progress; err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	return write(consumerReport{Final: true, Acked: acks.n.Load(), LastAck: acks.last.Load(), FetchStarts: fetches.snapshot()})
}

// tailBuffer keeps the last tailBytes written to it: a consumer
// process's stderr, for the error that reports its failure.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

const tailBytes = 4096

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > tailBytes {
		t.b = slices.Clone(t.b[len(t.b)-tailBytes:])
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// consumerProcess is one running consumer process, seen from the parent.
type consumerProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *tailBuffer
	acked  atomic.Int64
	final  consumerReport
}

// startConsumer starts a consumer process. It is killed when ctx ends.
func startConsumer(ctx context.Context, a consumerArgs) (*consumerProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, a.list()...)
	cmd.Env = append(os.Environ(), consumerEnv+"=1")
	p := &consumerProcess{cmd: cmd, stderr: &tailBuffer{}}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.lines = bufio.NewScanner(stdout)
	// The final line lists every fetch call's start time.
	p.lines.Buffer(make([]byte, 0, 64<<10), 64<<20)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// next reads the process's next report line.
func (p *consumerProcess) next() (consumerReport, error) {
	var r consumerReport
	if !p.lines.Scan() {
		err := p.lines.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return r, p.failure(err)
	}
	if err := json.Unmarshal(p.lines.Bytes(), &r); err != nil {
		return r, p.failure(fmt.Errorf("bad report line %q: %w", p.lines.Text(), err))
	}
	return r, nil
}

// failure is err with the process's stderr.
func (p *consumerProcess) failure(err error) error {
	if tail := p.stderr.String(); tail != "" {
		return fmt.Errorf("consumer process %d: %w; its stderr: %s", p.cmd.Process.Pid, err, tail)
	}
	return fmt.Errorf("consumer process %d: %w", p.cmd.Process.Pid, err)
}

func (p *consumerProcess) send(line string) error {
	_, err := io.WriteString(p.stdin, line+"\n")
	return err
}

// competingResult is one run of competing consumers (or of the single
// worker they are compared with): the time from the start to the last
// settle, each consumer's settled count, and, when counted, the fetch
// calls that began by the last settle.
type competingResult struct {
	d             time.Duration
	shares        []int64
	fetches       int
	countsFetches bool
}

// processes appends n events over partitions partitions (untimed, by the
// server) and drains them with procs consumer processes of one group,
// each a worker of the given concurrency on its own pool of conns
// connections. It starts them all, waits until every one has connected,
// then tells them to start and times from that moment to the last
// committed ack of any of them.
func (s *rheoSystem) processes(ctx context.Context, n, partitions, procs, concurrency, conns int) (competingResult, error) {
	var r competingResult
	stream, err := s.loadCompeting(ctx, n, partitions)
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := consumerArgs{url: s.db.url, stream: stream, group: "competing", concurrency: concurrency, conns: conns}
	ps := make([]*consumerProcess, 0, procs)
	defer func() {
		// Whatever happened: close their stdin (they stop), kill what is
		// left (cancel), and reap them all.
		cancel()
		for _, p := range ps {
			_ = p.stdin.Close()
			_ = p.cmd.Wait()
		}
	}()
	for range procs {
		p, err := startConsumer(ctx, a)
		if err != nil {
			return r, err
		}
		ps = append(ps, p)
	}
	ready, readyCancel := context.WithTimeout(ctx, readyTimeout)
	defer readyCancel()
	g, _ := errgroup.WithContext(ready)
	for _, p := range ps {
		g.Go(func() error {
			rep, err := p.next()
			if err == nil && !rep.Ready {
				err = p.failure(errors.New("its first line is not the ready line"))
			}
			return err
		})
	}
	waited := make(chan error, 1)
	go func() { waited <- g.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			return r, err
		}
	case <-ready.Done():
		return r, fmt.Errorf("consumer processes not ready after %s", readyTimeout)
	}
	start := time.Now()
	for _, p := range ps {
		if err := p.send("start"); err != nil {
			return r, p.failure(err)
		}
	}
	// Each process's reports, until its final line; once their acks add
	// up to n, every process is told to stop.
	var stopOnce sync.Once
	stopAll := func() {
		stopOnce.Do(func() {
			for _, p := range ps {
				_ = p.send("stop")
			}
		})
	}
	var total atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range ps {
		g.Go(func() error {
			for {
				rep, err := p.next()
				if err != nil {
					return err
				}
				if rep.Final {
					p.final = rep
					return nil
				}
				if total.Add(rep.Acked-p.acked.Swap(rep.Acked)) >= int64(n) {
					stopAll()
				}
			}
		})
	}
	var timedOut atomic.Bool
	go func() {
		// Bounded like every drain; a failed process makes the others
		// stop at once.
		t := time.NewTimer(drainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			timedOut.Store(true)
			cancel()
		case <-gctx.Done():
			stopAll()
		}
	}()
	if err := g.Wait(); err != nil {
		if timedOut.Load() {
			return r, fmt.Errorf("timed out after %s with %d of %d acked", drainTimeout, total.Load(), n)
		}
		return r, err
	}
	var last int64
	var settled int64
	for _, p := range ps {
		last = max(last, p.final.LastAck)
		settled += p.final.Acked
		r.shares = append(r.shares, p.final.Acked)
	}
	if settled != int64(n) {
		return r, fmt.Errorf("the consumer processes settled %d of %d events", settled, n)
	}
	for _, p := range ps {
		r.fetches += fetchesBefore(p.final.FetchStarts, last)
		if err := p.cmd.Wait(); err != nil {
			return r, p.failure(err)
		}
	}
	ps = nil
	r.d, r.countsFetches = time.Unix(0, last).Sub(start), true
	return r, nil
}

// loadCompeting appends n events over partitions partitions of a new
// stream (by the server, untimed) and creates the group "competing".
func (s *rheoSystem) loadCompeting(ctx context.Context, n, partitions int) (string, error) {
	stream, err := s.stream(ctx, partitions)
	if err != nil {
		return "", err
	}
	conn, err := s.db.pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	err = appendGenerated(ctx, conn, stream, 1, n, partitions, func(int) {})
	conn.Release()
	if err != nil {
		return "", err
	}
	return stream, s.drv.CreateGroup(ctx, stream, "competing", nil)
}

// single drains n events over partitions partitions with one worker of
// the given concurrency on the database's pool, as the drain workload
// does, for the competing workloads to compare with.
func (s *rheoSystem) single(ctx context.Context, n, partitions, concurrency int) (competingResult, error) {
	var r competingResult
	stream, err := s.loadCompeting(ctx, n, partitions)
	if err != nil {
		return r, err
	}
	acks := &lastAck{total: newCounter(n)}
	fetches := &fetchRecorder{}
	w, err := worker.New(s.drv, &worker.Config{
		Stream: stream, Group: "competing", Handler: noopHandler, Concurrency: concurrency,
		Hooks: []any{acks, fetches},
	})
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		return r, err
	}
	err = acks.total.wait(ctx, drainTimeout)
	if serr := w.Stop(context.WithoutCancel(ctx)); err == nil {
		err = serr
	}
	if err != nil {
		return r, err
	}
	r.d = time.Unix(0, acks.last.Load()).Sub(start)
	r.shares = []int64{acks.n.Load()}
	r.fetches, r.countsFetches = fetchesBefore(fetches.snapshot(), acks.last.Load()), true
	return r, nil
}

// processSizes are the sizes of the processes workload.
type processSizes struct {
	n           int
	partitions  int
	procs       int
	concurrency int
	conns       int
}

func (z *processSizes) flags(fs *flag.FlagSet) {
	fs.IntVar(&z.n, "processes-n", 100_000, "events of the processes workload")
	fs.IntVar(&z.partitions, "processes-partitions", 16, "partitions of the processes workload's stream")
	fs.IntVar(&z.procs, "processes", 16, "consumer processes of the processes workload, each its own OS process with its own pool")
	fs.IntVar(&z.concurrency, "processes-concurrency", 8, "handler concurrency of each consumer process; the single worker they are compared with runs at processes × this")
	fs.IntVar(&z.conns, "processes-conns", 3, "connections of each consumer process's pool (its wakeup listener opens one more)")
}

var processesQuick = map[string]string{"processes-n": "2000"}

func (z *processSizes) check() error {
	if z.n < 1 || z.partitions < 1 || z.procs < 1 || z.concurrency < 1 || z.conns < 1 {
		return errors.New("counts must be at least 1")
	}
	return nil
}

// competingSamples are the figures of a run of consumers named name over
// n events: the total rate, the smallest and largest share in percent of
// an even one (when there are several consumers), and the fetch calls per
// event.
func competingSamples(name string, n int, r competingResult) []sample {
	samples := []sample{{name + " total", "events/s", perSecond(n, r.d)}}
	if len(r.shares) > 1 {
		even := float64(n) / float64(len(r.shares))
		samples = append(samples,
			sample{name + " smallest share", "% of even", 100 * float64(slices.Min(r.shares)) / even},
			sample{name + " largest share", "% of even", 100 * float64(slices.Max(r.shares)) / even})
	}
	if r.countsFetches {
		samples = append(samples, sample{name + " fetch calls per event", "calls/event", float64(r.fetches) / float64(n)})
	}
	return samples
}

// processesName is the name of the processes workload's figures.
func (z processSizes) name() string {
	return fmt.Sprintf("competing %d processes x%d", z.procs, z.concurrency)
}

// singleName is the name of the figures of the single worker a competing
// workload is compared with.
func singleName(concurrency int) string { return "competing single c=" + strconv.Itoa(concurrency) }

// processesMeasurement drains a group with consumer processes, and the
// same events with one worker at their total concurrency, each on a fresh
// database. Rheo only: River's clients in separate processes are what its
// competing workload measures in one.
func (c *config) processesMeasurement() measurement {
	z := c.processSizes
	return measurement{
		label: z.name(),
		rheo: func(ctx context.Context) ([]sample, error) {
			var samples []sample
			err := c.srv.withRheo(ctx, func(s *rheoSystem) error {
				r, err := s.processes(ctx, z.n, z.partitions, z.procs, z.concurrency, z.conns)
				samples = append(samples, competingSamples(z.name(), z.n, r)...)
				return err
			})
			if err != nil {
				return nil, err
			}
			err = c.srv.withRheo(ctx, func(s *rheoSystem) error {
				r, err := s.single(ctx, z.n, z.partitions, z.procs*z.concurrency)
				samples = append(samples, competingSamples(singleName(z.procs*z.concurrency), z.n, r)...)
				return err
			})
			return samples, err
		},
	}
}
