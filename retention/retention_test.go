package retention_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testskip"
	"github.com/rheo-go/rheo/retention"
	"github.com/rheo-go/rheo/rheotest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testskip.Wrap(m))
}

// waitTimeout bounds every wait for something the test expects.
const waitTimeout = 30 * time.Second

// maxAge is the retention of the streams the tests prune.
const maxAge = time.Hour

// epoch is where the tests' clocks start, in whole seconds.
var epoch = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// recorder is a Hook that passes on what it is told.
type recorder struct {
	infos chan retention.PruneInfo
}

func newRecorder() *recorder { return &recorder{infos: make(chan retention.PruneInfo, 100)} }

func (r *recorder) Pruned(_ context.Context, info retention.PruneInfo) { r.infos <- info }

// blockingHook passes on the context of each call and returns once
// release is closed.
type blockingHook struct {
	ctxs    chan context.Context
	release chan struct{}
}

func (h *blockingHook) Pruned(ctx context.Context, _ retention.PruneInfo) {
	h.ctxs <- ctx
	<-h.release
}

// quietWindow is how long, in real time, none watches after each step of
// the clock for a call of the hook.
const quietWindow = 50 * time.Millisecond

// none checks that the hook is not called while it moves clock on by step,
// steps times: an absence over a window of the clock, watched for
// quietWindow after each step, not at one instant.
func (r *recorder) none(t *testing.T, clock *rheotest.Clock, what string, step time.Duration, steps int) {
	t.Helper()
	for range steps {
		clock.Advance(step)
		select {
		case info := <-r.infos:
			require.FailNow(t, fmt.Sprintf("%s: %+v", what, info))
		case <-time.After(quietWindow):
		}
	}
}

// next waits for the hook's next call.
func (r *recorder) next(t *testing.T) retention.PruneInfo {
	t.Helper()
	select {
	case info := <-r.infos:
		return info
	case <-time.After(waitTimeout):
		require.FailNow(t, "the hook was not called")
		return retention.PruneInfo{}
	}
}

// bundle is what a test works with: a driver and a pruner's clock.
type bundle struct {
	t     *testing.T
	ctx   context.Context
	d     driver.Driver
	clock *rheotest.Clock
}

// forEachDriver runs fn on each backend, with a driver and a clock at epoch.
func forEachDriver(t *testing.T, fn func(t *testing.T, b *bundle)) {
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		clock := rheotest.NewClock(epoch)
		fn(t, &bundle{t: t, ctx: context.Background(), d: b.Open(t, clock), clock: clock})
	})
}

var streamSeq atomic.Int64

// stream creates a stream, with a retention of maxAge when retained.
func (b *bundle) stream(retained bool) string {
	b.t.Helper()
	name := fmt.Sprintf("s%d", streamSeq.Add(1))
	require.NoError(b.t, b.d.CreateStream(b.ctx, name, 1))
	if retained {
		require.NoError(b.t, b.d.SetRetention(b.ctx, name, maxAge))
	}
	return name
}

