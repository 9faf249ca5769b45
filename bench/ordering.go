package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/worker"
)

// The ordering workload (BENCHMARKS.md, "Ordering"): 'key' against
// 'none' on the same load, in the same round.
const (
	orderingPartitions = 8
	orderingKeys       = 1000
	hotKey             = "hot"
)

// orderingMeasurements are the ordering workload's variants: a drain of
// orderingN events over 1,000 keys on 8 partitions at orderingConcurrency
// in each mode (River: its plain drain of as many jobs, the nearest it
// has), a drain where one key holds half the events (the figure is the
// rate of the other keys), and, once, the fetch time per lease of the
// other keys as the hot key's blocked backlog grows.
func (c *config) orderingMeasurements() []measurement {
	conc := c.orderingConc
	n := c.orderingN
	var plan []measurement
	for _, o := range []rheo.Ordering{rheo.OrderingNone, rheo.OrderingKey} {
		name := fmt.Sprintf("ordering %s 1000 keys c=%d", o, conc)
		m := measurement{
			label: name,
			rheo: c.onRheo(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
				d, err := s.orderedDrain(ctx, n, conc, o, 0)
				return []sample{{name, "events/s", perSecond(n, d)}}, err
			}),
		}
		if o == rheo.OrderingNone {
			// River has no per-key ordering in its free edition: its
			// nearest figure is the unordered drain of as many jobs.
			m.river = c.onRiver(func(ctx context.Context, s *riverSystem) ([]sample, error) {
				d, err := s.drain(ctx, n, conc)
				return []sample{{name, "events/s", perSecond(n, d)}}, err
			})
		}
		plan = append(plan, m)
	}
	for _, o := range []rheo.Ordering{rheo.OrderingNone, rheo.OrderingKey} {
		name := fmt.Sprintf("ordering %s hot key 50%% c=%d, other keys", o, conc)
		plan = append(plan, measurement{
			label: name,
			rheo: c.onRheo(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
				d, err := s.orderedDrain(ctx, n, conc, o, n/2)
				return []sample{{name, "events/s", perSecond(n-n/2, d)}}, err
			}),
		})
	}
	plan = append(plan, measurement{
		label: "ordering key fetch behind a hot key",
		once:  true,
		rheo: c.onRheo(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
			var samples []sample
			for _, backlog := range c.orderingBacklogs {
				d, err := s.fetchBehindHotKey(ctx, backlog, c.orderingFetched, func(msg string) {
					c.logf("ordering: hot key backlog %s: %s", count(backlog), msg)
				})
				if err != nil {
					return nil, err
				}
				samples = append(samples, sample{"ordering key fetch per lease, hot backlog " + count(backlog), "us", micros(d)})
			}
			return samples, nil
		}),
	})
	return plan
}

// orderingKey is the key of event i of an ordering load: hot for the
// first hot events of every 2 (interleaved), else one of 1,000 keys.
func orderingKey(i, hot, n int) string {
	if hot > 0 && i%2 == 0 && i/2 < hot {
		return hotKey
	}
	return "key-" + strconv.Itoa(i%orderingKeys)
}

