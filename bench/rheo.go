package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/worker"
)

// rheoSystem runs the workloads with a Rheo driver and the worker: the
// PostgreSQL driver (db and pg set), or another driver opened by URL
// (the Redis driver, for the figures of systemRedis), which runs the
// workloads that need nothing but driver.Driver.
type rheoSystem struct {
	db  *database
	drv driver.Driver
	// pg is drv on PostgreSQL, nil on another database.
	pg *postgres.Driver
}

func newRheo(db *database) *rheoSystem {
	pg := postgres.New(db.pool, nil)
	return &rheoSystem{db: db, drv: pg, pg: pg}
}

func (s *rheoSystem) close() { _ = s.drv.Close() }

// benchPayload is the event of the throughput workloads.
func benchPayload(i int) json.RawMessage {
	return json.RawMessage(`{"type":"bench","n":` + strconv.Itoa(i) + `}`)
}

// latencyPayload carries the event's index and intended send time.
type latencyPayload struct {
	Type string `json:"type"`
	I    int    `json:"i"`
	T    int64  `json:"t"` // intended send time, Unix nanoseconds
}

// stream creates a stream with partitions partitions and returns its name.
func (s *rheoSystem) stream(ctx context.Context, partitions int) (string, error) {
	name := randomName("bench")
	return name, s.drv.CreateStream(ctx, name, partitions)
}

// appendEvents appends n events with producers goroutines, each writing
// its own partition in calls of batch events (Append when batch is 1).
func (s *rheoSystem) appendEvents(ctx context.Context, n, batch, producers int) (time.Duration, error) {
	stream, err := s.stream(ctx, producers)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	err = runProducers(ctx, n, producers, batch, func(ctx context.Context, producer int, first, count int) error {
		partition := producer
		if batch == 1 {
			_, err := s.drv.Append(ctx, stream, benchPayload(first), &rheo.AppendOptions{Partition: &partition})
			return err
		}
		items := make([]rheo.BatchItem, count)
		for i := range items {
			items[i] = rheo.BatchItem{Payload: benchPayload(first + i)}
		}
		_, err := s.drv.AppendBatch(ctx, stream, items, &rheo.AppendBatchOptions{Partition: &partition})
		return err
	})
	return time.Since(start), err
}

// appendAll appends n events to stream in calls of 1000, one producer.
func (s *rheoSystem) appendAll(ctx context.Context, stream string, n int) error {
	return runProducers(ctx, n, 1, 1000, func(ctx context.Context, _ int, first, count int) error {
		items := make([]rheo.BatchItem, count)
		for i := range items {
			items[i] = rheo.BatchItem{Payload: benchPayload(first + i)}
		}
		_, err := s.drv.AppendBatch(ctx, stream, items, nil)
		return err
	})
}

// counter closes done when it has been told of n acks.
type counter struct {
	n    int64
	seen atomic.Int64
	done chan struct{}
}

func newCounter(n int) *counter { return &counter{n: int64(n), done: make(chan struct{})} }

// Acked implements worker.AckedHook.
func (c *counter) Acked(context.Context, worker.AckInfo) {
	if c.seen.Add(1) == c.n {
		close(c.done)
	}
}

// wait waits for the count, ctx or timeout.
func (c *counter) wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("timed out after %s with %d of %d acked", timeout, c.seen.Load(), c.n)
	}
}

// startWorker starts a worker of group on stream with a handler and an
// ack counter; stop stops it.
func (s *rheoSystem) startWorker(ctx context.Context, stream, group string, concurrency int, handler worker.Handler, acks *counter) (stop func() error, err error) {
	w, err := worker.New(s.drv, &worker.Config{
		Stream:      stream,
		Group:       group,
		Handler:     handler,
		Concurrency: concurrency,
		Hooks:       []any{acks},
	})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return func() error { return w.Stop(context.WithoutCancel(ctx)) }, nil
}

func noopHandler(context.Context, rheo.Lease) error { return nil }

// drain appends n events (untimed) and times one worker with the given
// concurrency from its start to the n-th committed ack.
func (s *rheoSystem) drain(ctx context.Context, n, concurrency int) (time.Duration, error) {
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return 0, err
	}
	if err := s.appendAll(ctx, stream, n); err != nil {
		return 0, err
	}
	if err := s.drv.CreateGroup(ctx, stream, "drain", nil); err != nil {
		return 0, err
	}
	return s.consume(ctx, stream, "drain", n, concurrency)
}

