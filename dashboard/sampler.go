package dashboard

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rheo-go/rheo/driver"
)

// sample is one sampled value.
type sample struct {
	At    time.Time
	Value int64
}

// ring keeps the last len(buf) samples.
type ring struct {
	buf   []sample
	start int
	n     int
}

func newRing(size int) *ring { return &ring{buf: make([]sample, size)} }

func (r *ring) add(s sample) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = s
		r.n++
		return
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % len(r.buf)
}

// all returns the samples oldest first.
func (r *ring) all() []sample {
	out := make([]sample, r.n)
	for i := range r.n {
		out[i] = r.buf[(r.start+i)%len(r.buf)]
	}
	return out
}

type groupKey struct{ stream, group string }

// sampler samples every stream's high watermarks (summed over its
// partitions) and every group's lag, and keeps the last size samples of
// each. Streams and groups that disappear are forgotten at the next round.
type sampler struct {
	ops     driver.Ops
	size    int
	timeout time.Duration
	logger  *slog.Logger
	clock   driver.Clock

	mu      sync.Mutex
	streams map[string]*ring
	groups  map[groupKey]*ring
	failing bool
	rounds  int
}

func newSampler(ops driver.Ops, size int, timeout time.Duration, logger *slog.Logger, clock driver.Clock) *sampler {
	return &sampler{
		ops: ops, size: size, timeout: timeout, logger: logger, clock: clock,
		streams: map[string]*ring{}, groups: map[groupKey]*ring{},
	}
}

// run samples at once and then every interval on the sampler's clock,
// counted from the end of the previous round, until ctx ends.
func (s *sampler) run(ctx context.Context, interval time.Duration) {
	for {
		s.round(ctx)
		due, release := s.clock.At(s.clock.Now().Add(interval))
		select {
		case <-ctx.Done():
			release()
			return
		case <-due:
			release()
		}
	}
}

// round takes one sample of everything. A stream or group whose call
// fails keeps its history but gets no sample this round.
func (s *sampler) round(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	streams, err := s.ops.ListStreams(ctx)
	if err != nil {
		s.failed(ctx, err)
		return
	}
	now := s.clock.Now()
	hw := map[string]int64{}
	lag := map[groupKey]int64{}
	// listed holds the groups of the streams whose groups were listed.
	listed := map[string]map[string]bool{}
	var firstErr error
	for _, st := range streams {
		info, err := s.ops.StreamInfo(ctx, st.Name)
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		var total int64
		for _, p := range info.Partitions {
			total += p.HighWatermark
		}
		hw[st.Name] = total
		groups, err := s.ops.ListGroups(ctx, st.Name)
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		listed[st.Name] = map[string]bool{}
		for _, g := range groups {
			listed[st.Name][g.Name] = true
			l, err := s.ops.Lag(ctx, st.Name, g.Name, nil)
			if err != nil {
				firstErr = cmpErr(firstErr, err)
				continue
			}
			lag[groupKey{st.Name, g.Name}] = l.Total
		}
	}
	if firstErr != nil {
		s.failed(ctx, firstErr)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.rounds++
	if s.failing && firstErr == nil {
		s.failing = false
		s.logger.InfoContext(ctx, "dashboard: sampling works again")
	}
	known := map[string]bool{}
	for _, st := range streams {
		known[st.Name] = true
	}
	for name := range s.streams {
		if !known[name] {
			delete(s.streams, name)
		}
	}
	for k := range s.groups {
		if names, ok := listed[k.stream]; !known[k.stream] || ok && !names[k.group] {
			delete(s.groups, k)
		}
	}
	for name, v := range hw {
		r := s.streams[name]
		if r == nil {
			r = newRing(s.size)
			s.streams[name] = r
		}
		r.add(sample{At: now, Value: v})
	}
	for k, v := range lag {
		r := s.groups[k]
		if r == nil {
			r = newRing(s.size)
			s.groups[k] = r
		}
		r.add(sample{At: now, Value: v})
	}
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// failed logs the first failure of a run of failing rounds.
func (s *sampler) failed(ctx context.Context, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil && context.Cause(ctx) == context.Canceled {
		return // stopping
	}
	if !s.failing {
		s.failing = true
		s.logger.WarnContext(ctx, "dashboard: sampling failed; the rates and charts miss samples until it works again",
			LogKeyError, err)
	}
}

// streamSeries returns the sampled high watermark totals of stream.
func (s *sampler) streamSeries(stream string) []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.streams[stream]; r != nil {
		return r.all()
	}
	return nil
}

// groupSeries returns the sampled lag of a group.
func (s *sampler) groupSeries(stream, group string) []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.groups[groupKey{stream, group}]; r != nil {
		return r.all()
	}
	return nil
}

// rate returns the events per second appended to stream over about the
// last window, from its samples, and false while there are fewer than two.
func (s *sampler) rate(stream string, window time.Duration) (float64, bool) {
	series := s.streamSeries(stream)
	if len(series) < 2 {
		return 0, false
	}
	last := series[len(series)-1]
	first := series[0]
	for _, smp := range series {
		if last.At.Sub(smp.At) <= window {
			first = smp
			break
		}
	}
	if first.At.Equal(last.At) {
		first = series[len(series)-2]
	}
	dt := last.At.Sub(first.At).Seconds()
	if dt <= 0 {
		return 0, false
	}
	return max(0, float64(last.Value-first.Value)/dt), true
}
