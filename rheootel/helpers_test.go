package rheootel_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/rheootel"
	"github.com/rheo-go/rheo/rheotest"
	"github.com/rheo-go/rheo/worker"
)

// waitTimeout bounds every wait for something the test expects.
const waitTimeout = 30 * time.Second

// streamSeq makes stream names unique within a test binary run.
var streamSeq atomic.Int64

// bundle is what a test works with: a traced driver on a fresh stream,
// the hooks, and in-memory exporters for both.
type bundle struct {
	raw    driver.Driver // the driver NewDriver wrapped
	drv    driver.Driver // the traced driver
	hooks  *rheootel.Hooks
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	clock  *rheotest.Clock
	stream string
	group  string
}

// setup opens a traced driver on b with a stream of one partition and a
// group; opts may set ParentWindow (the providers are the test's own).
func setup(t *testing.T, b *testbackend.Backend, maxAttempts int, opts *rheootel.Options) *bundle {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		ctx := context.WithoutCancel(context.Background())
		_ = tp.Shutdown(ctx)
		_ = mp.Shutdown(ctx)
	})
	o := rheootel.Options{}
	if opts != nil {
		o = *opts
	}
	o.TracerProvider, o.MeterProvider = tp, mp

	clock := rheotest.NewClock(time.Time{})
	raw := b.Open(t, clock)
	stream := fmt.Sprintf("otel%d", streamSeq.Add(1))
	ctx := context.Background()
	require.NoError(t, raw.CreateStream(ctx, stream, 1))
	require.NoError(t, raw.CreateGroup(ctx, stream, "g", &rheo.CreateGroupOptions{MaxAttempts: maxAttempts}))
	return &bundle{
		raw: raw, drv: rheootel.NewDriver(raw, &o), hooks: rheootel.NewHooks(&o),
		spans: spans, tp: tp, reader: reader, clock: clock, stream: stream, group: "g",
	}
}

// config is a worker config on the bundle's stream with its hooks and
// clock.
func (bd *bundle) config(h worker.Handler) *worker.Config {
	return &worker.Config{
		Stream:        bd.stream,
		Group:         bd.group,
		Handler:       h,
		Concurrency:   2,
		LeaseDuration: 10 * time.Second,
		Clock:         bd.clock,
		Hooks:         []any{bd.hooks},
	}
}

// startWorker starts a worker on the traced driver and stops it when t
// ends.
func (bd *bundle) startWorker(t *testing.T, cfg *worker.Config) *worker.Worker {
	t.Helper()
	w, err := worker.New(bd.drv, cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = w.StopAndCancel(ctx)
	})
	return w
}

// stop stops w, so that every span and measurement of its run is in.
func stop(t *testing.T, w *worker.Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, w.Stop(ctx))
}

// ended returns the ended spans named name.
func (bd *bundle) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range bd.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// waitSpans waits until n spans named name have ended and returns them.
func (bd *bundle) waitSpans(t *testing.T, name string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	eventually(t, fmt.Sprintf("%d %q spans", n, name), func() bool {
		got = bd.ended(name)
		return len(got) >= n
	})
	return got
}

// attr returns the value of key on s, or an invalid value.
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// linksTo reports whether s links to sc.
func linksTo(s sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
			return true
		}
	}
	return false
}

// metrics collects what the bundle's meter recorded.
func (bd *bundle) metrics(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, bd.reader.Collect(context.Background(), &rm))
	return rm
}

// find returns the metric named name, or false.
func find(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// matches reports whether set holds every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum is the sum of a counter's data points that carry want.
func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		return 0
	}
	data, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, not an int64 sum", name, m.Data)
	var n int64
	for _, dp := range data.DataPoints {
		if matches(dp.Attributes, want) {
			n += dp.Value
		}
	}
	return n
}

// count is the number of measurements of a histogram that carry want.
func count(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) uint64 {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		return 0
	}
	data, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T, not a float64 histogram", name, m.Data)
	var n uint64
	for _, dp := range data.DataPoints {
		if matches(dp.Attributes, want) {
			n += dp.Count
		}
	}
	return n
}

// eventually waits until cond holds, checking every few milliseconds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		require.False(t, time.Now().After(deadline), "timed out waiting until %s", what)
		time.Sleep(5 * time.Millisecond)
	}
}

// receive waits for a value from ch.
func receive[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		require.FailNow(t, fmt.Sprintf("timed out waiting for %s", what))
		panic("unreachable")
	}
}
