package worker

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRenewals(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lease := func(offset time.Duration) *held {
		return &held{renewAt: base.Add(offset), index: notScheduled}
	}

	t.Run("due leases come out soonest first, the rest stay", func(t *testing.T) {
		var r renewals
		var all []*held
		for _, i := range rand.Perm(50) {
			h := lease(time.Duration(i) * time.Second)
			all = append(all, h)
			r.schedule(h)
		}
		var got []time.Time
		for h := r.due(base.Add(29 * time.Second)); h != nil; h = r.due(base.Add(29 * time.Second)) {
			assert.Equal(t, notScheduled, h.index)
			got = append(got, h.renewAt)
		}
		require.Len(t, got, 30)
		assert.True(t, slices.IsSortedFunc(got, func(a, b time.Time) int { return a.Compare(b) }))
		assert.Equal(t, 20, r.Len())
		assert.Equal(t, base.Add(30*time.Second), r.next())
		for i, h := range r {
			assert.Equal(t, i, h.index, "each lease knows its place")
		}
	})

	t.Run("a cancelled lease is not renewed and a second cancel is harmless", func(t *testing.T) {
		var r renewals
		a, b, c := lease(3*time.Second), lease(time.Second), lease(2*time.Second)
		assert.True(t, r.schedule(a), "the only lease is the first due")
		assert.True(t, r.schedule(b), "an earlier lease becomes the first due")
		assert.False(t, r.schedule(c), "a later lease does not")
		r.cancel(b)
		r.cancel(b)
		assert.Equal(t, notScheduled, b.index)
		assert.Equal(t, c, r.due(base.Add(time.Hour)))
		assert.Equal(t, a, r.due(base.Add(time.Hour)))
		assert.Nil(t, r.due(base.Add(time.Hour)))
		assert.True(t, r.next().IsZero(), "nothing scheduled")
	})

	t.Run("nothing is due before its time", func(t *testing.T) {
		var r renewals
		r.schedule(lease(time.Second))
		assert.Nil(t, r.due(base))
		assert.NotNil(t, r.due(base.Add(time.Second)), "due at its time exactly")
	})
}

func TestPipelineWant(t *testing.T) {
	t.Parallel()
	// p is a worker of 64 slots whose fetches take 2ms.
	p := func(idle, queued int, handlerTime time.Duration) pipeline {
		return pipeline{concurrency: 64, idle: idle, queued: queued, handlerTime: handlerTime,
			fetchTime: 2 * time.Millisecond, maxDemand: 256, ackBatch: 100}
	}
	for _, tc := range []struct {
		name      string
		p         pipeline
		n, full   int
		lookahead int
		lowWater  bool
	}{
		{"before any handler returned: the idle slots and one lease queued per slot",
			pipeline{concurrency: 64, idle: 64, maxDemand: 256, ackBatch: 100}, 128, 100, 64, true},
		{"handlers too quick to measure: MaxDemand's worth",
			p(64, 0, time.Nanosecond), 320, 100, 256, true},
		{"quick handlers: the leases two fetches' time takes, up to MaxDemand",
			p(0, 0, 100*time.Microsecond), 256, 100, 256, true},
		{"5ms handlers: two fetches take 51 leases, so a round per slot is kept instead",
			p(0, 10, 5*time.Millisecond), 54, 54, 64, true},
		{"1ms handlers: 256 leases for two fetches, bounded by MaxDemand",
			p(0, 100, time.Millisecond), 156, 100, 256, true},
		{"100ms handlers: one round per slot",
			p(4, 20, 100*time.Millisecond), 48, 48, 64, true},
		{"more than half of the target queued: no fetch yet",
			p(0, 33, 5*time.Millisecond), 0, 1, 64, false},
		{"exactly half queued: the low-water mark",
			p(0, 32, 5*time.Millisecond), 32, 32, 64, true},
		{"a full queue: nothing",
			p(0, 64, 5*time.Millisecond), 0, 1, 64, false},
		{"a queue over the target (fetched before the pace slowed): nothing",
			p(0, 200, 5*time.Millisecond), 0, 1, 64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, full := tc.p.want()
			assert.Equal(t, tc.n, n, "n")
			assert.Equal(t, tc.full, full, "full")
			assert.Equal(t, tc.lookahead, tc.p.lookahead(), "lookahead")
			assert.Equal(t, tc.lowWater, tc.p.lowWater(), "lowWater")
		})
	}
}

func TestAverage(t *testing.T) {
	t.Parallel()
	var a average
	assert.Zero(t, a.get(), "nothing observed")
	a.observe(8 * time.Millisecond)
	assert.Equal(t, 8*time.Millisecond, a.get(), "the first observation sets it")
	a.observe(16 * time.Millisecond)
	assert.Equal(t, 9*time.Millisecond, a.get(), "each observation weighs an eighth")
	a.observe(0)
	assert.Greater(t, a.get(), time.Duration(0), "an instant observation keeps it measurable")
}
