package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// sample is one value of one figure.
type sample struct {
	name  string
	unit  string
	value float64
}

// measurement is one workload variant: what each system runs in one
// round, each on fresh databases, and the figures it yields. River is nil
// for figures of Rheo alone; redis (Rheo on Redis) is nil for workloads
// it does not run, or when it does not run at all.
type measurement struct {
	label string
	once  bool // one round only, whatever --rounds says
	rheo  func(ctx context.Context) ([]sample, error)
	river func(ctx context.Context) ([]sample, error)
	redis func(ctx context.Context) ([]sample, error)
}

// onRheo runs f on a fresh Rheo database.
func (c *config) onRheo(f func(ctx context.Context, s *rheoSystem) ([]sample, error)) func(context.Context) ([]sample, error) {
	return func(ctx context.Context) (samples []sample, err error) {
		err = c.srv.withRheo(ctx, func(s *rheoSystem) error {
			samples, err = f(ctx, s)
			return err
		})
		return samples, err
	}
}

// onRiver runs f on a fresh River database.
func (c *config) onRiver(f func(ctx context.Context, s *riverSystem) ([]sample, error)) func(context.Context) ([]sample, error) {
	return func(ctx context.Context) (samples []sample, err error) {
		err = c.srv.withRiver(ctx, func(s *riverSystem) error {
			samples, err = f(ctx, s)
			return err
		})
		return samples, err
	}
}

// drainPerHandler caps the events of a drain run at this many per handler
// slot, so that low concurrencies, which drain slowly, take seconds, not
// minutes.
const drainPerHandler = 10_000

// drainEvents is the number of events a drain run at concurrency conc
// consumes: n, capped at drainPerHandler per handler slot.
func (c *config) drainEvents(conc int) int { return min(c.n, drainPerHandler*conc) }

