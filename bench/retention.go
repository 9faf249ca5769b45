package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/retention"
	"github.com/rheo-go/rheo/worker"
)

// The retention workloads (Rheo only, one round each). They take minutes
// at their full sizes, so they run only when --workloads names them.
const (
	workloadPrune        = "prune"
	workloadPruneLatency = "prunelatency"
	workloadHorizon      = "horizon"
)

// optInWorkloads run only when --workloads names them.
var optInWorkloads = []string{workloadPrune, workloadPruneLatency, workloadHorizon, workloadCitus, workloadThroughput}

// retentionSizes are the sizes of the retention workloads.
type retentionSizes struct {
	pruneN          int           // aged events appended, pruned, then appended again
	pruneTail       int           // young events after them: the prune keeps them, fetches read them
	latencyAged     int           // aged events in each of the prunelatency workload's two streams
	latencyRate     int           // events/s of the prunelatency runs' producer
	latencyDuration time.Duration // length of each prunelatency run
	horizonN        int           // events the horizon workload drains
	horizonHold     time.Duration // how long it holds a snapshot open while draining
	horizonRate     int           // the most settles per second while it holds it; 0: no limit
}

// flags registers the command-line flags of the retention workloads.
func (z *retentionSizes) flags(fs *flag.FlagSet) {
	fs.IntVar(&z.pruneN, "prune-n", 10_000_000, "aged events of the prune workload: appended, pruned, appended again")
	fs.IntVar(&z.pruneTail, "prune-tail", 10_000, "young events after the prune workload's aged ones; its fetch figures drain them")
	fs.IntVar(&z.latencyAged, "prunelatency-aged", 6_000_000, "aged events of each of the prunelatency workload's two streams, for its concurrent prunes to delete")
	fs.IntVar(&z.latencyRate, "prunelatency-rate", 1000, "events per second of the prunelatency workload's producer")
	fs.DurationVar(&z.latencyDuration, "prunelatency-duration", 10*time.Second, "duration of each prunelatency run")
	fs.IntVar(&z.horizonN, "horizon-n", 1_500_000, "events the horizon workload drains")
	fs.DurationVar(&z.horizonHold, "horizon-hold", 2*time.Minute, "how long the horizon workload holds a snapshot open while it drains (less when the drain ends sooner)")
	fs.IntVar(&z.horizonRate, "horizon-rate", 10_000, "the most events per second the horizon workload's handlers take while the snapshot is held (0: no limit); none after the release")
}

// retentionQuick are the --quick sizes of the retention workloads.
var retentionQuick = map[string]string{
	"prune-n": "20000", "prune-tail": "1000", "prunelatency-aged": "20000", "prunelatency-rate": "200",
	"prunelatency-duration": "1s", "horizon-n": "2000", "horizon-hold": "1s", "horizon-rate": "1000",
}

// check rejects sizes that no run could use.
func (z *retentionSizes) check() error {
	if z.pruneN < 1 || z.pruneTail < 1 || z.latencyAged < 1 || z.latencyRate < 1 || z.horizonN < 1 {
		return errors.New("counts must be at least 1")
	}
	if z.latencyDuration <= 0 {
		return errors.New("--prunelatency-duration must be positive")
	}
	if z.horizonHold <= 0 {
		return errors.New("--horizon-hold must be positive")
	}
	if z.horizonRate < 0 {
		return errors.New("--horizon-rate must not be negative")
	}
	return nil
}

// String is the sizes, for the report's header.
func (z *retentionSizes) String() string {
	rate := "no limit"
	if z.horizonRate > 0 {
		rate = fmt.Sprintf("at most %d/s", z.horizonRate)
	}
	return fmt.Sprintf("prune %s aged + %s young, prunelatency %s aged per stream at %d/s for %s per run, horizon %s with a snapshot held for %s (%s while held)",
		count(z.pruneN), count(z.pruneTail), count(z.latencyAged), z.latencyRate, z.latencyDuration,
		count(z.horizonN), z.horizonHold, rate)
}

// retentionPlan lists the retention measurements the configuration asks
// for.
func (c *config) retentionPlan(report *textReport) []measurement {
	var plan []measurement
	if c.runs(workloadPrune) {
		plan = append(plan, measurement{label: workloadPrune, once: true,
			rheo: c.onRheo(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
				return s.pruneCost(ctx, c.retention, report, c.logf)
			})})
	}
	if c.runs(workloadPruneLatency) {
		plan = append(plan, measurement{label: workloadPruneLatency, once: true,
			rheo: c.onRheo(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
				return s.pruneLatency(ctx, c.retention, c.latencyConcurrency, c.logf)
			})})
	}
	if c.runs(workloadHorizon) {
		plan = append(plan, measurement{label: workloadHorizon, once: true,
			rheo: c.onRheo(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
				return s.horizon(ctx, c.retention, c.latencyConcurrency, report, c.logf)
			})})
	}
	return plan
}

// agedBy is how far in the past the aged events are stamped; the streams
// keep events for retentionMaxAge, so every aged event may be pruned.
const (
	agedBy          = 30 * 24 * time.Hour
	retentionMaxAge = 7 * 24 * time.Hour
)

