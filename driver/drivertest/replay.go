package drivertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func replayCases(t *testing.T, h Harness) {
	t.Run("replay from a sequence makes later events claimable again at attempt 1", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.group(s, &rheo.CreateGroupOptions{MaxAttempts: 3})
		b.appendN(s, 5)
		l := b.fetchOne(s, g, time.Minute)
		_, err := b.d.Retry(b.ctx, l.LeaseID, nil)
		require.NoError(t, err)
		b.drain(s, g)
		require.Equal(t, []int64{5}, b.frontiers(s, g))

		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(2))})
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		require.Equal(t, []int64{2}, b.frontiers(s, g), "the frontier moves back")
		require.Equal(t, int64(3), b.lag(s, g, nil).Total)
		leases := b.fetch(s, g, nil)
		require.Equal(t, []int64{3, 4, 5}, sequences(leases))
		for _, l := range leases {
			require.Equal(t, 1, l.Attempt)
		}
		n, err = b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
		require.NoError(t, err)
		require.Equal(t, int64(5), n, "leased events count too")
		leases = b.fetch(s, g, nil)
		require.Equal(t, []int64{1, 2, 3, 4, 5}, sequences(leases))
		require.Equal(t, 1, leases[0].Attempt, "attempts count from 1 again")
	})

	t.Run("replay counts only events already offered", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 5)
		require.Len(t, b.fetch(s, g, &rheo.FetchOptions{MaxCount: 3}), 3)
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		require.Equal(t, []int64{1, 2, 3, 4, 5}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("replay makes inflight leases stale", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 2)
		leases := b.fetch(s, g, nil)
		_, err := b.d.Retry(b.ctx, leases[1].LeaseID, &rheo.RetryOptions{Delay: time.Hour})
		require.NoError(t, err)
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "a leased and a pending event")
		require.ErrorIs(t, b.d.Ack(b.ctx, leases[0].LeaseID), rheo.ErrStaleLease)
		_, err = b.d.Renew(b.ctx, leases[0].LeaseID, time.Minute)
		require.ErrorIs(t, err, rheo.ErrStaleLease)
		again := b.fetch(s, g, nil)
		require.Equal(t, []int64{1, 2}, sequences(again), "the retry delay is dropped too")
		require.Equal(t, []int{1, 1}, []int{again[0].Attempt, again[1].Attempt})
	})

	t.Run("replay clears the dead letters of the events it reopens", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 2)
		for _, l := range b.fetch(s, g, nil) {
			require.NoError(t, b.d.Reject(b.ctx, l.LeaseID, ""))
		}
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(1))})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		letters := b.deadLetters(s, g)
		require.Len(t, letters, 1)
		require.Equal(t, int64(1), letters[0].Event.Sequence)
		l := b.fetchOne(s, g, time.Minute)
		require.Equal(t, int64(2), l.Event.Sequence)
		require.Equal(t, 1, l.Attempt)
	})

	t.Run("replay from a sequence never skips ahead", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 5)
		require.NoError(t, b.d.Ack(b.ctx, b.fetchOne(s, g, time.Minute).LeaseID))
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(4))})
		require.NoError(t, err)
		require.Equal(t, int64(0), n)
		require.Equal(t, []int64{2, 3, 4, 5}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("replay by event ids reopens only terminal events", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.group(s, nil)
		for i := 1; i <= 6; i++ {
			b.append(s, payload(i), &rheo.AppendOptions{ID: fmt.Sprintf("e%d", i)})
		}
		leases := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 4})
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))         // e1 acked
		require.NoError(t, b.d.Reject(b.ctx, leases[1].LeaseID, "x")) // e2 dead
		_, err := b.d.Retry(b.ctx, leases[3].LeaseID, &rheo.RetryOptions{Delay: time.Hour})
		require.NoError(t, err) // e3 leased, e4 pending, e5 and e6 not offered
		require.Equal(t, []int64{2}, b.frontiers(s, g))

		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{EventIDs: []string{"e1", "e2", "e3", "e4", "e5", "unknown"}})
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		require.Equal(t, []int64{0}, b.frontiers(s, g))
		require.Empty(t, b.deadLetters(s, g))
		_, err = b.d.Renew(b.ctx, leases[2].LeaseID, time.Minute)
		require.NoError(t, err, "the leased event keeps its lease")
		again := b.fetch(s, g, nil)
		require.Equal(t, []int64{1, 2, 5, 6}, sequences(again))
		require.Equal(t, []int{1, 1}, []int{again[0].Attempt, again[1].Attempt})
	})

	t.Run("replay by event ids respects partitions", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(2)
		g := b.group(s, nil)
		b.append(s, payload(1), &rheo.AppendOptions{ID: "p0", Partition: ptr(0)})
		b.append(s, payload(2), &rheo.AppendOptions{ID: "p1", Partition: ptr(1)})
		b.drain(s, g)
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{EventIDs: []string{"p0", "p1"}, Partitions: []int{1}})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		leases := b.fetch(s, g, nil)
		require.Len(t, leases, 1)
		require.Equal(t, "p1", leases[0].Event.ID)
	})

	t.Run("replay from a timestamp rewinds each partition to its first event at or after it", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(3)
		g := b.group(s, nil)
		at := func(m int) *time.Time { return ptr(Epoch.Add(time.Duration(m) * time.Minute)) }
		for _, m := range []int{0, 10, 20, 5} {
			b.append(s, payload(m), &rheo.AppendOptions{Partition: ptr(0), TS: at(m)})
		}
		b.append(s, payload(1), &rheo.AppendOptions{Partition: ptr(1), TS: at(0)})
		b.append(s, payload(2), &rheo.AppendOptions{Partition: ptr(1), TS: at(5)})
		b.append(s, payload(3), &rheo.AppendOptions{Partition: ptr(2), TS: at(30)})
		b.drain(s, g)

		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromTS: at(10), Partitions: []int{0, 1}})
		require.NoError(t, err)
		// Partition 0 from its sequence 2 (ts 10) on, the later event with an
		// earlier ts included; partition 1 has no event at or after it;
		// partition 2 is out of scope.
		require.Equal(t, int64(3), n)
		require.Equal(t, []int64{1, 2, 1}, b.frontiers(s, g))
		require.Equal(t, []position{{0, 2}, {0, 3}, {0, 4}}, positions(b.fetch(s, g, nil)))
	})

	t.Run("replay from a timestamp finds the first event at or after it in a long log whose timestamps go back and forth", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		// As for start_at: sequences 1-1000 at minute 10, 1001-2000 at 5,
		// 2001-3000 at 20, 3001-3500 at 15.
		appendTimes(b, s, []int{1000, 1000, 1000, 500}, []int{10, 5, 20, 15})
		g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(3500))})
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromTS: ptr(Epoch.Add(11 * time.Minute))})
		require.NoError(t, err)
		require.Equal(t, int64(1500), n)
		require.Equal(t, []int64{2000}, b.frontiers(s, g))
		n, err = b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromTS: ptr(Epoch.Add(21 * time.Minute))})
		require.NoError(t, err)
		require.Zero(t, n, "no event at or after the time: nothing to replay")
	})

	t.Run("replay limited to partitions leaves the others alone", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(2)
		g := b.group(s, nil)
		b.appendTo(s, 0, 1)
		b.appendTo(s, 1, 2)
		b.drain(s, g)
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0)), Partitions: []int{1}})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.Equal(t, []int64{1, 0}, b.frontiers(s, g))
		require.Equal(t, []position{{1, 1}}, positions(b.fetch(s, g, nil)))
		n, err = b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0)), Partitions: []int{}})
		require.NoError(t, err)
		require.Equal(t, int64(0), n, "an empty partitions list replays nothing")
	})

	t.Run("replay needs exactly one selector", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.group(s, nil)
		zero, now := ptr(int64(0)), ptr(Epoch)
		for name, opts := range map[string]rheo.ReplayOptions{
			"none":                 {},
			"sequence and ids":     {FromSequence: zero, EventIDs: []string{"a"}},
			"sequence and ts":      {FromSequence: zero, FromTS: now},
			"ids and ts":           {EventIDs: []string{"a"}, FromTS: now},
			"all three":            {FromSequence: zero, EventIDs: []string{"a"}, FromTS: now},
			"partitions, no other": {Partitions: []int{0}},
		} {
			_, err := b.d.Replay(b.ctx, s, g, &opts)
			require.ErrorIs(t, err, rheo.ErrInvalidReplayOpts, name)
		}
	})
}