func perSecond(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// plan lists the measurements the configuration asks for, in order.
func (c *config) plan(report *textReport) []measurement {
	var plan []measurement
	if c.runs("append") {
		for _, batch := range c.batches {
			plan = append(plan, c.appendMeasurement(batch))
		}
	}
	if c.runs("drain") {
		for _, conc := range c.concurrency {
			name := "drain c=" + strconv.Itoa(conc)
			n := c.drainEvents(conc)
			rheoDrain := func(ctx context.Context, s *rheoSystem) ([]sample, error) {
				d, err := s.drain(ctx, n, conc)
				return []sample{{name, "events/s", perSecond(n, d)}}, err
			}
			plan = append(plan, measurement{
				label: name,
				rheo:  c.onRheo(rheoDrain),
				river: c.onRiver(func(ctx context.Context, s *riverSystem) ([]sample, error) {
					d, err := s.drain(ctx, n, conc)
					return []sample{{name, "events/s", perSecond(n, d)}}, err
				}),
				redis: c.onRedis(rheoDrain),
			})
		}
	}
	if c.runs("slow") {
		plan = append(plan, c.slowMeasurement())
	}
	if c.runs("competing") {
		plan = append(plan, c.competingMeasurement())
	}
	if c.runs(workloadProcesses) {
		plan = append(plan, c.processesMeasurement())
	}
	if c.runs("latency") {
		for _, rate := range c.rates {
			plan = append(plan, c.latencyMeasurement(rate))
		}
	}
	if c.runs("fanout") {
		plan = append(plan, c.fanoutMeasurement())
	}
	if c.runs("cost") {
		plan = append(plan, c.costMeasurement(report))
	}
	if c.runs("scale") {
		plan = append(plan, c.scaleMeasurement())
	}
	if c.runs("ops") {
		plan = append(plan, c.opsMeasurement(report))
	}
	if c.runs("ordering") {
		plan = append(plan, c.orderingMeasurements()...)
	}
	if c.runs(workloadMemory) && c.redis != nil {
		plan = append(plan, c.memoryMeasurement())
	}
	plan = append(plan, c.retentionPlan(report)...)
	if c.runs(workloadCitus) {
		plan = append(plan, c.citusMeasurement(report))
	}
	return plan
}

func (c *config) appendMeasurement(batch int) measurement {
	name := "append b=" + strconv.Itoa(batch)
	rheoAppend := func(ctx context.Context, s *rheoSystem) ([]sample, error) {
		d, err := s.appendEvents(ctx, c.n, batch, c.producers)
		if err != nil {
			return nil, err
		}
		if batch == 1 {
			return []sample{{name, "events/s", perSecond(c.n, d)}}, nil
		}
		// One Rheo sample, compared with each River batch call.
		v := perSecond(c.n, d)
		return []sample{{name + " vs InsertMany", "events/s", v}, {name + " vs InsertManyFast", "events/s", v}}, nil
	}
	m := measurement{
		label: name,
		rheo:  c.onRheo(rheoAppend),
		redis: c.onRedis(rheoAppend),
	}
	if batch > 1 {
		// The raw insert ceiling beside it, on a fresh database of its
		// own, so that both start from an empty table.
		m.rheo = func(ctx context.Context) ([]sample, error) {
			samples, err := c.onRheo(rheoAppend)(ctx)
			if err != nil {
				return nil, err
			}
			err = c.srv.withRheo(ctx, func(s *rheoSystem) error {
				d, err := s.rawInsert(ctx, c.n, batch, c.producers)
				samples = append(samples, sample{name + " raw insert", "events/s", perSecond(c.n, d)})
				return err
			})
			return samples, err
		}
	}
	m.river = c.onRiver(func(ctx context.Context, s *riverSystem) ([]sample, error) {
		if batch == 1 {
			d, err := s.appendEvents(ctx, c.n, 1, c.producers, insertMany)
			return []sample{{name, "events/s", perSecond(c.n, d)}}, err
		}
		many, err := s.appendEvents(ctx, c.n, batch, c.producers, insertMany)
		if err != nil {
			return nil, err
		}
		// A second fresh database, so that the table is empty again.
		var fast time.Duration
		err = c.srv.withRiver(ctx, func(s *riverSystem) error {
			fast, err = s.appendEvents(ctx, c.n, batch, c.producers, insertManyFast)
			return err
		})
		return []sample{
			{name + " vs InsertMany", "events/s", perSecond(c.n, many)},
			{name + " vs InsertManyFast", "events/s", perSecond(c.n, fast)},
		}, err
	})
	return m
}

// fanoutResult is one fan-out run.
type fanoutResult struct {
	d   time.Duration
	wal int64
}

// fanoutSamples turns the runs for each group count into figures: the
// deliveries per second and WAL per delivery of each, and what one group
// more costs per event, from the smallest to the largest group count.
func (c *config) fanoutSamples(runs []fanoutResult) []sample {
	var samples []sample
	for i, g := range c.groups {
		name := "fanout groups=" + strconv.Itoa(g)
		samples = append(samples,
			sample{name, "deliveries/s", perSecond(c.fanoutN*g, runs[i].d)},
			sample{name + " WAL", "bytes/delivery", float64(runs[i].wal) / float64(c.fanoutN*g)})
	}
	if len(c.groups) > 1 {
		first, last := 0, len(c.groups)-1
		extra := float64((c.groups[last] - c.groups[first]) * c.fanoutN)
		samples = append(samples,
			sample{"fanout extra group time", "µs/event", micros(runs[last].d-runs[first].d) / extra},
			sample{"fanout extra group WAL", "bytes/event", float64(runs[last].wal-runs[first].wal) / extra})
	}
	return samples
}

func (c *config) fanoutMeasurement() measurement {
	return measurement{
		label: "fanout",
		rheo: func(ctx context.Context) ([]sample, error) {
			runs := make([]fanoutResult, len(c.groups))
			for i, g := range c.groups {
				err := c.srv.withRheo(ctx, func(s *rheoSystem) (err error) {
					runs[i].d, runs[i].wal, err = s.fanout(ctx, c.fanoutN, g, c.fanoutConcurrency)
					return err
				})
				if err != nil {
					return nil, err
				}
			}
			return c.fanoutSamples(runs), nil
		},
		river: func(ctx context.Context) ([]sample, error) {
			runs := make([]fanoutResult, len(c.groups))
			for i, g := range c.groups {
				err := c.srv.withRiver(ctx, func(s *riverSystem) (err error) {
					runs[i].d, runs[i].wal, err = s.fanout(ctx, c.fanoutN, g, c.fanoutConcurrency)
					return err
				})
				if err != nil {
					return nil, err
				}
			}
			return c.fanoutSamples(runs), nil
		},
	}
}

func latencySamples(rate int, delays []time.Duration) []sample {
	name := fmt.Sprintf("latency %d/s", rate)
	return []sample{
		{name + " p50", "ms", millis(percentile(delays, 50))},
		{name + " p90", "ms", millis(percentile(delays, 90))},
		{name + " p99", "ms", millis(percentile(delays, 99))},
		{name + " max", "ms", millis(percentile(delays, 100))},
	}
}

func (c *config) latencyMeasurement(rate int) measurement {
	rheoLatency := func(ctx context.Context, s *rheoSystem) ([]sample, error) {
		delays, err := s.latency(ctx, rate, c.latencyDuration, c.latencyProducers, c.latencyConcurrency)
		return latencySamples(rate, delays), err
	}
	return measurement{
		label: fmt.Sprintf("latency %d/s", rate),
		rheo:  c.onRheo(rheoLatency),
		river: c.onRiver(func(ctx context.Context, s *riverSystem) ([]sample, error) {
			delays, err := s.latency(ctx, rate, c.latencyDuration, c.latencyProducers, c.latencyConcurrency)
			return latencySamples(rate, delays), err
		}),
		redis: c.onRedis(rheoLatency),
	}
}

func costSamples(r costResult, n int, hot []string) []sample {
	all, dead := totals(r.drained)
	samples := []sample{
		{"cost drain", "events/s", perSecond(n, r.drain)},
		{"cost WAL append", "bytes/event", r.appendWAL},
		{"cost WAL consume", "bytes/event", r.consumeWAL},
		{"cost all tables+indexes after drain", "MB", float64(all) / mb},
		{"cost dead tuples after drain", "tuples", float64(dead)},
	}
	if hot != nil {
		hotBytes, _ := totals(r.drained, hot...)
		vacuumed, _ := totals(r.vacuumed, hot...)
		samples = append(samples,
			sample{"cost deliveries+indexes after drain", "MB", float64(hotBytes) / mb},
			sample{"cost deliveries+indexes after VACUUM", "MB", float64(vacuumed) / mb})
	}
	return samples
}

func (c *config) costMeasurement(report *textReport) measurement {
	label := fmt.Sprintf("cost n=%d", c.costN)
	return measurement{
		label: label,
		rheo: c.onRheo(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
			r, err := s.cost(ctx, c.costN, c.costConcurrency)
			if err != nil {
				return nil, err
			}
			report.add(fmt.Sprintf("rheo relations after draining %d events:", c.costN), relationsText(r.drained))
			report.add("rheo relations after VACUUM of the bookkeeping tables:", relationsText(r.vacuumed))
			return costSamples(r, c.costN, []string{"deliveries"}), nil
		}),
		river: c.onRiver(func(ctx context.Context, s *riverSystem) ([]sample, error) {
			r, err := s.cost(ctx, c.costN, c.costConcurrency)
			if err != nil {
				return nil, err
			}
			report.add(fmt.Sprintf("river relations after working %d jobs:", c.costN), relationsText(r.drained))
			report.add("river relations after VACUUM river_job:", relationsText(r.vacuumed))
			return costSamples(r, c.costN, nil), nil
		}),
	}
}

