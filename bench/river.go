package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// River's fetch pacing, as River's own benchmark (cmd/river bench) sets
// it for throughput; its defaults (100ms cooldown, 1s poll) are tuned for
// a light database load instead.
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
)

// riverSystem runs the workloads with River clients.
type riverSystem struct {
	db *database
}

func newRiver(db *database) *riverSystem { return &riverSystem{db: db} }

// benchArgs is the job of the throughput workloads.
type benchArgs struct {
	N int `json:"n"`
}

func (benchArgs) Kind() string { return "bench" }

// latencyArgs carries the job's index and intended send time.
type latencyArgs struct {
	I int   `json:"i"`
	T int64 `json:"t"` // intended send time, Unix nanoseconds
}

func (latencyArgs) Kind() string { return "latency" }

// client returns a River client; with queues (name → workers) it can
// work jobs, without it only insert.
func (s *riverSystem) client(queues map[string]int, workers *river.Workers) (*river.Client[pgx.Tx], error) {
	config := &river.Config{Logger: slog.New(slog.DiscardHandler)}
	if queues != nil {
		config.FetchCooldown = riverFetchCooldown
		config.FetchPollInterval = riverFetchPollInterval
		config.Queues = map[string]river.QueueConfig{}
		for q, n := range queues {
			config.Queues[q] = river.QueueConfig{MaxWorkers: n}
		}
		config.Workers = workers
	}
	return river.NewClient(riverpgxv5.New(s.db.pool), config)
}

// insertMode is the River call used for a batch.
type insertMode int

const (
	insertMany     insertMode = iota // InsertMany: returns the inserted rows
	insertManyFast                   // InsertManyFast: COPY, returns a count
)

// insertJobs inserts n bench jobs into queue with producers goroutines,
// in calls of batch jobs (Insert when batch is 1).
func (s *riverSystem) insertJobs(ctx context.Context, client *river.Client[pgx.Tx], n, batch, producers int, mode insertMode, queue string) error {
	var opts *river.InsertOpts
	if queue != "" {
		opts = &river.InsertOpts{Queue: queue}
	}
	return runProducers(ctx, n, producers, batch, func(ctx context.Context, _ int, first, count int) error {
		if batch == 1 {
			_, err := client.Insert(ctx, benchArgs{N: first}, opts)
			return err
		}
		params := make([]river.InsertManyParams, count)
		for i := range params {
			params[i] = river.InsertManyParams{Args: benchArgs{N: first + i}, InsertOpts: opts}
		}
		var err error
		if mode == insertManyFast {
			_, err = client.InsertManyFast(ctx, params)
		} else {
			_, err = client.InsertMany(ctx, params)
		}
		return err
	})
}

// appendEvents times the insertion of n jobs.
func (s *riverSystem) appendEvents(ctx context.Context, n, batch, producers int, mode insertMode) (time.Duration, error) {
	client, err := s.client(nil, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	err = s.insertJobs(ctx, client, n, batch, producers, mode, "")
	return time.Since(start), err
}

// completions counts completed jobs from a subscription until n.
func completions(ctx context.Context, client *river.Client[pgx.Tx], n int) (wait func() error, cancel func()) {
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1, // River drops events when a subscriber's buffer is full
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	return func() error {
		t := time.NewTimer(drainTimeout)
		defer t.Stop()
		for seen := 0; seen < n; {
			select {
			case e, ok := <-events:
				if !ok {
					return fmt.Errorf("subscription closed with %d of %d completed", seen, n)
				}
				if e.Kind != river.EventKindJobCompleted {
					return fmt.Errorf("job %d failed", e.Job.ID)
				}
				seen++
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return fmt.Errorf("timed out after %s with %d of %d completed", drainTimeout, seen, n)
			}
		}
		return nil
	}, cancel
}

func noopWorkers() *river.Workers {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[benchArgs]) error { return nil }))
	return workers
}

// drain inserts n jobs (untimed) and times one client with concurrency
// workers from its start to the n-th durable completion.
func (s *riverSystem) drain(ctx context.Context, n, concurrency int) (time.Duration, error) {
	client, err := s.client(map[string]int{river.QueueDefault: concurrency}, noopWorkers())
	if err != nil {
		return 0, err
	}
	if err := s.insertJobs(ctx, client, n, 1000, 1, insertManyFast, ""); err != nil {
		return 0, err
	}
	wait, cancel := completions(ctx, client, n)
	defer cancel()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	err = wait()
	elapsed := time.Since(start)
	if serr := client.Stop(context.WithoutCancel(ctx)); err == nil {
		err = serr
	}
	return elapsed, err
}