// orderedDrain appends n keyed events (untimed) to a stream of 8
// partitions, hot of them, interleaved, of one key, and times one worker
// of a group with the given ordering from its start until every event of
// the other keys is acked (all n when hot is 0).
func (s *rheoSystem) orderedDrain(ctx context.Context, n, concurrency int, ordering rheo.Ordering, hot int) (time.Duration, error) {
	stream, err := s.stream(ctx, orderingPartitions)
	if err != nil {
		return 0, err
	}
	err = runProducers(ctx, n, 1, 1000, func(ctx context.Context, _ int, first, count int) error {
		items := make([]rheo.BatchItem, count)
		for i := range items {
			items[i] = rheo.BatchItem{Payload: benchPayload(first + i), Key: orderingKey(first+i, hot, n)}
		}
		_, err := s.drv.AppendBatch(ctx, stream, items, nil)
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := s.drv.CreateGroup(ctx, stream, "ordered", &rheo.CreateGroupOptions{Ordering: ordering}); err != nil {
		return 0, err
	}
	others := &keyCounter{counter: newCounter(n - hot), skip: hotKey}
	if hot == 0 {
		others.skip = ""
	}
	start := time.Now()
	w, err := worker.New(s.drv, &worker.Config{
		Stream:      stream,
		Group:       "ordered",
		Handler:     noopHandler,
		Concurrency: concurrency,
		Hooks:       []any{others},
	})
	if err != nil {
		return 0, err
	}
	if err := w.Start(ctx); err != nil {
		return 0, err
	}
	err = others.wait(ctx, drainTimeout)
	elapsed := time.Since(start)
	if serr := w.Stop(context.WithoutCancel(ctx)); err == nil {
		err = serr
	}
	return elapsed, err
}

// keyCounter counts the acks of events whose key is not skip.
type keyCounter struct {
	*counter
	skip string
}

// Acked implements worker.AckedHook.
func (k *keyCounter) Acked(ctx context.Context, info worker.AckInfo) {
	if k.skip == "" || info.Lease.Event.Key != k.skip {
		k.counter.Acked(ctx, info)
	}
}

// fetchBehindHotKey builds, in a 'key' group of a stream of one
// partition, a backlog of the given length of one hot key blocked behind
// that key's first event, leased and held; then appends m events of other
// keys and drains them with fetches of 100 and ack_batch (rheoSystem's
// fetchPerLease). It returns the median fetch time per lease.
func (s *rheoSystem) fetchBehindHotKey(ctx context.Context, backlog, m int, progress func(string)) (time.Duration, error) {
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return 0, err
	}
	conn, err := s.db.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET rheo.notify = 'off'"); err != nil {
		return 0, err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "RESET rheo.notify") }()
	// One event more than the backlog: the first is the one held.
	for done := 0; done <= backlog; done += loadChunk {
		size := min(loadChunk, backlog+1-done)
		if _, err := conn.Exec(ctx, `SELECT count(*) FROM rheo.append_batch($1,
			(SELECT jsonb_agg(jsonb_build_object('type', 'bench', 'n', g) ORDER BY g) FROM generate_series(1, $2::int) AS g),
			keys => array_fill($3::text, ARRAY[$2::int]))`, stream, size, hotKey); err != nil {
			return 0, err
		}
	}
	if err := s.drv.CreateGroup(ctx, stream, "ordered", &rheo.CreateGroupOptions{Ordering: rheo.OrderingKey}); err != nil {
		return 0, err
	}
	// The first fetch leases the hot key's first event; the next ones
	// pass its backlog, storing it as blocked.
	var passed int64
	for {
		var next, high int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM rheo.fetch($1, 'ordered', max_count => 10000, lease_ms => 3600000)`,
			stream).Scan(new(int64)); err != nil {
			return 0, err
		}
		if err := conn.QueryRow(ctx, `SELECT c.next_sequence, pt.high_watermark FROM rheo.cursors c
			JOIN rheo.groups g ON g.group_id = c.group_id
			JOIN rheo.partitions pt ON pt.stream = g.stream AND pt."partition" = c."partition"
			WHERE g.stream = $1`, stream).Scan(&next, &high); err != nil {
			return 0, err
		}
		passed = next - 1
		if next > high {
			break
		}
	}
	progress(fmt.Sprintf("%d events passed, blocked behind the first", passed))
	if _, err := conn.Exec(ctx, `SELECT count(*) FROM rheo.append_batch($1,
		(SELECT jsonb_agg(jsonb_build_object('type', 'bench', 'n', g) ORDER BY g) FROM generate_series(1, $2::int) AS g),
		keys => (SELECT array_agg('cold-' || g ORDER BY g) FROM generate_series(1, $2::int) AS g))`, stream, m); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) rheo.events, rheo.deliveries"); err != nil {
		return 0, err
	}
	return s.fetchPerLease(ctx, stream, "ordered", m)
}