// scaleMeasurement is Rheo only: the fetch time per lease on streams of
// each size, and the ratio of the largest to the smallest.
func (c *config) scaleMeasurement() measurement {
	return measurement{
		label: "scale",
		once:  true,
		rheo: func(ctx context.Context) ([]sample, error) {
			var samples []sample
			var first, last time.Duration
			for i, size := range c.scale {
				var perLease time.Duration
				err := c.srv.withRheo(ctx, func(s *rheoSystem) (err error) {
					perLease, err = s.scale(ctx, size, min(size, c.scaleFetched), func(loaded int) {
						if loaded%1_000_000 == 0 {
							c.logf("  scale: loaded %d of %d events", loaded, size)
						}
					})
					return err
				})
				if err != nil {
					return nil, err
				}
				samples = append(samples, sample{"fetch per lease, stream of " + count(size), "µs", micros(perLease)})
				if i == 0 {
					first = perLease
				}
				last = perLease
			}
			if len(c.scale) > 1 {
				samples = append(samples, sample{
					"fetch per lease " + count(c.scale[len(c.scale)-1]) + "/" + count(c.scale[0]), "ratio",
					float64(last) / float64(first)})
			}
			return samples, nil
		},
	}
}

// opsMeasurement is Rheo only, as River has no consumer groups over a
// log: for a stream of each partition count, the time of every call of
// each operation, and a table of the calls' counters for the report.
func (c *config) opsMeasurement(report *textReport) measurement {
	return measurement{
		label: "ops",
		once:  true,
		rheo: func(ctx context.Context) ([]sample, error) {
			var samples []sample
			for _, partitions := range c.opsPartitions {
				z := opsSizes{events: c.opsEvents, partitions: partitions, behind: c.opsBehind,
					inflight: c.opsInflight, calls: c.opsCalls}
				var figures []opsFigure
				err := c.srv.withRheo(ctx, func(s *rheoSystem) (err error) {
					figures, err = s.ops(ctx, z, func(loaded int) {
						if loaded%1_000_000 == 0 {
							c.logf("  ops: loaded %d of %d events", loaded, z.events)
						}
					})
					return err
				})
				if err != nil {
					return nil, err
				}
				for _, f := range figures {
					for _, ms := range f.milliseconds() {
						samples = append(samples, sample{"ops " + f.name + ", " + z.String(), "ms", ms})
					}
				}
				report.add(fmt.Sprintf("rheo ops on %s (River has no equivalent): per call, the deltas of "+
					"pg_stat_user_tables, pg_stat_user_indexes (idx_tup_read) and pg_statio_user_tables (buffers: "+
					"heap and index blocks hit or read) around the calls on the measuring connection; "+
					"load: the 1-minute load average at the first call:", z),
					opsText(figures))
			}
			return samples, nil
		},
	}
}

// count writes 10000 as 10k and 10000000 as 10M.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	default:
		return strconv.Itoa(n)
	}
}
