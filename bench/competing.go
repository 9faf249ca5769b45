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

// competingResult is one competing-workers run: the time to the last
// settle and how many events each worker (client) settled.
type competingResult struct {
	d      time.Duration
	shares []int64
}

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

// share counts the acks of one competing worker and tells the run's
// counter of each.
type share struct {
	n     atomic.Int64
	total *counter
}

// Acked implements worker.AckedHook.
func (s *share) Acked(ctx context.Context, info worker.AckInfo) {
	s.n.Add(1)
	s.total.Acked(ctx, info)
}

// competing appends n events over partitions partitions (untimed, by the
// server) and times workers workers of one group, each with the given
// concurrency and its own driver on its own pool of poolConns/workers
// connections, from their start to the n-th committed ack.
func (s *rheoSystem) competing(ctx context.Context, n, partitions, workers, concurrency int) (competingResult, error) {
	var r competingResult
	stream, err := s.stream(ctx, partitions)
	if err != nil {
		return r, err
	}
	conn, err := s.db.pool.Acquire(ctx)
	if err != nil {
		return r, err
	}
	err = appendGenerated(ctx, conn, stream, 1, n, partitions, func(int) {})
	conn.Release()
	if err != nil {
		return r, err
	}
	if err := s.drv.CreateGroup(ctx, stream, "competing", nil); err != nil {
		return r, err
	}
	total := newCounter(n)
	shares := make([]*share, workers)
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
		shares[i] = &share{total: total}
	}
	start := time.Now()
	for i, drv := range drivers {
		w, err := worker.New(drv, &worker.Config{
			Stream: stream, Group: "competing", Handler: noopHandler,
			Concurrency: concurrency, Hooks: []any{shares[i]},
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
	r.d = time.Since(start)
	for _, sh := range shares {
		r.shares = append(r.shares, sh.n.Load())
	}
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

// competingSamples are the total rate of a run and the smallest and
// largest share, in percent of an even share.
func (c *config) competingSamples(r competingResult) []sample {
	name := fmt.Sprintf("competing %dx%d", c.competingWorkers, c.competingConcurrency)
	even := float64(c.competingN) / float64(c.competingWorkers)
	lo, hi := r.shares[0], r.shares[0]
	for _, v := range r.shares {
		lo, hi = min(lo, v), max(hi, v)
	}
	return []sample{
		{name + " total", "events/s", perSecond(c.competingN, r.d)},
		{name + " smallest share", "% of even", 100 * float64(lo) / even},
		{name + " largest share", "% of even", 100 * float64(hi) / even},
	}
}

// competingMeasurement drains one group with --competing-workers workers
// (River: clients) of --competing-concurrency each, every one on its own
// pool, all in this process.
func (c *config) competingMeasurement() measurement {
	return measurement{
		label: fmt.Sprintf("competing %dx%d", c.competingWorkers, c.competingConcurrency),
		rheo: c.onRheo(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
			r, err := s.competing(ctx, c.competingN, c.competingPartitions, c.competingWorkers, c.competingConcurrency)
			if err != nil {
				return nil, err
			}
			return c.competingSamples(r), nil
		}),
		river: c.onRiver(func(ctx context.Context, s *riverSystem) ([]sample, error) {
			r, err := s.competing(ctx, c.competingN, c.competingWorkers, c.competingConcurrency)
			if err != nil {
				return nil, err
			}
			return c.competingSamples(r), nil
		}),
	}
}