// consume times one worker of group with the given concurrency from its
// start to the n-th committed ack.
func (s *rheoSystem) consume(ctx context.Context, stream, group string, n, concurrency int) (time.Duration, error) {
	acks := newCounter(n)
	start := time.Now()
	stop, err := s.startWorker(ctx, stream, group, concurrency, noopHandler, acks)
	if err != nil {
		return 0, err
	}
	err = acks.wait(ctx, drainTimeout)
	elapsed := time.Since(start)
	if serr := stop(); err == nil {
		err = serr
	}
	return elapsed, err
}

// fanout appends n events and drains them with one worker per group, all
// at once. It returns the time and the WAL written from the first append
// to the last ack.
func (s *rheoSystem) fanout(ctx context.Context, n, groups, concurrency int) (d time.Duration, wal int64, err error) {
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return 0, 0, err
	}
	names := make([]string, groups)
	for g := range names {
		names[g] = "g" + strconv.Itoa(g)
		if err := s.drv.CreateGroup(ctx, stream, names[g], nil); err != nil {
			return 0, 0, err
		}
	}
	lsn0, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := s.appendAll(ctx, stream, n); err != nil {
		return 0, 0, err
	}
	acks := newCounter(n * groups)
	var stops []func() error
	defer func() {
		for _, stop := range stops {
			_ = stop()
		}
	}()
	for _, g := range names {
		stop, err := s.startWorker(ctx, stream, g, concurrency, noopHandler, acks)
		if err != nil {
			return 0, 0, err
		}
		stops = append(stops, stop)
	}
	if err := acks.wait(ctx, drainTimeout); err != nil {
		return 0, 0, err
	}
	d = time.Since(start)
	lsn1, err := walLSN(ctx, s.db.pool)
	return d, lsn1 - lsn0, err
}

// latency runs an open-loop producer at rate events/s for d and returns,
// per event, the time from its intended send time to its handler's start.
func (s *rheoSystem) latency(ctx context.Context, rate int, d time.Duration, producers, concurrency int) ([]time.Duration, error) {
	stream, err := s.stream(ctx, producers)
	if err != nil {
		return nil, err
	}
	if err := s.drv.CreateGroup(ctx, stream, "latency", nil); err != nil {
		return nil, err
	}
	n := int(float64(rate) * d.Seconds())
	rec := newRecorder(n)
	acks := newCounter(n)
	stop, err := s.startWorker(ctx, stream, "latency", concurrency, func(_ context.Context, l rheo.Lease) error {
		p := latencyPayload{I: -1}
		_ = json.Unmarshal(l.Event.Payload, &p) // a bad payload records index -1
		rec.record(p.I, time.Unix(0, p.T))
		return nil
	}, acks)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stop() }()
	err = openLoop(ctx, n, rate, producers, func(ctx context.Context, producer int, due []scheduled) error {
		partition := producer
		items := make([]rheo.BatchItem, len(due))
		for i, e := range due {
			b, _ := json.Marshal(latencyPayload{Type: "latency", I: e.i, T: e.at.UnixNano()})
			items[i] = rheo.BatchItem{Payload: b}
		}
		if len(items) == 1 {
			_, err := s.drv.Append(ctx, stream, items[0].Payload, &rheo.AppendOptions{Partition: &partition})
			return err
		}
		_, err := s.drv.AppendBatch(ctx, stream, items, &rheo.AppendBatchOptions{Partition: &partition})
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := acks.wait(ctx, drainTimeout); err != nil {
		return nil, err
	}
	return rec.samples()
}

// costResult is what a cost run measured.
type costResult struct {
	appendWAL  float64       // WAL bytes per event appended
	consumeWAL float64       // WAL bytes per event consumed by one group
	drain      time.Duration // from the worker's start to the last ack
	drained    []relation
	vacuumed   []relation
}

// cost appends n events and drains them with one worker, measuring the WAL
// written by each step and the size of every table and index after the
// drain, and again after a VACUUM of the bookkeeping tables.
func (s *rheoSystem) cost(ctx context.Context, n, concurrency int) (costResult, error) {
	var r costResult
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return r, err
	}
	if err := s.drv.CreateGroup(ctx, stream, "cost", nil); err != nil {
		return r, err
	}
	lsn0, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return r, err
	}
	if err := s.appendAll(ctx, stream, n); err != nil {
		return r, err
	}
	lsn1, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return r, err
	}
	if r.drain, err = s.consume(ctx, stream, "cost", n, concurrency); err != nil {
		return r, err
	}
	lsn2, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return r, err
	}
	r.appendWAL = float64(lsn1-lsn0) / float64(n)
	r.consumeWAL = float64(lsn2-lsn1) / float64(n)
	time.Sleep(statsFlushWait)
	if r.drained, err = relations(ctx, s.db.pool, "rheo"); err != nil {
		return r, err
	}
	if _, err := s.db.pool.Exec(ctx, "VACUUM rheo.deliveries, rheo.cursors, rheo.partitions, rheo.dead_letters"); err != nil {
		return r, err
	}
	time.Sleep(statsFlushWait)
	r.vacuumed, err = relations(ctx, s.db.pool, "rheo")
	return r, err
}

