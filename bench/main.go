// Command bench measures Rheo side by side with River on one PostgreSQL
// server: appends, draining, latency, fan-out to several groups, storage
// cost, fetch time against the length of the log, and the cost of the
// operator calls (group_info, replay and group start by time, fetch with
// work in flight) on a long log. Rheo on Redis (driver/redis) runs the
// append, drain and latency workloads beside them, on a private
// redis-server (or --redis-url), and the memory workload measures what
// Redis holds per retained event.
//
// Each workload runs for Rheo and River (and Rheo on Redis) in turn, for
// several rounds, each PostgreSQL run on a fresh database cloned from a
// migrated template; the databases have random names and are dropped at
// the end, also when a run fails or is interrupted, and every stream a
// Redis run creates is dropped after it. It prints the servers'
// settings, the median and range of every figure, the ratios Rheo/River
// and Redis/PostgreSQL of the medians, and ends with one line per
// figure.
//
//	go run .           # the full run
//	go run . --quick   # small sizes: checks that the harness works
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const defaultServerURL = "postgres://postgres@127.0.0.1:5432/postgres"

// config is what to run, from the command line.
type config struct {
	serverURL          string
	quick              bool
	n                  int
	rounds             int
	concurrency        []int
	producers          int
	batches            []int
	rates              []int
	latencyDuration    time.Duration
	latencyProducers   int
	latencyConcurrency int
	groups             []int
	fanoutN            int
	fanoutConcurrency  int
	costN              int
	costConcurrency    int
	scale              []int
	scaleFetched       int
	opsEvents          int
	opsPartitions      []int
	opsBehind          int
	opsInflight        int
	opsCalls           int
	retention          retentionSizes
	orderingN          int
	orderingConc       int
	orderingBacklogs   []int
	orderingFetched    int
	workerSizes        // slow and competing
	processSizes       processSizes
	riverOn            bool // false (--river=false): Rheo (and Rheo on Redis) only
	citus              citusSizes
	redisSizes         redisSizes
	workloads          []string

	srv *server
	// redis is the Redis server of Rheo on Redis, nil when it does not
	// run (--redis=false, or no workload of it asked for).
	redis *redisTarget
	log   io.Writer
}

// workloadNames are the workloads, in the order they run.
var workloadNames = []string{"append", "drain", "slow", "competing", workloadProcesses, "latency", "fanout", "cost", "scale", "ops", "ordering", workloadMemory}

// redisWorkloads are the workloads that Rheo on Redis runs in.
var redisWorkloads = []string{"append", "drain", "latency", workloadMemory}

func (c *config) runs(workload string) bool { return contains(c.workloads, workload) }

func (c *config) logf(format string, args ...any) {
	fmt.Fprintf(c.log, format+"\n", args...)
}

// intList is a flag of comma-separated integers.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		*l = append(*l, n)
	}
	return nil
}

// stringList is a flag of comma-separated names.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if !contains(workloadNames, f) && !contains(optInWorkloads, f) {
			return fmt.Errorf("unknown workload %q (known: %s)", f, strings.Join(slices.Concat(workloadNames, optInWorkloads), ", "))
		}
		*l = append(*l, f)
	}
	return nil
}

