package workertest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/rheotest"
	"github.com/rheo-go/rheo/worker"
)

// quietWindow is how long, in real time, Never watches after each step of
// the fake clock for what must not happen.
const quietWindow = 50 * time.Millisecond

// Never checks an absence over a window of the fake clock rather than at
// one instant: it moves clock on by step, steps times, and after each step
// watches for quietWindow that happened stays false. It fails as soon as
// happened is true.
func Never(t testing.TB, clock *rheotest.Clock, what string, step time.Duration, steps int, happened func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := range steps {
		clock.Advance(step)
		quiet := time.After(quietWindow)
		for watching := true; watching; {
			require.False(t, happened(), "%s: broken %s into the window", what, time.Duration(i+1)*step)
			select {
			case <-tick.C:
			case <-quiet:
				watching = false
			}
		}
	}
}

// Receive waits for a value from ch.
func Receive[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(WaitTimeout):
		require.FailNow(t, fmt.Sprintf("timed out waiting for %s", what))
		panic("unreachable")
	}
}

// StartWorker starts a worker and stops it when t ends.
func StartWorker(t testing.TB, drv driver.Driver, cfg *worker.Config) *worker.Worker {
	t.Helper()
	w, err := worker.New(drv, cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
		defer cancel()
		_ = w.StopAndCancel(ctx)
	})
	return w
}

// PayloadN is the "n" of the payload {"n": …} of an event the tests
// append.
func PayloadN(t testing.TB, l rheo.Lease) int {
	var p struct{ N int }
	require.NoError(t, json.Unmarshal(l.Event.Payload, &p))
	return p.N
}

// Outcomes returns the handler returns with outcome o.
func Outcomes(s Recorded, o worker.Outcome) []worker.HandleInfo {
	var out []worker.HandleInfo
	for _, h := range s.Handled {
		if h.Outcome == o {
			out = append(out, h)
		}
	}
	return out
}

// AssertJittered checks a back-off delay: within ±20% of nominal, in
// whole milliseconds.
func AssertJittered(t testing.TB, nominal, got time.Duration, format string, args ...any) {
	t.Helper()
	low, high := nominal*8/10, nominal*12/10
	if got < low || got >= high {
		assert.Failf(t, "delay out of its range", "%s is not in [%s, %s): %s", got, low, high, fmt.Sprintf(format, args...))
	}
	assert.Zero(t, got%time.Millisecond, "whole milliseconds: %s", got)
}

// DeadLetters returns the dead letters of group.
func DeadLetters(t testing.TB, drv driver.Driver, stream, group string) []rheo.DeadLetter {
	t.Helper()
	dls, err := drv.DeadLetters(context.Background(), stream, group, nil)
	require.NoError(t, err)
	return dls
}
