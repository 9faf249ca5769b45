package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/sqlite"
)

func TestRing(t *testing.T) {
	t.Parallel()
	r := newRing(3)
	for i := range 5 {
		r.add(sample{Value: int64(i)})
	}
	got := r.all()
	assert.Equal(t, []int64{2, 3, 4}, values(got), "a ring of 3 after 5 samples")
}

func TestSamplerRate(t *testing.T) {
	t.Parallel()
	t.Run("the rate is measured over the window, from the newest sample back", func(t *testing.T) {
		s := newSampler(nil, 100, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), driver.SystemClock)
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		r := newRing(100)
		// 1 event/s for 2 minutes, then 10 events/s for the last minute.
		v := int64(0)
		for sec := 0; sec <= 180; sec += 5 {
			r.add(sample{At: start.Add(time.Duration(sec) * time.Second), Value: v})
			if sec < 120 {
				v += 5
			} else {
				v += 50
			}
		}
		s.streams["orders"] = r
		rate, ok := s.rate("orders", time.Minute)
		if assert.True(t, ok, "no rate over the last minute") {
			assert.InDelta(t, 10, rate, 0.1, "rate over the last minute")
		}
		_, ok = s.rate("unknown", time.Minute)
		assert.False(t, ok, "a stream without samples has a rate")
	})
}

func TestHandlerCloseStopsSampling(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Migrate: true})
	require.NoError(t, err)
	defer drv.Close()
	require.NoError(t, drv.CreateStream(ctx, "orders", 1))
	_, err = drv.Append(ctx, "orders", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	rounds := func(h *Handler) int {
		h.samples.mu.Lock()
		defer h.samples.mu.Unlock()
		return h.samples.rounds
	}

	t.Run("Close ends the goroutine", func(t *testing.T) {
		clock := drivertest.NewClock()
		h, err := New(ctx, drv, &Options{SampleInterval: time.Millisecond, Clock: clock})
		require.NoError(t, err)
		// Each round ends by setting the timer of the next one.
		clock.WaitTimer(t, 10*time.Second)
		for range 2 {
			clock.Advance(time.Millisecond)
			clock.WaitTimer(t, 10*time.Second)
		}
		require.Equal(t, 3, rounds(h), "rounds after two intervals")
		require.NoError(t, h.Close())
		after := rounds(h)
		// A sampler still running would take a round at every step.
		assert.Never(t, func() bool {
			clock.Advance(time.Millisecond)
			return rounds(h) != after
		}, 50*time.Millisecond, time.Millisecond, "sampling went on after Close")
		got := h.samples.streamSeries("orders")
		if assert.NotEmpty(t, got, "samples of orders") {
			assert.Equal(t, int64(1), got[len(got)-1].Value, "samples of orders: %+v", got)
		}
		assert.NoError(t, h.Close(), "a second Close")
	})

	t.Run("the context given to New ends it too", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		h, err := New(ctx, drv, &Options{SampleInterval: time.Millisecond, Clock: drivertest.NewClock()})
		require.NoError(t, err)
		cancel()
		select {
		case <-h.stopped:
		case <-time.After(10 * time.Second):
			require.FailNow(t, "sampling did not stop with its context")
		}
	})
}

// values returns the values of samples, in order.
func values(samples []sample) []int64 {
	out := make([]int64, len(samples))
	for i, s := range samples {
		out[i] = s.Value
	}
	return out
}
