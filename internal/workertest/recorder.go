package workertest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/worker"
)

// Recorded is what a Recorder was told, each kind of call in the order
// the calls came.
type Recorded struct {
	Fetched      []worker.FetchInfo
	FetchFailed  []worker.FetchErrorInfo
	Handled      []worker.HandleInfo
	Acked        []worker.AckInfo
	Retried      []worker.RetryInfo
	DeadLettered []worker.DeadLetterInfo
	Redelivered  []worker.RedeliveryInfo
	Renewed      []worker.RenewInfo
	LeaseLost    []worker.LeaseLostInfo
	SettleFailed []worker.SettleErrorInfo
}

// Count is the number of calls recorded.
func (s Recorded) Count() int {
	return len(s.Fetched) + len(s.FetchFailed) + len(s.Handled) + len(s.Acked) + len(s.Retried) +
		len(s.DeadLettered) + len(s.Redelivered) + len(s.Renewed) + len(s.LeaseLost) + len(s.SettleFailed)
}

// Recorder is a worker hook (worker.Config.Hooks) of every kind that
// records each call it is told of, safe for concurrent use. Its zero
// value is ready.
type Recorder struct {
	mu sync.Mutex
	r  Recorded
}

// record appends v to the list of the recorder at list, under its lock.
func record[T any](r *Recorder, list func(*Recorded) *[]T, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := list(&r.r)
	*l = append(*l, v)
}

// Fetched records a fetch.
func (r *Recorder) Fetched(_ context.Context, i worker.FetchInfo) {
	record(r, func(s *Recorded) *[]worker.FetchInfo { return &s.Fetched }, i)
}

// FetchFailed records a failed fetch.
func (r *Recorder) FetchFailed(_ context.Context, i worker.FetchErrorInfo) {
	record(r, func(s *Recorded) *[]worker.FetchErrorInfo { return &s.FetchFailed }, i)
}

// Handled records a handler's return.
func (r *Recorder) Handled(_ context.Context, i worker.HandleInfo) {
	record(r, func(s *Recorded) *[]worker.HandleInfo { return &s.Handled }, i)
}

// Acked records an ack.
func (r *Recorder) Acked(_ context.Context, i worker.AckInfo) {
	record(r, func(s *Recorded) *[]worker.AckInfo { return &s.Acked }, i)
}

// Retried records a retry.
func (r *Recorder) Retried(_ context.Context, i worker.RetryInfo) {
	record(r, func(s *Recorded) *[]worker.RetryInfo { return &s.Retried }, i)
}

// DeadLettered records a dead letter.
func (r *Recorder) DeadLettered(_ context.Context, i worker.DeadLetterInfo) {
	record(r, func(s *Recorded) *[]worker.DeadLetterInfo { return &s.DeadLettered }, i)
}

// Redelivered records a redelivery.
func (r *Recorder) Redelivered(_ context.Context, i worker.RedeliveryInfo) {
	record(r, func(s *Recorded) *[]worker.RedeliveryInfo { return &s.Redelivered }, i)
}

// Renewed records a renewal.
func (r *Recorder) Renewed(_ context.Context, i worker.RenewInfo) {
	record(r, func(s *Recorded) *[]worker.RenewInfo { return &s.Renewed }, i)
}

// LeaseLost records a lease lost.
func (r *Recorder) LeaseLost(_ context.Context, i worker.LeaseLostInfo) {
	record(r, func(s *Recorded) *[]worker.LeaseLostInfo { return &s.LeaseLost }, i)
}

// SettleFailed records a failed settle.
func (r *Recorder) SettleFailed(_ context.Context, i worker.SettleErrorInfo) {
	record(r, func(s *Recorded) *[]worker.SettleErrorInfo { return &s.SettleFailed }, i)
}

// Snapshot returns a copy of what the recorder was told.
func (r *Recorder) Snapshot() Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Recorded{
		Fetched:      slices.Clone(r.r.Fetched),
		FetchFailed:  slices.Clone(r.r.FetchFailed),
		Handled:      slices.Clone(r.r.Handled),
		Acked:        slices.Clone(r.r.Acked),
		Retried:      slices.Clone(r.r.Retried),
		DeadLettered: slices.Clone(r.r.DeadLettered),
		Redelivered:  slices.Clone(r.r.Redelivered),
		Renewed:      slices.Clone(r.r.Renewed),
		LeaseLost:    slices.Clone(r.r.LeaseLost),
		SettleFailed: slices.Clone(r.r.SettleFailed),
	}
}

// WaitFor waits until cond holds for what the recorder was told, and
// returns that. It fails t only when the recorder is told nothing new for
// WaitTimeout: a loaded machine that is slow but moving is given the
// time it needs, a stalled one is not.
func (r *Recorder) WaitFor(t testing.TB, what string, cond func(s Recorded) bool) Recorded {
	t.Helper()
	last, deadline := -1, time.Now()
	for {
		s := r.Snapshot()
		if cond(s) {
			return s
		}
		if n := s.Count(); n != last {
			last, deadline = n, time.Now().Add(WaitTimeout)
		}
		require.False(t, time.Now().After(deadline), "timed out waiting until %s: no progress for %s", what, WaitTimeout)
		time.Sleep(5 * time.Millisecond)
	}
}
