package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/worker"
)

// ownPool opens a pool of conns connections on db, for one of several
// competing consumers, and opens every connection before it returns: the
// single consumer of the other workloads runs on the pool that loaded its
// events, so connecting would otherwise be timed here only.
func ownPool(ctx context.Context, db *database, conns int) (*pgxpool.Pool, error) {
	config, err := pgxpool.ParseConfig(db.url)
	if err != nil {
		return nil, err
	}
	config.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, err
	}
	held := make([]*pgxpool.Conn, 0, conns)
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, err
		}
		held = append(held, c)
	}
	return pool, nil
}

// competing appends n events over partitions partitions (untimed, by the
// server) and times workers workers of one group, each with the given
// concurrency and its own driver on its own pool of poolConns/workers
// connections, from their start to the n-th committed ack; it counts
// their fetch calls that began by then.
func (s *rheoSystem) competing(ctx context.Context, n, partitions, workers, concurrency int) (competingResult, error) {
	var r competingResult
	stream, err := s.loadCompeting(ctx, n, partitions)
	if err != nil {
		return r, err
	}
	total := newCounter(n)
	acks := make([]*lastAck, workers)
	fetches := &fetchRecorder{}
	var stops []func() error
	defer func() {
		for _, stop := range stops {
			_ = stop()
		}
	}()
	drivers := make([]*postgres.Driver, workers)
	for i := range drivers {
		pool, err := ownPool(ctx, s.db, poolConns/workers)
		if err != nil {
			return r, err
		}
		defer pool.Close()
		drivers[i] = postgres.New(pool, nil)
		defer drivers[i].Close()
		acks[i] = &lastAck{total: total}
	}
	start := time.Now()
	for i, drv := range drivers {
		w, err := worker.New(drv, &worker.Config{
			Stream: stream, Group: "competing", Handler: noopHandler,
			Concurrency: concurrency, Hooks: []any{acks[i], fetches},
		})
		if err != nil {
			return r, err
		}
		if err := w.Start(ctx); err != nil {
			return r, err
		}
		stops = append(stops, func() error { return w.Stop(context.WithoutCancel(ctx)) })
	}
	if err := total.wait(ctx, drainTimeout); err != nil {
		return r, err
	}
	var last int64
	for _, a := range acks {
		last = max(last, a.last.Load())
		r.shares = append(r.shares, a.n.Load())
	}
	r.d = time.Unix(0, last).Sub(start)
	r.fetches, r.countsFetches = fetchesBefore(fetches.snapshot(), last), true
	return r, nil
}

// competing inserts n jobs (untimed) and times workers River clients,
// each with concurrency workers and its own pool of poolConns/workers
// connections, from their start to the n-th durable completion.
func (s *riverSystem) competing(ctx context.Context, n, workers, concurrency int) (competingResult, error) {
	var r competingResult
	inserter, err := s.client(nil, nil)
	if err != nil {
		return r, err
	}
	if err := s.insertJobs(ctx, inserter, n, 1000, 1, insertManyFast, ""); err != nil {
		return r, err
	}
	total := make(chan struct{}, n)
	counts := make([]atomic.Int64, workers)
	clients := make([]*river.Client[pgx.Tx], workers)
	for i := range clients {
		pool, err := ownPool(ctx, s.db, poolConns/workers)
		if err != nil {
			return r, err
		}
		defer pool.Close()
		config := &river.Config{
			Logger:            slog.New(slog.DiscardHandler),
			FetchCooldown:     riverFetchCooldown,
			FetchPollInterval: riverFetchPollInterval,
			Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: concurrency}},
			Workers:           noopWorkers(),
		}
		if clients[i], err = river.NewClient(riverpgxv5.New(pool), config); err != nil {
			return r, err
		}
		events, cancel := clients[i].SubscribeConfig(&river.SubscribeConfig{
			ChanSize: n + 1,
			Kinds:    []river.EventKind{river.EventKindJobCompleted},
		})
		defer cancel()
		go func() {
			for range events {
				counts[i].Add(1)
				total <- struct{}{}
			}
		}()
	}
	start := time.Now()
	for _, client := range clients {
		if err := client.Start(ctx); err != nil {
			return r, err
		}
		defer func() { _ = client.Stop(context.WithoutCancel(ctx)) }()
	}
	timeout := time.NewTimer(drainTimeout)
	defer timeout.Stop()
	for seen := 0; seen < n; seen++ {
		select {
		case <-total:
		case <-ctx.Done():
			return r, ctx.Err()
		case <-timeout.C:
			return r, fmt.Errorf("timed out after %s with %d of %d completed", drainTimeout, seen, n)
		}
	}
	r.d = time.Since(start)
	for i := range counts {
		r.shares = append(r.shares, counts[i].Load())
	}
	return r, nil
}

// competingName is the name of the competing workload's figures.
func (z workerSizes) competingName() string {
	return fmt.Sprintf("competing %dx%d", z.competingWorkers, z.competingConcurrency)
}

// competingMeasurement drains one group with --competing-workers workers
// (River: clients) of --competing-concurrency each, every one on its own
// pool, all in this process; for Rheo, also the same events with one
// worker at their total concurrency on one pool of as many connections,
// on a fresh database.
func (c *config) competingMeasurement() measurement {
	z := c.workerSizes
	return measurement{
		label: z.competingName(),
		rheo: func(ctx context.Context) ([]sample, error) {
			var samples []sample
			err := c.srv.withRheo(ctx, func(s *rheoSystem) error {
				r, err := s.competing(ctx, z.competingN, z.competingPartitions, z.competingWorkers, z.competingConcurrency)
				samples = append(samples, competingSamples(z.competingName(), z.competingN, r)...)
				return err
			})
			if err != nil {
				return nil, err
			}
			conc := z.competingWorkers * z.competingConcurrency
			err = c.srv.withRheo(ctx, func(s *rheoSystem) error {
				r, err := s.single(ctx, z.competingN, z.competingPartitions, conc)
				samples = append(samples, competingSamples(singleName(conc), z.competingN, r)...)
				return err
			})
			return samples, err
		},
		river: c.onRiver(func(ctx context.Context, s *riverSystem) ([]sample, error) {
			r, err := s.competing(ctx, z.competingN, z.competingWorkers, z.competingConcurrency)
			if err != nil {
				return nil, err
			}
			return competingSamples(z.competingName(), z.competingN, r), nil
		}),
	}
}