// parseFlags reads the command line. --quick changes the defaults of the
// sizes that were not given explicitly.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{
		concurrency:      intList{1, 8, 64},
		batches:          intList{1, 100, 1000},
		rates:            intList{1000, 10000},
		groups:           intList{1, 4, 16},
		scale:            intList{10_000, 10_000_000},
		opsPartitions:    intList{1, 4},
		orderingBacklogs: intList{10_000, 100_000, 1_000_000},
		workloads:        workloadNames,
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.serverURL, "database-url", defaultServerURL, "PostgreSQL server `URL`; the harness creates and drops its own databases there")
	fs.BoolVar(&c.quick, "quick", false, "small sizes and one round: checks that the harness works (no timing assertions)")
	fs.IntVar(&c.n, "n", 100_000, "events per append, drain and fan-out run")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds of every workload; Rheo and River alternate within each")
	fs.Var((*intList)(&c.concurrency), "concurrency", "handler concurrencies of the drain workload")
	fs.IntVar(&c.producers, "producers", runtime.NumCPU(), "producers of the append workload (Rheo: one partition each); defaults to one per CPU")
	fs.Var((*intList)(&c.batches), "batches", "events per call of the append workload (1: Append / Insert)")
	fs.Var((*intList)(&c.rates), "rates", "events per second of the latency workload")
	fs.DurationVar(&c.latencyDuration, "latency-duration", 10*time.Second, "duration of each latency run")
	fs.IntVar(&c.latencyProducers, "latency-producers", 1, "producers of the latency workload (Rheo: one partition each)")
	fs.IntVar(&c.latencyConcurrency, "latency-concurrency", 64, "handler concurrency of the latency workload")
	fs.Var((*intList)(&c.groups), "groups", "group counts of the fan-out workload")
	fs.IntVar(&c.fanoutN, "fanout-n", 20_000, "events of the fan-out workload (each group consumes all of them)")
	fs.IntVar(&c.fanoutConcurrency, "fanout-concurrency", 64, "handler concurrency of each group in the fan-out workload")
	fs.IntVar(&c.costN, "cost-n", 1_000_000, "events of the cost workload")
	fs.IntVar(&c.costConcurrency, "cost-concurrency", 64, "handler concurrency of the cost workload's drain")
	fs.Var((*intList)(&c.scale), "scale", "stream sizes of the scale workload (fetch time against log length); it runs once, not per round")
	fs.IntVar(&c.scaleFetched, "scale-fetched", 10_000, "events fetched, from the end of the stream, in each scale run")
	fs.IntVar(&c.opsEvents, "ops-events", 2_000_000, "events of each stream of the ops workload (spread evenly over its partitions); it runs once, not per round")
	fs.Var((*intList)(&c.opsPartitions), "ops-partitions", "partition counts of the ops workload's streams, one stream each")
	fs.IntVar(&c.opsBehind, "ops-behind", 10_000, "events at the end of each ops stream: the backlog of the ops workload's group_info group, where its replay and create_group start")
	fs.IntVar(&c.opsInflight, "ops-inflight", 100_000, "leases in flight for the ops workload's second fetch figure")
	fs.IntVar(&c.opsCalls, "ops-calls", 20, "timed calls of each operation of the ops workload")
	fs.IntVar(&c.orderingN, "ordering-n", 100_000, "events of each drain of the ordering workload (over 1,000 keys on 8 partitions)")
	fs.IntVar(&c.orderingConc, "ordering-concurrency", 64, "handler concurrency of the ordering workload's drains")
	fs.Var((*intList)(&c.orderingBacklogs), "ordering-backlogs", "hot key backlogs of the ordering workload's fetch figure; it runs once, not per round")
	fs.IntVar(&c.orderingFetched, "ordering-fetched", 10_000, "events of other keys fetched behind each hot key backlog")
	c.retention.flags(fs)
	c.workerFlags(fs)
	c.processSizes.flags(fs)
	fs.BoolVar(&c.riverOn, "river", true, "run River beside Rheo (--river=false: Rheo only)")
	c.citus.flags(fs)
	c.redisSizes.flags(fs)
	fs.Var((*stringList)(&c.workloads), "workloads", "workloads to run: "+strings.Join(workloadNames, ",")+
		" by default; also, only when named: "+strings.Join(optInWorkloads, ","))
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := c.expandThroughput(set, fs.Set); err != nil {
		return nil, err
	}
	if c.quick {
		quick := map[string]string{
			"n": "2000", "fanout-n": "2000", "rounds": "1", "concurrency": "1,8", "rates": "200",
			"latency-duration": "1s", "groups": "1,4", "cost-n": "2000",
			"scale": "1000,5000", "scale-fetched": "1000",
			"ops-events": "5000", "ops-behind": "500", "ops-inflight": "1000", "ops-calls": "3",
			"ordering-n": "2000", "ordering-backlogs": "1000,5000", "ordering-fetched": "500",
			"slow-n": "500", "competing-n": "2000",
		}
		maps.Copy(quick, retentionQuick)
		maps.Copy(quick, processesQuick)
		maps.Copy(quick, citusQuick)
		maps.Copy(quick, redisQuick)
		for name, v := range quick {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return nil, err
				}
			}
		}
	}
	if c.rounds < 1 || c.n < 1 || c.producers < 1 || c.costN < 1 || c.scaleFetched < 1 ||
		c.latencyProducers < 1 || c.latencyConcurrency < 1 || c.fanoutN < 1 || c.fanoutConcurrency < 1 || c.costConcurrency < 1 ||
		c.opsEvents < 1 || c.opsBehind < 1 || c.opsInflight < 1 || c.opsCalls < 1 ||
		c.orderingN < 1 || c.orderingConc < 1 || c.orderingFetched < 1 || c.redisSizes.memoryN < 1 {
		return nil, errors.New("counts must be at least 1")
	}
	if c.opsBehind > c.opsEvents {
		return nil, errors.New("--ops-behind must not exceed --ops-events")
	}
	// Each lease of the ops workload's busy group takes an event.
	if c.opsInflight+c.opsCalls > c.opsEvents {
		return nil, errors.New("--ops-inflight plus --ops-calls must not exceed --ops-events")
	}
	if err := c.workerSizes.check(); err != nil {
		return nil, err
	}
	if err := c.processSizes.check(); err != nil {
		return nil, err
	}
	if c.latencyDuration <= 0 {
		return nil, errors.New("--latency-duration must be positive")
	}
	if err := c.retention.check(); err != nil {
		return nil, err
	}
	return c, nil
}

