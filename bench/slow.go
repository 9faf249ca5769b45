package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rheo-go/rheo"
)

// sleeper is the slow workload's handler: it sleeps for d, or until its
// context ends, and adds the time it took to spent.
type sleeper struct {
	d     time.Duration
	spent atomic.Int64 // nanoseconds in the handler, summed over the runs
}

func (s *sleeper) sleep(ctx context.Context) error {
	start := time.Now()
	defer func() { s.spent.Add(int64(time.Since(start))) }()
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// slowResult is one slow run: the time to the last settle and the time
// spent in the handlers.
type slowResult struct {
	d     time.Duration
	spent time.Duration
}

// slow appends n events (untimed) and times one worker whose handler
// sleeps for d, with the given concurrency, from its start to the n-th
// committed ack.
func (s *rheoSystem) slow(ctx context.Context, n, concurrency int, d time.Duration) (slowResult, error) {
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return slowResult{}, err
	}
	if err := s.appendAll(ctx, stream, n); err != nil {
		return slowResult{}, err
	}
	if err := s.drv.CreateGroup(ctx, stream, "slow", nil); err != nil {
		return slowResult{}, err
	}
	h := &sleeper{d: d}
	acks := newCounter(n)
	start := time.Now()
	stop, err := s.startWorker(ctx, stream, "slow", concurrency, func(ctx context.Context, _ rheo.Lease) error {
		return h.sleep(ctx)
	}, acks)
	if err != nil {
		return slowResult{}, err
	}
	err = acks.wait(ctx, drainTimeout)
	elapsed := time.Since(start)
	if serr := stop(); err == nil {
		err = serr
	}
	return slowResult{d: elapsed, spent: time.Duration(h.spent.Load())}, err
}

// slow inserts n jobs (untimed) and times one client whose workers sleep
// for d, with concurrency workers, from its start to the n-th durable
// completion.
func (s *riverSystem) slow(ctx context.Context, n, concurrency int, d time.Duration) (slowResult, error) {
	h := &sleeper{d: d}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, _ *river.Job[benchArgs]) error {
		return h.sleep(ctx)
	}))
	client, err := s.client(map[string]int{river.QueueDefault: concurrency}, workers)
	if err != nil {
		return slowResult{}, err
	}
	elapsed, err := s.timeClient(ctx, client, n)
	return slowResult{d: elapsed, spent: time.Duration(h.spent.Load())}, err
}

// timeClient inserts n bench jobs (untimed) and times client from its
// start to the n-th durable completion.
func (s *riverSystem) timeClient(ctx context.Context, client *river.Client[pgx.Tx], n int) (time.Duration, error) {
	if err := s.insertJobs(ctx, client, n, 1000, 1, insertManyFast, ""); err != nil {
		return 0, err
	}
	wait, cancel := completions(ctx, client, n)
	defer cancel()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	err := wait()
	elapsed := time.Since(start)
	if serr := client.Stop(context.WithoutCancel(ctx)); err == nil {
		err = serr
	}
	return elapsed, err
}

// slowSamples are the rate of a slow-handler run; its fraction of the
// nominal ideal (every handler slot sleeping all the time, each sleep
// taking exactly --slow-sleep); the ideal from the measured handler time
// (the slots over the mean time a handler took: what the slots allow
// with handlers as slow as they were) and the rate's fraction of it; the
// mean handler time; and the share of the slots' time spent in handlers.
// The fraction of the measured ideal is that share, as a rate: n / d over
// slots × n / spent.
func (c *config) slowSamples(n int, r slowResult) []sample {
	name := c.slowName()
	rate := perSecond(n, r.d)
	ideal := float64(c.slowConcurrency) / c.slowSleep.Seconds()
	handler := r.spent.Seconds() / float64(n)
	measured := float64(c.slowConcurrency) / handler
	return []sample{
		{name, "events/s", rate},
		{name + " of ideal " + strconv.Itoa(int(ideal)) + "/s", "%", 100 * rate / ideal},
		{name + " ideal from handler time", "events/s", measured},
		{name + " of ideal from handler time", "%", 100 * rate / measured},
		{name + " handler time", "ms", 1000 * handler},
		{name + " slots in handlers", "%", 100 * float64(r.spent) / (float64(r.d) * float64(c.slowConcurrency))},
	}
}

// slowName is the name of the slow workload's figures.
func (z workerSizes) slowName() string {
	return fmt.Sprintf("slow %s c=%d", z.slowSleep, z.slowConcurrency)
}

// slowMeasurement is the drain of a handler that sleeps --slow-sleep at
// --slow-concurrency: what the worker reaches of the rate its slots
// allow.
func (c *config) slowMeasurement() measurement {
	return measurement{
		label: c.slowName(),
		rheo: c.onRheo(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
			r, err := s.slow(ctx, c.slowN, c.slowConcurrency, c.slowSleep)
			return c.slowSamples(c.slowN, r), err
		}),
		river: c.onRiver(func(ctx context.Context, s *riverSystem) ([]sample, error) {
			r, err := s.slow(ctx, c.slowN, c.slowConcurrency, c.slowSleep)
			return c.slowSamples(c.slowN, r), err
		}),
	}
}

// workerSizes are the sizes of the slow and competing workloads.
type workerSizes struct {
	slowN                int
	slowSleep            time.Duration
	slowConcurrency      int
	competingN           int
	competingPartitions  int
	competingWorkers     int
	competingConcurrency int
}

// workerFlags defines the flags of the slow and competing workloads.
func (c *config) workerFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.slowN, "slow-n", 50_000, "events of the slow-handler workload")
	fs.DurationVar(&c.slowSleep, "slow-sleep", 5*time.Millisecond, "how long the slow workload's handler sleeps")
	fs.IntVar(&c.slowConcurrency, "slow-concurrency", 64, "handler concurrency of the slow workload")
	fs.IntVar(&c.competingN, "competing-n", 100_000, "events of the competing-workers workload")
	fs.IntVar(&c.competingPartitions, "competing-partitions", 4, "partitions of the competing workload's stream (Rheo)")
	fs.IntVar(&c.competingWorkers, "competing-workers", 4, "workers (River: clients) of the competing workload, each on its own pool")
	fs.IntVar(&c.competingConcurrency, "competing-concurrency", 16, "handler concurrency of each competing worker")
}

// check validates the sizes.
func (z workerSizes) check() error {
	switch {
	case z.slowN < 1 || z.slowConcurrency < 1 || z.competingN < 1 || z.competingPartitions < 1 ||
		z.competingWorkers < 1 || z.competingConcurrency < 1:
		return errors.New("counts must be at least 1")
	case z.slowSleep <= 0:
		return errors.New("--slow-sleep must be positive")
	case z.competingWorkers > poolConns:
		return fmt.Errorf("--competing-workers must not exceed %d, the connections shared among them", poolConns)
	}
	return nil
}
