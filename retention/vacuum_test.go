package retention_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/retention"
)

// vacuumLog is a slog.Handler that keeps the messages of its records.
type vacuumLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *vacuumLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *vacuumLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *vacuumLog) WithGroup(string) slog.Handler            { return l }

func (l *vacuumLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Level.String()+" "+r.Message)
	return nil
}

func (l *vacuumLog) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func TestVacuumer(t *testing.T) {
	// counting returns a vacuum function that counts its runs, each of
	// which waits for release (nil: returns at once) and returns err.
	counting := func(release <-chan struct{}, err error) (func(context.Context) error, *atomic.Int64) {
		var runs atomic.Int64
		return func(ctx context.Context) error {
			runs.Add(1)
			if release != nil {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return err
		}, &runs
	}
	const wait = 10 * time.Second

	t.Run("every Every settles start one vacuum", func(t *testing.T) {
		vacuum, runs := counting(nil, nil)
		v := retention.NewVacuumer(vacuum, &retention.VacuumerConfig{Every: 5})
		v.Settled(4)
		v.Close()
		require.Zero(t, runs.Load(), "four settles of five")

		v = retention.NewVacuumer(vacuum, &retention.VacuumerConfig{Every: 5})
		defer v.Close()
		v.Settled(3)
		v.Settled(2)
		require.Eventually(t, func() bool { return runs.Load() == 1 }, wait, time.Millisecond)
	})

	t.Run("one vacuum runs at a time", func(t *testing.T) {
		release := make(chan struct{})
		vacuum, runs := counting(release, nil)
		v := retention.NewVacuumer(vacuum, &retention.VacuumerConfig{Every: 1})
		v.Settled(1)
		require.Eventually(t, func() bool { return runs.Load() == 1 }, wait, time.Millisecond)
		for range 10 {
			v.Settled(1)
		}
		close(release)
		v.Close()
		require.Equal(t, int64(1), runs.Load(), "settles during a run start no other")
	})

	t.Run("a refusal is said once, at Info, and no vacuum follows", func(t *testing.T) {
		vacuum, runs := counting(nil, retention.ErrVacuumRefused)
		var logs vacuumLog
		v := retention.NewVacuumer(vacuum, &retention.VacuumerConfig{Every: 2, Logger: slog.New(&logs)})
		v.Settled(2)
		require.Eventually(t, func() bool { return len(logs.messages()) == 1 }, wait, time.Millisecond)
		for range 10 {
			v.Settled(2)
		}
		v.Close()
		require.Equal(t, int64(1), runs.Load())
		require.Equal(t, []string{"INFO rheo: this role may not VACUUM rheo.deliveries, which is left to autovacuum; " +
			"see the driver's VacuumEvery option"}, logs.messages())
	})

	t.Run("a failed vacuum is a warning, and the next settles try again", func(t *testing.T) {
		vacuum, runs := counting(nil, errors.New("disk on fire"))
		var logs vacuumLog
		v := retention.NewVacuumer(vacuum, &retention.VacuumerConfig{Every: 1, Logger: slog.New(&logs)})
		defer v.Close()
		v.Settled(1)
		require.Eventually(t, func() bool { return len(logs.messages()) == 1 }, wait, time.Millisecond)
		require.Equal(t, "WARN rheo: vacuum of rheo.deliveries failed", logs.messages()[0])
		require.Eventually(t, func() bool { v.Settled(1); return runs.Load() >= 2 }, wait, time.Millisecond)
	})

	t.Run("Close cancels a vacuum in progress, waits for it, and later settles start none", func(t *testing.T) {
		vacuum, runs := counting(make(chan struct{}), nil) // never released
		var logs vacuumLog
		v := retention.NewVacuumer(vacuum, &retention.VacuumerConfig{Every: 1, Logger: slog.New(&logs)})
		v.Settled(1)
		require.Eventually(t, func() bool { return runs.Load() == 1 }, wait, time.Millisecond)
		v.Close()
		v.Settled(5)
		require.Equal(t, int64(1), runs.Load())
		require.Empty(t, logs.messages(), "a cancelled vacuum is no failure")
	})

	t.Run("a negative Every is no Vacuumer, and a nil one does nothing", func(t *testing.T) {
		vacuum, runs := counting(nil, nil)
		v := retention.NewVacuumer(vacuum, &retention.VacuumerConfig{Every: -1})
		require.Nil(t, v)
		v.Settled(100)
		v.Close()
		require.Zero(t, runs.Load())
	})
}