func main() {
	if isConsumerProcess() {
		os.Exit(consumerMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the benchmark and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.execute(ctx, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

// execute runs the plan and prints the report. Every database it created
// is dropped before it returns. It connects to c.serverURL unless c.srv
// is already set.
func (c *config) execute(ctx context.Context, stdout, stderr io.Writer) (err error) {
	c.log = stderr
	if c.srv == nil {
		if c.srv, err = newServer(ctx, c.serverURL); err != nil {
			return err
		}
	}
	defer func() {
		if cerr := c.srv.close(); err == nil {
			err = cerr
		}
	}()
	st, err := c.srv.settings(ctx)
	if err != nil {
		return err
	}
	if !c.redisSizes.off && slices.ContainsFunc(redisWorkloads, c.runs) {
		if c.redis, err = startRedis(ctx, c.redisSizes); err != nil {
			return err
		}
		defer func() {
			if cerr := c.redis.close(); err == nil {
				err = cerr
			}
			c.redis = nil
		}()
		if st.Redis, err = c.redis.settings(ctx); err != nil {
			return err
		}
	}
	loadBefore := loadAverage()
	loads := &loadSamples{}
	report := &textReport{}
	res := newResults()
	started := time.Now()
	for _, m := range c.plan(report) {
		rounds := c.rounds
		if m.once {
			rounds = 1
		}
		for round := range rounds {
			// Rotate which system goes first, so none always runs on a
			// warmer (or more loaded) machine.
			order := []string{systemRheo, systemRiver, systemRedis}
			order = append(order[round%len(order):], order[:round%len(order)]...)
			for _, system := range order {
				loads.sample()
				f := m.rheo
				switch system {
				case systemRiver:
					if f = m.river; !c.riverOn {
						f = nil
					}
				case systemRedis:
					f = m.redis
				}
				if f == nil {
					continue
				}
				samples, err := f(ctx)
				if err != nil {
					return fmt.Errorf("%s, round %d, %s: %w", m.label, round+1, system, err)
				}
				for _, s := range samples {
					res.add(system, s.name, s.unit, s.value)
					c.logf("%-40s round %d %-5s %12s %s", s.name, round+1, system, format(s.value), s.unit)
				}
			}
		}
	}
	c.writeReport(stdout, st, loadBefore, loads, time.Since(started), res, report)
	return nil
}

func (c *config) writeReport(w io.Writer, st settings, loadBefore string, loads *loadSamples, took time.Duration, res *results, report *textReport) {
	mode := "full"
	if c.quick {
		mode = "quick"
	}
	fmt.Fprintf(w, "rheo vs river benchmark (%s mode), %d round(s), took %s\n", mode, c.rounds, took.Round(time.Second))
	fmt.Fprintf(w, "machine: %d CPUs, %s; load average before %s, after %s; 1-minute load at the start of each run %s\n",
		st.CPUs, st.GoVersion, loadBefore, loadAverage(), loads)
	fmt.Fprintf(w, "postgresql: %s; shared_buffers=%s synchronous_commit=%s fsync=%s wal_level=%s max_connections=%s autovacuum_naptime=%s\n",
		st.Version, st.SharedBuffers, st.SynchronousCommit, st.Fsync, st.WALLevel, st.MaxConnections, st.AutovacuumNaptime)
	if st.Redis != "" {
		fmt.Fprintf(w, "redis: %s; Rheo on Redis (driver/redis) in the append, drain, latency and memory workloads, memory n=%d\n",
			st.Redis, c.redisSizes.memoryN)
	}
	fmt.Fprintf(w, "sizes: n=%d (drain: at most %d per handler slot), append producers=%d, latency %s per rate with %d producer(s) at concurrency %d, fan-out n=%d at concurrency %d per group, cost n=%d at concurrency %d, scale %s fetching the last %d, ops %s events in %s partition(s), %s behind, %s in flight, %d calls per figure\n",
		c.n, drainPerHandler, c.producers, c.latencyDuration, c.latencyProducers, c.latencyConcurrency, c.fanoutN, c.fanoutConcurrency,
		c.costN, c.costConcurrency, (*intList)(&c.scale).String(), c.scaleFetched,
		count(c.opsEvents), (*intList)(&c.opsPartitions).String(), count(c.opsBehind), count(c.opsInflight), c.opsCalls)
	z, p := c.workerSizes, c.processSizes
	fmt.Fprintf(w, "worker sizes: slow n=%d, competing n=%d on %d partitions by %d workers x c=%d (pools of %d), processes n=%d on %d partitions by %d processes x c=%d (pools of %d, and a listener connection each), each beside one worker at their total concurrency on a pool of %d\n",
		z.slowN, z.competingN, z.competingPartitions, z.competingWorkers, z.competingConcurrency, poolConns/z.competingWorkers,
		p.n, p.partitions, p.procs, p.concurrency, p.conns, poolConns)
	if slices.ContainsFunc(c.workloads, func(w string) bool { return contains(optInWorkloads, w) }) {
		fmt.Fprintf(w, "retention sizes: %s\n", &c.retention)
	}
	fmt.Fprintln(w)
	res.writeTable(w)
	fmt.Fprintln(w)
	report.write(w)
	res.writeSummary(w)
	c.writeThroughput(w, res)
}

// withRheo runs f on a fresh Rheo database.
func (s *server) withRheo(ctx context.Context, f func(*rheoSystem) error) error {
	db, release, err := s.fresh(ctx, systemRheo)
	if err != nil {
		return err
	}
	defer release()
	sys := newRheo(db)
	defer sys.close()
	return f(sys)
}

// withRiver runs f on a fresh River database.
func (s *server) withRiver(ctx context.Context, f func(*riverSystem) error) error {
	db, release, err := s.fresh(ctx, systemRiver)
	if err != nil {
		return err
	}
	defer release()
	return f(newRiver(db))
}