// loadChunk is the number of events of one append_batch call of scale's
// load, generated by the server.
const loadChunk = 10_000

// scaleGroups is how many groups each measure the fetches of a scale run,
// one after the other; the figure is the median of theirs.
const scaleGroups = 3

// scale loads size events into a new stream of one partition (generated
// by the server, without notifications), vacuums and analyzes the log as
// autovacuum would after such a load (so that it does not run during the
// measurement), then, for each of scaleGroups groups in turn, drains the
// last m events with fetches of 100 and ack_batch. It returns the median
// over the groups of the median fetch time per lease.
func (s *rheoSystem) scale(ctx context.Context, size, m int, progress func(loaded int)) (time.Duration, error) {
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return 0, err
	}
	if err := s.loadGenerated(ctx, stream, size, progress); err != nil {
		return 0, err
	}
	if _, err := s.db.pool.Exec(ctx, "VACUUM (ANALYZE) rheo.events"); err != nil {
		return 0, err
	}
	after := int64(size - m)
	var groups []float64
	for g := range scaleGroups {
		group := "scale" + strconv.Itoa(g)
		if err := s.drv.CreateGroup(ctx, stream, group, &rheo.CreateGroupOptions{StartAfter: &after}); err != nil {
			return 0, err
		}
		perLease, err := s.fetchPerLease(ctx, stream, group, m)
		if err != nil {
			return 0, err
		}
		groups = append(groups, float64(perLease))
	}
	return time.Duration(median(groups)), nil
}

// loadGenerated appends size events to stream in append_batch calls of
// loadChunk payloads generated by the server, with notifications off.
func (s *rheoSystem) loadGenerated(ctx context.Context, stream string, size int, progress func(loaded int)) error {
	conn, err := s.db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET rheo.notify = 'off'"); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "RESET rheo.notify") }()
	return appendGenerated(ctx, conn, stream, 1, size, 1, progress)
}

// appendGenerated appends events first..last to stream on conn, in
// statements of loadChunk payloads generated by the server, event n going
// to partition n mod partitions (one append_batch per partition).
func appendGenerated(ctx context.Context, conn *pgxpool.Conn, stream string, first, last, partitions int, progress func(loaded int)) error {
	for lo := first; lo <= last; lo += loadChunk {
		hi := min(lo+loadChunk-1, last)
		// coalesce: a partition with no event in the chunk gets an empty
		// batch, which appends nothing.
		if _, err := conn.Exec(ctx, `SELECT count(*) FROM generate_series(0, $4::int - 1) AS p
			CROSS JOIN LATERAL rheo.append_batch($1, coalesce(
				(SELECT jsonb_agg(jsonb_build_object('type', 'bench', 'n', g) ORDER BY g)
				   FROM generate_series($2::int, $3::int) AS g WHERE g % $4 = p), '[]'),
				"partition" => p)`, stream, lo, hi, partitions); err != nil {
			return err
		}
		progress(hi)
	}
	return nil
}

// fetchPerLease drains the m events group has left with fetches of 100
// and ack_batch, and returns the median fetch time per lease.
func (s *rheoSystem) fetchPerLease(ctx context.Context, stream, group string, m int) (time.Duration, error) {
	opts := &rheo.FetchOptions{MaxCount: 100, LeaseDuration: time.Minute}
	var perLease []float64
	for done := 0; done < m; {
		start := time.Now()
		leases, err := s.drv.Fetch(ctx, stream, group, opts)
		elapsed := time.Since(start)
		if err != nil {
			return 0, err
		}
		if len(leases) == 0 {
			return 0, fmt.Errorf("fetch found nothing with %d of %d events left", m-done, m)
		}
		perLease = append(perLease, float64(elapsed)/float64(len(leases)))
		ids := make([]string, len(leases))
		for i, l := range leases {
			ids[i] = l.LeaseID
		}
		if _, err := s.drv.AckBatch(ctx, ids); err != nil {
			return 0, err
		}
		done += len(leases)
	}
	return time.Duration(median(perLease)), nil
}