// pruneBatch is the events of one append_batch call of the prune
// workload, and the max_count of its prune calls (prune's default).
const pruneBatch = driverutil.DefaultPruneCount

// session is one connection of the server whose use of the server is
// measured: wall time, its backend's CPU time (read from /proc, when the
// server runs on this machine) and the active_time of the database in
// pg_stat_database (every statement of the database's sessions; the
// workload runs nothing else meanwhile).
type session struct {
	conn *pgxpool.Conn
	pid  int
}

// serverUse is what a step cost the server.
type serverUse struct {
	wall   time.Duration
	cpu    time.Duration // the backend's CPU time; valid when cpuOK
	cpuOK  bool
	active time.Duration // pg_stat_database.active_time
	wal    int64         // WAL bytes written, server-wide
}

func openSession(ctx context.Context, pool *pgxpool.Pool) (*session, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	s := &session{conn: conn}
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&s.pid); err != nil {
		conn.Release()
		return nil, err
	}
	return s, nil
}

// backendCPU is the CPU time the backend has used, from the first field
// of /proc/<pid>/schedstat (nanoseconds); ok is false when the server's
// processes are not visible from here.
func backendCPU(pid int) (cpu time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ns), true
}

// activeTime flushes the session's statistics and reads the database's
// active_time.
func (s *session) activeTime(ctx context.Context) (time.Duration, error) {
	if _, err := s.conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		return 0, err
	}
	var ms float64
	err := s.conn.QueryRow(ctx, `SELECT active_time FROM pg_stat_database WHERE datname = current_database()`).Scan(&ms)
	return time.Duration(ms * float64(time.Millisecond)), err
}

// measure runs f on the session and returns what it cost the server.
func (s *session) measure(ctx context.Context, f func(ctx context.Context) error) (serverUse, error) {
	var u serverUse
	active0, err := s.activeTime(ctx)
	if err != nil {
		return u, err
	}
	lsn0, err := s.walLSN(ctx)
	if err != nil {
		return u, err
	}
	cpu0, ok0 := backendCPU(s.pid)
	start := time.Now()
	if err := f(ctx); err != nil {
		return u, err
	}
	u.wall = time.Since(start)
	cpu1, ok1 := backendCPU(s.pid)
	u.cpu, u.cpuOK = cpu1-cpu0, ok0 && ok1
	lsn1, err := s.walLSN(ctx)
	if err != nil {
		return u, err
	}
	u.wal = lsn1 - lsn0
	active1, err := s.activeTime(ctx)
	u.active = active1 - active0
	return u, err
}

// walLSN is the server's WAL position in bytes.
func (s *session) walLSN(ctx context.Context) (int64, error) {
	var lsn int64
	err := s.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&lsn)
	return lsn, err
}

// samples are the figures of a step: wall, CPU and active time in s.
func (u serverUse) samples(name string) []sample {
	out := []sample{{name + " wall", "s", u.wall.Seconds()}}
	if u.cpuOK {
		out = append(out, sample{name + " backend CPU", "s", u.cpu.Seconds()})
	}
	return append(out, sample{name + " active_time", "s", u.active.Seconds()})
}

// vacuumSamples are the figures of a VACUUM: wall and CPU time in s.
// pg_stat_database.active_time counts little of a VACUUM's time (0.4 s
// of a VACUUM that ran for 22 s), so it is left out.
func (u serverUse) vacuumSamples(name string) []sample {
	out := []sample{{name + " wall", "s", u.wall.Seconds()}}
	if u.cpuOK {
		out = append(out, sample{name + " backend CPU", "s", u.cpu.Seconds()})
	}
	return out
}

