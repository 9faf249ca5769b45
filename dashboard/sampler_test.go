package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/sqlite"
)

func TestRing(t *testing.T) {
	t.Parallel()
	r := newRing(3)
	for i := range 5 {
		r.add(sample{Value: int64(i)})
	}
	got := r.all()
	if len(got) != 3 || got[0].Value != 2 || got[2].Value != 4 {
		t.Errorf("a ring of 3 after 5 samples holds %+v, want 2, 3, 4", got)
	}
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
		if !ok || rate < 9.9 || rate > 10.1 {
			t.Errorf("rate over the last minute: %v %v, want 10", rate, ok)
		}
		if _, ok := s.rate("unknown", time.Minute); ok {
			t.Error("a stream without samples has a rate")
		}
	})
}

func TestHandlerCloseStopsSampling(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	if err := drv.CreateStream(ctx, "orders", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := drv.Append(ctx, "orders", json.RawMessage(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	rounds := func(h *Handler) int {
		h.samples.mu.Lock()
		defer h.samples.mu.Unlock()
		return h.samples.rounds
	}

	t.Run("Close ends the goroutine", func(t *testing.T) {
		h, err := New(ctx, drv, &Options{SampleInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for rounds(h) < 3 {
			time.Sleep(time.Millisecond)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		after := rounds(h)
		time.Sleep(20 * time.Millisecond)
		if rounds(h) != after {
			t.Error("sampling went on after Close")
		}
		if got := h.samples.streamSeries("orders"); len(got) == 0 || got[len(got)-1].Value != 1 {
			t.Errorf("samples of orders: %+v", got)
		}
		if err := h.Close(); err != nil {
			t.Error("a second Close:", err)
		}
	})

	t.Run("the context given to New ends it too", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		h, err := New(ctx, drv, &Options{SampleInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		select {
		case <-h.stopped:
		case <-time.After(10 * time.Second):
			t.Fatal("sampling did not stop with its context")
		}
	})
}