// fanout inserts one job per event and group (one queue per group) and
// works them all with concurrency workers per queue. It returns the time
// and the WAL written from the first insert to the last completion.
func (s *riverSystem) fanout(ctx context.Context, n, groups, concurrency int) (d time.Duration, wal int64, err error) {
	queues := map[string]int{}
	for g := range groups {
		queues["g"+strconv.Itoa(g)] = concurrency
	}
	client, err := s.client(queues, noopWorkers())
	if err != nil {
		return 0, 0, err
	}
	wait, cancel := completions(ctx, client, n*groups)
	defer cancel()
	lsn0, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	for q := range queues {
		if err := s.insertJobs(ctx, client, n, 1000, 1, insertManyFast, q); err != nil {
			return 0, 0, err
		}
	}
	if err := client.Start(ctx); err != nil {
		return 0, 0, err
	}
	err = wait()
	d = time.Since(start)
	if serr := client.Stop(context.WithoutCancel(ctx)); err == nil {
		err = serr
	}
	if err != nil {
		return 0, 0, err
	}
	lsn1, err := walLSN(ctx, s.db.pool)
	return d, lsn1 - lsn0, err
}

// latency runs an open-loop producer at rate jobs/s for d and returns, per
// job, the time from its intended send time to its worker's start.
func (s *riverSystem) latency(ctx context.Context, rate int, d time.Duration, producers, concurrency int) ([]time.Duration, error) {
	n := int(float64(rate) * d.Seconds())
	rec := newRecorder(n)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, j *river.Job[latencyArgs]) error {
		rec.record(j.Args.I, time.Unix(0, j.Args.T))
		return nil
	}))
	client, err := s.client(map[string]int{river.QueueDefault: concurrency}, workers)
	if err != nil {
		return nil, err
	}
	wait, cancel := completions(ctx, client, n)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = client.Stop(context.WithoutCancel(ctx)) }()
	err = openLoop(ctx, n, rate, producers, func(ctx context.Context, _ int, due []scheduled) error {
		if len(due) == 1 {
			_, err := client.Insert(ctx, latencyArgs{I: due[0].i, T: due[0].at.UnixNano()}, nil)
			return err
		}
		params := make([]river.InsertManyParams, len(due))
		for i, e := range due {
			params[i] = river.InsertManyParams{Args: latencyArgs{I: e.i, T: e.at.UnixNano()}}
		}
		_, err := client.InsertManyFast(ctx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := wait(); err != nil {
		return nil, err
	}
	return rec.samples()
}

// cost inserts n jobs and works them with one client, measuring the WAL
// written by each step and the size of every table and index after the
// drain, and again after a VACUUM of river_job.
func (s *riverSystem) cost(ctx context.Context, n, concurrency int) (costResult, error) {
	var r costResult
	client, err := s.client(map[string]int{river.QueueDefault: concurrency}, noopWorkers())
	if err != nil {
		return r, err
	}
	lsn0, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return r, err
	}
	if err := s.insertJobs(ctx, client, n, 1000, 1, insertManyFast, ""); err != nil {
		return r, err
	}
	lsn1, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return r, err
	}
	wait, cancel := completions(ctx, client, n)
	defer cancel()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return r, err
	}
	err = wait()
	r.drain = time.Since(start)
	if serr := client.Stop(context.WithoutCancel(ctx)); err == nil {
		err = serr
	}
	if err != nil {
		return r, err
	}
	lsn2, err := walLSN(ctx, s.db.pool)
	if err != nil {
		return r, err
	}
	r.appendWAL = float64(lsn1-lsn0) / float64(n)
	r.consumeWAL = float64(lsn2-lsn1) / float64(n)
	time.Sleep(statsFlushWait)
	if r.drained, err = relations(ctx, s.db.pool, "public"); err != nil {
		return r, err
	}
	if _, err := s.db.pool.Exec(ctx, "VACUUM river_job"); err != nil {
		return r, err
	}
	time.Sleep(statsFlushWait)
	r.vacuumed, err = relations(ctx, s.db.pool, "public")
	return r, err
}