// payloads is a JSON array of n benchmark payloads from index first.
func payloads(first, n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"bench","n":`)
		b.WriteString(strconv.Itoa(first + i))
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

// appendStamped appends n events to partition 0 of stream on the session
// in append_batch calls of pruneBatch payloads sent by the client, with
// clock (nil: the server's) as their ts.
func (s *session) appendStamped(ctx context.Context, stream string, n int, clock *time.Time, logf func(string, ...any)) error {
	for done := 0; done < n; {
		k := min(pruneBatch, n-done)
		var got int
		if err := s.conn.QueryRow(ctx, `SELECT count(*) FROM rheo.append_batch($1, $2::jsonb, "partition" => 0, clock => $3)`,
			stream, payloads(done, k), clock).Scan(&got); err != nil {
			return err
		}
		if got != k {
			return fmt.Errorf("append_batch of %d stored %d", k, got)
		}
		done += k
		if done%1_000_000 == 0 {
			logf("  appended %d of %d events", done, n)
		}
	}
	return nil
}

// pruneCalls is what a prune loop did.
type pruneCalls struct {
	deleted int64
	times   []time.Duration
}

// pruneAll calls rheo.prune(stream, pruneBatch) on the session until it
// returns 0.
func (s *session) pruneAll(ctx context.Context, stream string, r *pruneCalls, logf func(string, ...any)) error {
	for {
		start := time.Now()
		var n int64
		if err := s.conn.QueryRow(ctx, `SELECT rheo.prune($1, $2)`, stream, pruneBatch).Scan(&n); err != nil {
			return err
		}
		r.times = append(r.times, time.Since(start))
		if n == 0 {
			return nil
		}
		before := r.deleted
		r.deleted += n
		if r.deleted/1_000_000 > before/1_000_000 {
			logf("  pruned %d events", r.deleted)
		}
	}
}

// eventSizes are the bytes of rheo.events (heap), of its indexes, and of
// rheo.time_marks with its indexes.
type eventSizes struct{ heap, indexes, marks int64 }

func sizesOf(rels []relation) eventSizes {
	var z eventSizes
	for _, r := range rels {
		switch {
		case r.Table == "events" && r.Index:
			z.indexes += r.Bytes
		case r.Table == "events":
			z.heap += r.Bytes
		case r.Table == "time_marks":
			z.marks += r.Bytes
		}
	}
	return z
}

func (z eventSizes) samples(stage string) []sample {
	return []sample{
		{"prune events heap " + stage, "MB", float64(z.heap) / mb},
		{"prune events indexes " + stage, "MB", float64(z.indexes) / mb},
	}
}

// pruneCost measures, on one stream of one partition: the server time of
// appending z.pruneN aged events (then z.pruneTail young ones, untimed),
// of pruning the aged ones, of the VACUUM that makes their space
// reusable, and of appending z.pruneN events again; the sizes of the log
// after each step; and the fetch time per lease over the young events
// with 0 pruned before the cursor, z.pruneN pruned and not vacuumed, and
// vacuumed (scaleGroups groups each, placed after the aged events).
func (s *rheoSystem) pruneCost(ctx context.Context, z retentionSizes, report *textReport, logf func(string, ...any)) ([]sample, error) {
	sess, err := openSession(ctx, s.db.pool)
	if err != nil {
		return nil, err
	}
	defer sess.conn.Release()
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return nil, err
	}
	if err := s.drv.SetRetention(ctx, stream, retentionMaxAge); err != nil {
		return nil, err
	}
	var samples []sample
	aged := time.Now().Add(-agedBy)
	appended, err := sess.measure(ctx, func(ctx context.Context) error {
		return sess.appendStamped(ctx, stream, z.pruneN, &aged, logf)
	})
	if err != nil {
		return nil, err
	}
	samples = append(samples, appended.samples("prune append "+count(z.pruneN)+" aged")...)
	samples = append(samples, sample{"prune append WAL", "bytes/event", float64(appended.wal) / float64(z.pruneN)})
	if err := sess.appendStamped(ctx, stream, z.pruneTail, nil, logf); err != nil {
		return nil, err
	}
	// scaleGroups groups per fetch figure, all placed after the aged
	// events, so that none holds the prune back.
	after := int64(z.pruneN)
	groups := make([][]string, 3)
	for i := range groups {
		for g := range scaleGroups {
			name := "fetch" + strconv.Itoa(i) + "_" + strconv.Itoa(g)
			if err := s.drv.CreateGroup(ctx, stream, name, &rheo.CreateGroupOptions{StartAfter: &after}); err != nil {
				return nil, err
			}
			groups[i] = append(groups[i], name)
		}
	}
	// As autovacuum would after such a load (and as the scale workload
	// does), so that it does not run during the measurements.
	analyzed, err := sess.measure(ctx, func(ctx context.Context) error {
		_, err := sess.conn.Exec(ctx, "VACUUM (ANALYZE, PARALLEL 0) rheo.events, rheo.time_marks")
		return err
	})
	if err != nil {
		return nil, err
	}
	samples = append(samples, analyzed.vacuumSamples("prune VACUUM (ANALYZE) after the load")...)
	stages := []string{"after the load", "after the prune", "after VACUUM", "after a second VACUUM", "after appending " + count(z.pruneN) + " again"}
	var sizes []eventSizes
	snapshot := func(stage string) error {
		rels, err := relations(ctx, s.db.pool, "rheo")
		if err != nil {
			return err
		}
		report.add("rheo relations of the prune workload "+stage+":", relationsText(rels))
		sizes = append(sizes, sizesOf(rels))
		samples = append(samples, sizes[len(sizes)-1].samples(stage)...)
		return nil
	}
	// The median over the groups of each one's median fetch time per
	// lease, as in the scale workload.
	fetchFigure := func(groups []string, name string) (time.Duration, error) {
		var perLease []float64
		for _, g := range groups {
			d, err := s.fetchPerLease(ctx, stream, g, z.pruneTail)
			if err != nil {
				return 0, err
			}
			perLease = append(perLease, float64(d))
		}
		d := time.Duration(median(perLease))
		samples = append(samples, sample{"prune fetch per lease, " + name, "µs", micros(d)})
		return d, nil
	}
	if err := snapshot(stages[0]); err != nil {
		return nil, err
	}
	// One group drains the young events first, untimed: the first
	// fetches of the stream, on connections and caches that have not
	// fetched yet, are slower than any later ones, pruned or not.
	if err := s.drv.CreateGroup(ctx, stream, "warmup", &rheo.CreateGroupOptions{StartAfter: &after}); err != nil {
		return nil, err
	}
	if _, err := s.fetchPerLease(ctx, stream, "warmup", z.pruneTail); err != nil {
		return nil, err
	}
	before, err := fetchFigure(groups[0], "0 pruned")
	if err != nil {
		return nil, err
	}

	var calls pruneCalls
	pruned, err := sess.measure(ctx, func(ctx context.Context) error { return sess.pruneAll(ctx, stream, &calls, logf) })
	if err != nil {
		return nil, err
	}
	if calls.deleted != int64(z.pruneN) {
		return nil, fmt.Errorf("prune deleted %d events, want %d", calls.deleted, z.pruneN)
	}
	slices.Sort(calls.times)
	samples = append(samples, pruned.samples("prune prune "+count(z.pruneN))...)
	samples = append(samples, sample{"prune prune WAL", "bytes/event", float64(pruned.wal) / float64(z.pruneN)})
	samples = append(samples,
		sample{"prune prune calls", "calls", float64(len(calls.times))},
		sample{"prune prune call p50", "ms", millis(percentile(calls.times, 50))},
		sample{"prune prune call max", "ms", millis(percentile(calls.times, 100))},
		sample{"prune prune/append wall", "ratio", pruned.wall.Seconds() / appended.wall.Seconds()},
		sample{"prune prune/append active_time", "ratio", pruned.active.Seconds() / appended.active.Seconds()})
	if pruned.cpuOK && appended.cpuOK {
		samples = append(samples, sample{"prune prune/append backend CPU", "ratio", pruned.cpu.Seconds() / appended.cpu.Seconds()})
	}
	if err := snapshot(stages[1]); err != nil {
		return nil, err
	}
	notVacuumed, err := fetchFigure(groups[1], count(z.pruneN)+" pruned, before VACUUM")
	if err != nil {
		return nil, err
	}

	vacuumed, err := sess.measure(ctx, func(ctx context.Context) error {
		_, err := sess.conn.Exec(ctx, "VACUUM (PARALLEL 0) rheo.events, rheo.time_marks")
		return err
	})
	if err != nil {
		return nil, err
	}
	samples = append(samples, vacuumed.vacuumSamples("prune VACUUM after the prune")...)
	samples = append(samples, sample{"prune VACUUM WAL", "bytes/pruned event", float64(vacuumed.wal) / float64(z.pruneN)})
	samples = append(samples,
		sample{"prune (prune + VACUUM)/append wall", "ratio", (pruned.wall + vacuumed.wall).Seconds() / appended.wall.Seconds()})
	if pruned.cpuOK && vacuumed.cpuOK && appended.cpuOK {
		samples = append(samples, sample{"prune (prune + VACUUM)/append backend CPU", "ratio",
			(pruned.cpu + vacuumed.cpu).Seconds() / appended.cpu.Seconds()})
	}
	if err := snapshot(stages[2]); err != nil {
		return nil, err
	}
	afterVacuum, err := fetchFigure(groups[2], count(z.pruneN)+" pruned, after VACUUM")
	if err != nil {
		return nil, err
	}
	// A B-tree page that a VACUUM emptied and deleted can be reused only
	// once no snapshot that may still follow a link to it remains; the
	// pages that VACUUM could not yet hand over it leaves to the next one,
	// as autovacuum's next visit would.
	again2, err := sess.measure(ctx, func(ctx context.Context) error {
		_, err := sess.conn.Exec(ctx, "VACUUM (PARALLEL 0) rheo.events, rheo.time_marks")
		return err
	})
	if err != nil {
		return nil, err
	}
	samples = append(samples, again2.vacuumSamples("prune second VACUUM")...)
	if err := snapshot(stages[3]); err != nil {
		return nil, err
	}
	samples = append(samples,
		sample{"prune fetch per lease pruned/0, before VACUUM", "ratio", float64(notVacuumed) / float64(before)},
		sample{"prune fetch per lease pruned/0, after VACUUM", "ratio", float64(afterVacuum) / float64(before)})

	again, err := sess.measure(ctx, func(ctx context.Context) error {
		return sess.appendStamped(ctx, stream, z.pruneN, nil, logf)
	})
	if err != nil {
		return nil, err
	}
	samples = append(samples, again.samples("prune append "+count(z.pruneN)+" again")...)
	if err := snapshot(stages[4]); err != nil {
		return nil, err
	}
	// How much of what the prune freed the second load did not reuse: 0
	// when the log grew by nothing, 1 when it grew by all it had.
	loaded, reloaded := sizes[0], sizes[4]
	grown := float64(reloaded.heap+reloaded.indexes-loaded.heap-loaded.indexes) / float64(loaded.heap+loaded.indexes)
	samples = append(samples, sample{"prune growth of heap+indexes on appending again", "fraction of the loaded size", grown})
	return samples, nil
}

// callTimes collects the start times and durations of calls.
type callTimes struct {
	mu     sync.Mutex
	starts []time.Time
	times  []time.Duration
}

// add records a call that started at start and has just returned.
func (c *callTimes) add(start time.Time) {
	d := time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.starts = append(c.starts, start)
	c.times = append(c.times, d)
}

// within returns the durations of the calls that started in [from, to],
// sorted.
func (c *callTimes) within(from, to time.Time) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s []time.Duration
	for i, t := range c.starts {
		if !t.Before(from) && !t.After(to) {
			s = append(s, c.times[i])
		}
	}
	slices.Sort(s)
	return s
}

// timedDriver is the PostgreSQL driver with its Fetch calls timed; the
// worker uses it like the driver itself.
type timedDriver struct {
	*postgres.Driver
	fetches atomic.Pointer[callTimes]
}

// Fetch times the driver's Fetch into the current callTimes; a failed
// call is not counted.
func (d *timedDriver) Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
	start := time.Now()
	leases, err := d.Driver.Fetch(ctx, stream, group, opts)
	if err == nil {
		d.fetches.Load().add(start)
	}
	return leases, err
}

// startTimedWorker starts a worker of group on stream through drv, with
// handler and hooks; stop stops it.
func startTimedWorker(ctx context.Context, drv *timedDriver, stream, group string, concurrency int, handler worker.Handler, hooks ...any) (stop func() error, err error) {
	w, err := worker.New(drv, &worker.Config{
		Stream: stream, Group: group, Handler: handler, Concurrency: concurrency, Hooks: hooks,
	})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return func() error { return w.Stop(context.WithoutCancel(ctx)) }, nil
}

// latencyRun is one run of the prunelatency workload.
type latencyRun struct {
	appends, fetches callTimes
	// from and to are the window the figures cover: the whole run, or,
	// with a concurrent prune, the time it was busy.
	from, to time.Time
	delays   []time.Duration // from intended send time to handler start, of the events due in the window, sorted
	wal      int64           // WAL bytes written during the run, server-wide
	duration time.Duration   // of the whole run
	pruned   int64           // events the concurrent prune deleted
}

// pacedBatch and pacedPause are the paced prune of the prunelatency
// workload: batches of pacedBatch events, pacedPause apart (at most
// 100,000 events/s).
const (
	pacedBatch = 1000
	pacedPause = 10 * time.Millisecond
)

// pruneLoop calls rheo.prune(stream, batch) until it deletes nothing,
// it has deleted limit events (0: no limit) or ctx ends, pausing pause
// between calls, and returns how many it deleted.
func (s *rheoSystem) pruneLoop(ctx context.Context, stream string, batch int, pause time.Duration, limit int64) (int64, error) {
	var deleted int64
	for {
		n, err := s.drv.Prune(ctx, stream, &rheo.PruneOptions{MaxCount: batch})
		deleted += n
		if err != nil || n == 0 || (limit > 0 && deleted >= limit) {
			return deleted, err
		}
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return deleted, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// pruneLatency loads z.latencyAged aged events into the stream of the
// steady load, which its group has passed, and as many into another
// stream, and then runs the same steady load five times: a producer at
// z.latencyRate events/s (open loop, every call sending what is due) and
// a worker of the group at concurrency conc, for z.latencyDuration each.
// Meanwhile: nothing; a paced prune of the stream; a retention.Pruner,
// which prunes as fast as it can; the same pace of prune on the other
// stream only; nothing again. The figures are the append and fetch call
// times and the delay from intended send time to handler start: over the
// whole run without a prune, over the time the prune was busy with one.
func (s *rheoSystem) pruneLatency(ctx context.Context, z retentionSizes, conc int, logf func(string, ...any)) ([]sample, error) {
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return nil, err
	}
	other, err := s.stream(ctx, 1)
	if err != nil {
		return nil, err
	}
	// Only the steady stream has a retention, so that the Pruner prunes
	// it alone; the other stream is pruned by pruneLoop.
	if err := s.drv.SetRetention(ctx, stream, retentionMaxAge); err != nil {
		return nil, err
	}
	sess, err := openSession(ctx, s.db.pool)
	if err != nil {
		return nil, err
	}
	aged := time.Now().Add(-agedBy)
	err = sess.appendStamped(ctx, stream, z.latencyAged, &aged, logf)
	if err == nil {
		err = sess.appendStamped(ctx, other, z.latencyAged, &aged, logf)
	}
	if err == nil {
		_, err = sess.conn.Exec(ctx, "VACUUM (ANALYZE) rheo.events, rheo.time_marks")
	}
	sess.conn.Release()
	if err != nil {
		return nil, err
	}
	after := int64(z.latencyAged)
	if err := s.drv.CreateGroup(ctx, stream, "steady", &rheo.CreateGroupOptions{StartAfter: &after}); err != nil {
		return nil, err
	}
	pruner, err := retention.New(s.drv, &retention.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	paced := fmt.Sprintf("paced prune (%d per %s)", pacedBatch, pacedPause)
	runs := []struct {
		name  string
		prune func(ctx context.Context) (int64, error)
	}{
		{"without prune", nil},
		// At most half of the aged events, so that the Pruner has some
		// left (at full size the pace prunes fewer in a run anyway).
		{paced, func(ctx context.Context) (int64, error) {
			return s.pruneLoop(ctx, stream, pacedBatch, pacedPause, int64(z.latencyAged/2))
		}},
		{"Pruner", func(ctx context.Context) (int64, error) {
			infos, err := pruner.RunOnce(ctx)
			var n int64
			for _, info := range infos {
				n += info.Deleted
			}
			return n, err
		}},
		{"Pruner's pace on another stream", func(ctx context.Context) (int64, error) {
			if err := s.drv.SetRetention(ctx, other, retentionMaxAge); err != nil {
				return 0, err
			}
			return s.pruneLoop(ctx, other, retention.DefaultBatchSize, 0, 0)
		}},
		{"without prune, after", nil},
	}
	drv := &timedDriver{Driver: s.pg}
	var samples []sample
	for _, run := range runs {
		load := loadNow()
		r, err := s.steadyRun(ctx, drv, stream, z, conc, run.prune)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", run.name, err)
		}
		appends, fetches := r.appends.within(r.from, r.to), r.fetches.within(r.from, r.to)
		for _, f := range []struct {
			what  string
			times []time.Duration
		}{{"append call", appends}, {"fetch call", fetches}, {"send to handler", r.delays}} {
			for _, p := range []float64{50, 99, 100} {
				label := "p" + strconv.Itoa(int(p))
				if p == 100 {
					label = "max"
				}
				samples = append(samples, sample{"prunelatency " + f.what + " " + label + ", " + run.name, "ms", millis(percentile(f.times, p))})
			}
		}
		window := r.to.Sub(r.from)
		samples = append(samples,
			sample{"prunelatency window, " + run.name, "s", window.Seconds()},
			sample{"prunelatency fetch calls, " + run.name, "calls/s", float64(len(fetches)) / window.Seconds()},
			sample{"prunelatency WAL, " + run.name, "MB/s", float64(r.wal) / mb / r.duration.Seconds()},
			sample{"prunelatency load, " + run.name, "1-minute load", load})
		if run.prune != nil {
			samples = append(samples, sample{"prunelatency pruned, " + run.name, "events/s", float64(r.pruned) / window.Seconds()})
		}
		logf("  prunelatency %s: %d appends, %d fetches in %s, %d pruned", run.name, len(appends), len(fetches),
			window.Round(time.Millisecond), r.pruned)
	}
	return samples, nil
}

// loadNow is the 1-minute load average, NaN when unknown.
func loadNow() float64 {
	f := strings.Fields(loadAverage())
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// steadyRun is one run of the prunelatency workload.
// prune, when not nil, runs meanwhile from the start, until it returns
// or the producer is done.
func (s *rheoSystem) steadyRun(ctx context.Context, drv *timedDriver, stream string, z retentionSizes, conc int,
	prune func(ctx context.Context) (int64, error)) (*latencyRun, error) {
	r := &latencyRun{}
	drv.fetches.Store(&r.fetches)
	n := int(float64(z.latencyRate) * z.latencyDuration.Seconds())
	rec := newRecorder(n)
	sent := make([]atomic.Int64, n) // intended send times, Unix nanoseconds
	acks := newCounter(n)
	stop, err := startTimedWorker(ctx, drv, stream, "steady", conc, func(_ context.Context, l rheo.Lease) error {
		p := latencyPayload{I: -1}
		_ = json.Unmarshal(l.Event.Payload, &p) // a bad payload records index -1
		rec.record(p.I, time.Unix(0, p.T))
		if p.I >= 0 && p.I < n {
			sent[p.I].Store(p.T)
		}
		return nil
	}, acks)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stop() }()
	lsn0, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return nil, err
	}
	r.from = time.Now()
	pruneCtx, stopPrune := context.WithCancel(ctx)
	pruneDone := make(chan error, 1)
	if prune != nil {
		go func() {
			n, err := prune(pruneCtx)
			r.to = time.Now()
			r.pruned = n
			pruneDone <- err
		}()
	} else {
		pruneDone <- nil
	}
	err = openLoop(ctx, n, z.latencyRate, 1, func(ctx context.Context, _ int, due []scheduled) error {
		partition := 0
		items := make([]rheo.BatchItem, len(due))
		for i, e := range due {
			b, _ := json.Marshal(latencyPayload{Type: "latency", I: e.i, T: e.at.UnixNano()})
			items[i] = rheo.BatchItem{Payload: b}
		}
		start := time.Now()
		_, err := s.drv.AppendBatch(ctx, stream, items, &rheo.AppendBatchOptions{Partition: &partition})
		r.appends.add(start)
		return err
	})
	end := time.Now()
	r.duration = end.Sub(r.from)
	stopPrune()
	perr := <-pruneDone
	if err != nil {
		return nil, err
	}
	if perr != nil && !errors.Is(perr, context.Canceled) {
		return nil, fmt.Errorf("prune: %w", perr)
	}
	if prune != nil && r.pruned == 0 {
		return nil, errors.New("the concurrent prune deleted nothing during the run")
	}
	if r.to.IsZero() || r.to.After(end) {
		r.to = end
	}
	if err := acks.wait(ctx, drainTimeout); err != nil {
		return nil, err
	}
	lsn1, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return nil, err
	}
	r.wal = lsn1 - lsn0
	if _, err = rec.samples(); err != nil {
		return nil, err
	}
	for i, d := range rec.delays {
		if t := time.Unix(0, sent[i].Load()); !t.Before(r.from) && !t.After(r.to) {
			r.delays = append(r.delays, d)
		}
	}
	slices.Sort(r.delays)
	return r, nil
}

// hotTables are the bookkeeping tables that fetches and settles rewrite.
var hotTables = []string{"deliveries", "cursors", "partitions"}

// ackCount counts acks.
type ackCount struct{ n atomic.Int64 }

// Acked implements worker.AckedHook.
func (a *ackCount) Acked(context.Context, worker.AckInfo) { a.n.Add(1) }

// hotSizes are the bytes of each hot table with its indexes, and its
// dead tuples (as last reported by the backends).
type hotSizes struct {
	bytes map[string]int64
	dead  map[string]int64
}

func readHotSizes(ctx context.Context, pool *pgxpool.Pool) (hotSizes, error) {
	h := hotSizes{bytes: map[string]int64{}, dead: map[string]int64{}}
	rels, err := relations(ctx, pool, "rheo")
	if err != nil {
		return h, err
	}
	for _, t := range hotTables {
		h.bytes[t], h.dead[t] = totals(rels, t)
	}
	return h, nil
}

// horizonSample is the state of the horizon workload's drain at one
// moment, and its fetches since the sample before.
type horizonSample struct {
	at      time.Duration // since the drain started
	held    bool          // the snapshot was held through the interval
	acked   int64
	rate    float64 // acks per second over the interval
	fetches []time.Duration
	sizes   hotSizes
}

// pacer spaces its callers at least an interval apart, each waiting its
// turn, until released; it keeps no credit for time when nobody waited,
// so a slow spell is not followed by a burst.
type pacer struct {
	interval time.Duration // 0: no limit
	mu       sync.Mutex
	next     time.Time
	released atomic.Bool
}

// newPacer paces to rate calls per second; 0 is no limit.
func newPacer(rate int) *pacer {
	p := &pacer{}
	if rate > 0 {
		p.interval = time.Second / time.Duration(rate)
	}
	return p
}

// wait returns at the caller's turn, or when ctx ends.
func (p *pacer) wait(ctx context.Context) error {
	if p.interval == 0 || p.released.Load() {
		return nil
	}
	p.mu.Lock()
	at := time.Now()
	if p.next.After(at) {
		at = p.next
	}
	p.next = at.Add(p.interval)
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release ends the pacing: callers from now on do not wait.
func (p *pacer) release() { p.released.Store(true) }

// horizonIntervals is how many samples the hold is cut into.
const horizonIntervals = 6

// horizon appends z.horizonN events to a stream of one partition and
// drains them with one worker at concurrency conc while another session
// holds a REPEATABLE READ snapshot open (so that no row that died after
// it can be removed) for z.horizonHold, or until the drain ends; then it
// ends that transaction, and the worker goes on to the last event. While
// the snapshot is held the handlers take at most z.horizonRate events per
// second (when set), so that the hold lasts as long whatever the speed
// of the fetches, and its dead rows pile up at a known rate; after it,
// as fast as they can. It
// samples the acks, the fetch times and the sizes of the hot tables every
// z.horizonHold / horizonIntervals, and after a final VACUUM.
func (s *rheoSystem) horizon(ctx context.Context, z retentionSizes, conc int, report *textReport, logf func(string, ...any)) ([]sample, error) {
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return nil, err
	}
	if err := s.loadGenerated(ctx, stream, z.horizonN, func(loaded int) {
		if loaded%1_000_000 == 0 {
			logf("  horizon: loaded %d events", loaded)
		}
	}); err != nil {
		return nil, err
	}
	if _, err := s.db.pool.Exec(ctx, "VACUUM (ANALYZE) rheo.events, rheo.time_marks"); err != nil {
		return nil, err
	}
	if err := s.drv.CreateGroup(ctx, stream, "soak", nil); err != nil {
		return nil, err
	}
	holder, err := s.db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, err
	}
	defer func() { _ = holder.Rollback(context.WithoutCancel(ctx)) }()
	// The transaction's first read takes its snapshot, which it keeps.
	var holderPID int
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid() FROM rheo.streams LIMIT 1`).Scan(&holderPID); err != nil {
		return nil, err
	}
	var xmin *string
	if err := s.db.pool.QueryRow(ctx, `SELECT backend_xmin::text FROM pg_stat_activity WHERE pid = $1`, holderPID).Scan(&xmin); err != nil {
		return nil, err
	}
	if xmin == nil {
		return nil, errors.New("the snapshot holder has no xmin")
	}
	start0, err := readHotSizes(ctx, s.db.pool)
	if err != nil {
		return nil, err
	}
	timeline := []horizonSample{{held: true, sizes: start0}}

	drv := &timedDriver{Driver: s.pg}
	var fetches callTimes
	drv.fetches.Store(&fetches)
	acks := &ackCount{}
	done := newCounter(z.horizonN)
	pace := newPacer(z.horizonRate)
	start := time.Now()
	stop, err := startTimedWorker(ctx, drv, stream, "soak", conc, func(ctx context.Context, _ rheo.Lease) error {
		return pace.wait(ctx)
	}, acks, done)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stop() }()
	tick := time.NewTicker(z.horizonHold / horizonIntervals)
	defer tick.Stop()
	deadline := time.NewTimer(drainTimeout)
	defer deadline.Stop()
	held, released := true, time.Duration(0)
	for finished := false; !finished; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, fmt.Errorf("timed out with %d of %d acked", acks.n.Load(), z.horizonN)
		case <-done.done:
			finished = true
		case <-tick.C:
		}
		now := time.Now()
		prev := timeline[len(timeline)-1]
		h := horizonSample{at: now.Sub(start), held: held, acked: acks.n.Load(),
			fetches: fetches.within(start.Add(prev.at), now)}
		h.rate = float64(h.acked-prev.acked) / (h.at - prev.at).Seconds()
		if h.sizes, err = readHotSizes(ctx, s.db.pool); err != nil {
			return nil, err
		}
		timeline = append(timeline, h)
		logf("  horizon %5.1fs: %d acked, %.0f/s, snapshot held %t", h.at.Seconds(), h.acked, h.rate, held)
		if held && (h.at >= z.horizonHold || finished) {
			if err := holder.Rollback(ctx); err != nil {
				return nil, err
			}
			pace.release()
			held, released = false, h.at
		}
	}
	drainTime := time.Since(start)
	if err := stop(); err != nil {
		return nil, err
	}
	// What autovacuum's next visit leaves (it may also truncate the empty
	// end of a file, which the driver's vacuum does not).
	if _, err := s.db.pool.Exec(ctx, "VACUUM "+strings.Join(qualified(hotTables), ", ")); err != nil {
		return nil, err
	}
	time.Sleep(statsFlushWait)
	final, err := readHotSizes(ctx, s.db.pool)
	if err != nil {
		return nil, err
	}
	report.add(fmt.Sprintf("rheo horizon workload: draining %s events, a REPEATABLE READ snapshot held for the first %s "+
		"(table + indexes; dead tuples as last reported):", count(z.horizonN), released.Round(time.Second)),
		horizonText(timeline, final))

	samples := []sample{
		{"horizon snapshot held", "s", released.Seconds()},
		{"horizon drain of " + count(z.horizonN), "s", drainTime.Seconds()},
	}
	// The first and last interval of the hold, and the last of the drain.
	var heldLast horizonSample
	for _, h := range timeline[1:] {
		if h.held {
			heldLast = h
		}
	}
	for _, f := range []struct {
		name string
		h    horizonSample
	}{{"first interval, held", timeline[1]}, {"last interval, held", heldLast}, {"last interval, released", timeline[len(timeline)-1]}} {
		samples = append(samples,
			sample{"horizon drain rate, " + f.name, "events/s", f.h.rate},
			sample{"horizon fetch call p50, " + f.name, "ms", millis(percentile(f.h.fetches, 50))},
			sample{"horizon fetch call p99, " + f.name, "ms", millis(percentile(f.h.fetches, 99))})
	}
	for _, t := range hotTables {
		samples = append(samples,
			sample{"horizon " + t + " at the release", "MB", float64(heldLast.sizes.bytes[t]) / mb},
			sample{"horizon " + t + " at the end of the drain", "MB", float64(timeline[len(timeline)-1].sizes.bytes[t]) / mb},
			sample{"horizon " + t + " after VACUUM", "MB", float64(final.bytes[t]) / mb})
	}
	return samples, nil
}