// appendN appends n events at the clock.
func (b *bundle) appendN(stream string, n int) {
	b.t.Helper()
	items := make([]rheo.BatchItem, n)
	for i := range items {
		items[i] = rheo.BatchItem{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	_, err := b.d.AppendBatch(b.ctx, stream, items, nil)
	require.NoError(b.t, err)
}

// age moves the clock past the retention of every event appended so far.
func (b *bundle) age() { b.clock.Advance(maxAge + time.Minute) }

func (b *bundle) low(stream string) int64 {
	b.t.Helper()
	info, err := b.d.StreamInfo(b.ctx, stream)
	require.NoError(b.t, err)
	return info.Partitions[0].LowWatermark
}

// consume acks the first n events of stream for a new group.
func (b *bundle) consume(stream string, n int) {
	b.t.Helper()
	require.NoError(b.t, b.d.CreateGroup(b.ctx, stream, "g", nil))
	leases, err := b.d.Fetch(b.ctx, stream, "g", &rheo.FetchOptions{MaxCount: n, LeaseDuration: 100 * maxAge})
	require.NoError(b.t, err)
	require.Len(b.t, leases, n)
	for _, l := range leases {
		require.NoError(b.t, b.d.Ack(b.ctx, l.LeaseID))
	}
}

func (b *bundle) pruner(cfg retention.Config) *retention.Pruner {
	b.t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = b.clock
	}
	p, err := retention.New(b.d, &cfg)
	require.NoError(b.t, err)
	return p
}

// byStream indexes a pass's results.
func byStream(infos []retention.PruneInfo) map[string]retention.PruneInfo {
	out := map[string]retention.PruneInfo{}
	for _, info := range infos {
		info.Duration = 0
		out[info.Stream] = info
	}
	return out
}

func TestRunOnce(t *testing.T) {
	forEachDriver(t, func(t *testing.T, b *bundle) {
		t.Run("a pass prunes every stream with a retention in batches, and nothing else", func(t *testing.T) {
			grouped, alone, forever := b.stream(true), b.stream(true), b.stream(false)
			b.appendN(grouped, 25)
			b.consume(grouped, 20)
			b.appendN(alone, 5)
			b.appendN(forever, 5)
			b.age()
			b.appendN(alone, 1)

			infos, err := b.pruner(retention.Config{BatchSize: 10}).RunOnce(b.ctx)
			require.NoError(t, err)
			got := byStream(infos)
			require.Equal(t, retention.PruneInfo{Stream: grouped, Deleted: 20, Batches: 3}, got[grouped],
				"two full batches, then one that finds the group's frontier")
			require.Equal(t, retention.PruneInfo{Stream: alone, Deleted: 5, Batches: 1}, got[alone], "a short batch ends the stream")
			require.NotContains(t, got, forever, "a stream without retention is not visited")
			require.Equal(t, int64(21), b.low(grouped))
			require.Equal(t, int64(6), b.low(alone))
			require.Equal(t, int64(1), b.low(forever))

			again, err := b.pruner(retention.Config{BatchSize: 10}).RunOnce(b.ctx)
			require.NoError(t, err)
			require.Equal(t, retention.PruneInfo{Stream: grouped, Batches: 1}, byStream(again)[grouped], "nothing left")
		})

		t.Run("each stream gets one log line with constant keys and a hook call", func(t *testing.T) {
			s, idle := b.stream(true), b.stream(true)
			b.appendN(s, 3)
			b.age()
			var logs bytes.Buffer
			rec := newRecorder()
			p := b.pruner(retention.Config{
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				Hook:   rec,
			})
			_, err := p.RunOnce(b.ctx)
			require.NoError(t, err)
			lines := map[string]map[string]any{}
			for _, line := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
				var rec map[string]any
				require.NoError(t, json.Unmarshal(line, &rec))
				lines[rec[retention.LogKeyStream].(string)] = rec
			}
			require.Equal(t, "INFO", lines[s]["level"])
			require.Equal(t, "retention: pruned", lines[s]["msg"])
			require.Equal(t, float64(3), lines[s][retention.LogKeyDeleted])
			require.Equal(t, float64(1), lines[s][retention.LogKeyBatches])
			require.Contains(t, lines[s], retention.LogKeyDuration)
			require.Equal(t, "DEBUG", lines[idle]["level"], "a stream with nothing to prune logs at Debug")
			require.Equal(t, float64(0), lines[idle][retention.LogKeyDeleted])

			told := map[string]int64{}
			for range len(lines) {
				info := rec.next(t)
				told[info.Stream] = info.Deleted
			}
			require.Equal(t, int64(3), told[s])
			require.Equal(t, int64(0), told[idle])
		})

		t.Run("a stream that fails is reported and the others are still pruned", func(t *testing.T) {
			bad, good := b.stream(true), b.stream(true)
			b.appendN(bad, 2)
			b.appendN(good, 2)
			b.age()
			errBroken := errors.New("broken")
			var logs bytes.Buffer
			p, err := retention.New(&failingDriver{Driver: b.d, stream: bad, err: errBroken}, &retention.Config{
				Clock:  b.clock,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			require.NoError(t, err)
			infos, err := p.RunOnce(b.ctx)
			require.ErrorIs(t, err, errBroken)
			got := byStream(infos)
			require.ErrorIs(t, got[bad].Err, errBroken)
			require.Equal(t, int64(2), got[good].Deleted)
			require.Contains(t, logs.String(), "level=ERROR msg=\"retention: prune failed\" stream="+bad)
		})

		t.Run("a stream dropped during the pass is left out", func(t *testing.T) {
			gone := b.stream(true)
			b.appendN(gone, 2)
			b.age()
			p, err := retention.New(&failingDriver{Driver: b.d, stream: gone, err: rheo.Errorf(rheo.ErrStreamNotFound, "dropped")},
				&retention.Config{Clock: b.clock})
			require.NoError(t, err)
			infos, err := p.RunOnce(b.ctx)
			require.NoError(t, err)
			require.NotContains(t, byStream(infos), gone)
		})

		t.Run("a pass ends with its context", func(t *testing.T) {
			s := b.stream(true)
			b.appendN(s, 2)
			b.age()
			ctx, cancel := context.WithCancel(b.ctx)
			cancel()
			_, err := b.pruner(retention.Config{}).RunOnce(ctx)
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, int64(1), b.low(s))
		})
	})
}

// failingDriver fails Prune of one stream with err.
type failingDriver struct {
	driver.Driver
	stream string
	err    error
}

func (f *failingDriver) Prune(ctx context.Context, stream string, opts *rheo.PruneOptions) (int64, error) {
	if stream == f.stream {
		return 0, f.err
	}
	return f.Driver.Prune(ctx, stream, opts)
}

// countingDriver signals every Prune call of one stream once it has
// returned.
type countingDriver struct {
	driver.Driver
	stream string
	calls  chan struct{}
}

func (c *countingDriver) Prune(ctx context.Context, stream string, opts *rheo.PruneOptions) (int64, error) {
	n, err := c.Driver.Prune(ctx, stream, opts)
	if stream == c.stream {
		c.calls <- struct{}{}
	}
	return n, err
}

func TestStartStop(t *testing.T) {
	forEachDriver(t, func(t *testing.T, b *bundle) {
		t.Run("a started pruner passes at once and then every interval of its clock", func(t *testing.T) {
			s := b.stream(true)
			b.appendN(s, 4)
			b.age()
			rec := newRecorder()
			p := b.pruner(retention.Config{Interval: 10 * time.Minute, Hook: rec})
			require.NoError(t, p.Start(b.ctx))
			t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })
			require.Equal(t, int64(4), rec.next(t).Deleted, "the first pass")
			b.clock.WaitTimer(t, waitTimeout)

			b.appendN(s, 3)
			rec.none(t, b.clock, "a pass before the interval", time.Minute, 9)
			b.clock.Advance(maxAge) // the interval is up, and the new events are aged
			info := rec.next(t)
			require.Equal(t, int64(3), info.Deleted, "the second pass")
			require.NoError(t, info.Err)
			require.Equal(t, int64(8), b.low(s))
		})

		t.Run("Stop waits for the pruner to end, and stops it for good", func(t *testing.T) {
			s := b.stream(true)
			rec := newRecorder()
			p := b.pruner(retention.Config{Hook: rec})
			require.NoError(t, p.Start(b.ctx))
			rec.next(t)
			require.NoError(t, p.Stop(b.ctx))
			require.NoError(t, p.Stop(b.ctx), "a second Stop")
			require.ErrorIs(t, p.Start(b.ctx), rheo.ErrInvalidArgument, "no restart")
			b.appendN(s, 1)
			b.age()
			b.clock.Advance(time.Hour)
			infos, err := p.RunOnce(b.ctx)
			require.NoError(t, err)
			require.Empty(t, infos, "a stopped pruner does nothing")
			require.Equal(t, int64(1), b.low(s))
		})

		t.Run("a pass pauses after each full batch, and Stop ends it in the pause", func(t *testing.T) {
			s := b.stream(true)
			b.appendN(s, 5)
			b.age()
			rec := newRecorder()
			counted := &countingDriver{Driver: b.d, stream: s, calls: make(chan struct{}, 10)}
			p, err := retention.New(counted, &retention.Config{BatchSize: 2, Pause: time.Hour, Hook: rec, Clock: b.clock})
			require.NoError(t, err)
			require.NoError(t, p.Start(b.ctx))
			select {
			case <-counted.calls:
			case <-time.After(waitTimeout):
				require.FailNow(t, "no batch")
			}
			stopCtx, cancel := context.WithTimeout(b.ctx, waitTimeout)
			defer cancel()
			require.NoError(t, p.Stop(stopCtx), "Stop does not wait out the pause")
			info := rec.next(t)
			for info.Stream != s { // the streams of the earlier cases come first
				info = rec.next(t)
			}
			require.Equal(t, int64(2), info.Deleted, "one batch before the pause")
			require.Equal(t, 1, info.Batches)
			require.NoError(t, info.Err)
			require.Equal(t, int64(3), b.low(s))
		})

		t.Run("a negative Pause runs the batches back to back", func(t *testing.T) {
			s := b.stream(true)
			b.appendN(s, 5)
			b.age()
			infos, err := b.pruner(retention.Config{BatchSize: 2, Pause: -1}).RunOnce(b.ctx)
			require.NoError(t, err)
			require.Equal(t, retention.PruneInfo{Stream: s, Deleted: 5, Batches: 3}, byStream(infos)[s])
		})

		t.Run("cancelling the context of Start stops the pruner", func(t *testing.T) {
			b.stream(true)
			rec := newRecorder()
			p := b.pruner(retention.Config{Hook: rec})
			ctx, cancel := context.WithCancel(b.ctx)
			require.NoError(t, p.Start(ctx))
			rec.next(t)
			cancel()
			stopCtx, stopCancel := context.WithTimeout(b.ctx, waitTimeout)
			defer stopCancel()
			require.NoError(t, p.Stop(stopCtx))
		})
	})

	t.Run("cancelling the context of Start is a soft stop that turns hard after SoftStopTimeout", func(t *testing.T) {
		forEachDriver(t, func(t *testing.T, b *bundle) {
			b.stream(true)
			h := &blockingHook{ctxs: make(chan context.Context, 1), release: make(chan struct{})}
			const timeout = 30 * time.Second
			p := b.pruner(retention.Config{Hook: h, SoftStopTimeout: timeout})
			ctx, cancel := context.WithCancel(b.ctx)
			require.NoError(t, p.Start(ctx))
			var passCtx context.Context
			select {
			case passCtx = <-h.ctxs:
			case <-time.After(waitTimeout):
				require.FailNow(t, "the hook was not called")
			}

			at := b.clock.Now().Add(timeout)
			cancel()
			require.Eventually(t, func() bool { return b.clock.Armed(at) }, waitTimeout, time.Millisecond, "the soft stop's timer")
			require.NoError(t, passCtx.Err(), "the pass goes on after the cancel")
			b.clock.Advance(timeout)
			require.Eventually(t, func() bool { return passCtx.Err() != nil }, waitTimeout, time.Millisecond, "the pass is cancelled at the timeout")
			close(h.release)
			stopCtx, stopCancel := context.WithTimeout(b.ctx, waitTimeout)
			defer stopCancel()
			require.NoError(t, p.Stop(stopCtx))
		})
	})

	t.Run("Stop before Start does nothing and Start runs once", func(t *testing.T) {
		clock := rheotest.NewClock(epoch)
		d, err := sqlite.Open(context.Background(), ":memory:", &sqlite.Options{Clock: clock, Migrate: true})
		require.NoError(t, err)
		defer d.Close()
		p, err := retention.New(d, &retention.Config{Clock: clock})
		require.NoError(t, err)
		require.NoError(t, p.Stop(context.Background()))
		require.ErrorIs(t, p.Start(context.Background()), rheo.ErrInvalidArgument)

		p, err = retention.New(d, &retention.Config{Clock: clock})
		require.NoError(t, err)
		require.NoError(t, p.Start(context.Background()))
		require.ErrorIs(t, p.Start(context.Background()), rheo.ErrInvalidArgument)
		require.NoError(t, p.Stop(context.Background()))
	})
}

func TestNew(t *testing.T) {
	d, err := sqlite.Open(context.Background(), ":memory:", &sqlite.Options{Migrate: true})
	require.NoError(t, err)
	defer d.Close()
	for field, cfg := range map[string]retention.Config{
		"Config.Interval":  {Interval: -time.Second},
		"Config.BatchSize": {BatchSize: -1},
	} {
		_, err := retention.New(d, &cfg)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument, field)
		require.ErrorContains(t, err, field)
	}
	_, err = retention.New(d, nil)
	require.NoError(t, err, "nil means the defaults")
}