func qualified(tables []string) []string {
	q := make([]string, len(tables))
	for i, t := range tables {
		q[i] = "rheo." + t
	}
	return q
}

// horizonText is the table of the horizon workload's samples.
func horizonText(timeline []horizonSample, final hotSizes) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %7s %-8s %9s %9s %9s %9s", "s", "snapshot", "acked", "acks/s", "fetch p50", "fetch p99")
	for _, t := range hotTables {
		fmt.Fprintf(&b, " %11s %9s", t, "dead")
	}
	b.WriteByte('\n')
	row := func(at, state, acked, rate, p50, p99 string, h hotSizes) {
		fmt.Fprintf(&b, "  %7s %-8s %9s %9s %9s %9s", at, state, acked, rate, p50, p99)
		for _, t := range hotTables {
			fmt.Fprintf(&b, " %11s %9d", humanBytes(h.bytes[t]), h.dead[t])
		}
		b.WriteByte('\n')
	}
	for i, h := range timeline {
		state := "released"
		if h.held {
			state = "held"
		}
		if i == 0 {
			row("0", state, "0", "", "", "", h.sizes)
			continue
		}
		row(format(h.at.Seconds()), state, strconv.FormatInt(h.acked, 10), format(h.rate),
			format(millis(percentile(h.fetches, 50))), format(millis(percentile(h.fetches, 99))), h.sizes)
	}
	row("", "VACUUM", "", "", "", "", final)
	return b.String()
}
