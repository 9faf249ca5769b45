package drivertest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func inspectCases(t *testing.T, h Harness) {
	t.Run("list streams is ordered by name with partition counts and creation times", func(t *testing.T) {
		b := setup(t, h)
		prefix := uniqueName("list")
		created := map[string]time.Time{}
		for i, suffix := range []string{"-c", "-a", "-b"} {
			at := b.clock.Advance(time.Minute)
			require.NoError(t, b.d.CreateStream(b.ctx, prefix+suffix, i+1))
			created[prefix+suffix] = at
		}
		streams, err := b.d.ListStreams(b.ctx)
		require.NoError(t, err)
		var mine []rheo.StreamInfo
		for _, s := range streams {
			if strings.HasPrefix(s.Name, prefix) {
				mine = append(mine, s)
			}
		}
		require.Len(t, mine, 3)
		require.Equal(t, []string{prefix + "-a", prefix + "-b", prefix + "-c"}, []string{mine[0].Name, mine[1].Name, mine[2].Name})
		require.Equal(t, []int{2, 3, 1}, []int{mine[0].PartitionCount, mine[1].PartitionCount, mine[2].PartitionCount})
		for _, s := range mine {
			requireSameTime(t, created[s.Name], s.CreatedAt, s.Name)
		}
	})

	t.Run("list groups is ordered by name with max attempts and creation times", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		other := b.stream(1)
		b.group(other, nil)
		for i, name := range []string{"charlie", "alpha", "bravo"} {
			b.clock.Advance(time.Minute)
			require.NoError(t, b.d.CreateGroup(b.ctx, s, name, &rheo.CreateGroupOptions{MaxAttempts: i + 1}))
		}
		groups, err := b.d.ListGroups(b.ctx, s)
		require.NoError(t, err)
		require.Len(t, groups, 3)
		require.Equal(t, []string{"alpha", "bravo", "charlie"}, []string{groups[0].Name, groups[1].Name, groups[2].Name})
		require.Equal(t, []int{2, 3, 1}, []int{groups[0].MaxAttempts, groups[1].MaxAttempts, groups[2].MaxAttempts})
		requireSameTime(t, Epoch.Add(time.Minute), groups[2].CreatedAt)
		requireSameTime(t, Epoch.Add(2*time.Minute), groups[0].CreatedAt)
		empty, err := b.d.ListGroups(b.ctx, b.stream(1))
		require.NoError(t, err)
		require.Empty(t, empty)
	})

	t.Run("dead letters are ordered by partition and sequence and page after an event id", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		g := b.group(s, nil)
		at := Epoch.Add(-time.Hour)
		b.append(s, json.RawMessage(`{"type": "a", "n": 1}`), &rheo.AppendOptions{Partition: ptr(1), Key: "k1", ID: "e1", TS: &at})
		b.append(s, json.RawMessage(`{"n": 2}`), &rheo.AppendOptions{Partition: ptr(0), ID: "e2", Metadata: json.RawMessage(`{"producer": "p"}`)})
		b.append(s, json.RawMessage(`{"n": 3}`), &rheo.AppendOptions{Partition: ptr(0), ID: "e3"})
		b.append(s, json.RawMessage(`{"n": 4}`), &rheo.AppendOptions{Partition: ptr(0), ID: "e4"})
		leases := b.fetch(s, g, nil)
		require.Len(t, leases, 4)
		byID := map[string]rheo.Lease{}
		for _, l := range leases {
			byID[l.Event.ID] = l
		}
		// Dead-letter out of order; e4 is acked, not dead.
		rejectedAt := b.clock.Advance(time.Second)
		require.NoError(t, b.d.Reject(b.ctx, byID["e1"].LeaseID, "r1"))
		require.NoError(t, b.d.Reject(b.ctx, byID["e3"].LeaseID, "r3"))
		require.NoError(t, b.d.Reject(b.ctx, byID["e2"].LeaseID, "r2"))
		require.NoError(t, b.d.Ack(b.ctx, byID["e4"].LeaseID))

		all := b.deadLetters(s, g)
		var ids []string
		for _, d := range all {
			ids = append(ids, d.Event.ID)
		}
		require.Equal(t, []string{"e2", "e3", "e1"}, ids)
		e1 := all[2]
		require.Equal(t, s, e1.Event.Stream)
		require.Equal(t, 1, e1.Event.Partition)
		require.Equal(t, int64(1), e1.Event.Sequence)
		require.Equal(t, "a", e1.Event.Type)
		require.Equal(t, "k1", e1.Event.Key)
		requireJSONEq(t, `{"type": "a", "n": 1}`, e1.Event.Payload)
		requireJSONEq(t, `{}`, e1.Event.Metadata)
		requireSameTime(t, at, e1.Event.TS)
		require.Equal(t, "r1", e1.Reason)
		require.Equal(t, 1, e1.Attempt)
		requireSameTime(t, rejectedAt, e1.DeadLetteredAt)
		requireJSONEq(t, `{"producer": "p"}`, all[0].Event.Metadata)

		page := func(after string) []string {
			letters, err := b.d.DeadLetters(b.ctx, s, g, &rheo.DeadLetterOptions{MaxCount: 2, After: after})
			require.NoError(t, err)
			var ids []string
			for _, d := range letters {
				ids = append(ids, d.Event.ID)
			}
			return ids
		}
		require.Equal(t, []string{"e2", "e3"}, page(""))
		require.Equal(t, []string{"e1"}, page("e3"))
		require.Empty(t, page("e1"))
		for _, after := range []string{"e4", "nope"} {
			_, err := b.d.DeadLetters(b.ctx, s, g, &rheo.DeadLetterOptions{After: after})
			require.ErrorIs(t, err, rheo.ErrCursorNotFound, "after %q", after)
		}
	})

	t.Run("group info counts inflight leases, pending retries and dead letters", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		ts := func(i int) time.Time { return Epoch.Add(-time.Hour + time.Duration(i)*time.Minute) }
		for i := 1; i <= 6; i++ {
			b.append(s, payload(i), &rheo.AppendOptions{TS: ptr(ts(i))})
		}
		info := b.info(s, g)
		require.Equal(t, rheo.GroupInfo{Lag: 6, OldestUnsettledTS: info.OldestUnsettledTS}, info)
		require.NotNil(t, info.OldestUnsettledTS)
		requireSameTime(t, ts(1), *info.OldestUnsettledTS, "events not offered yet count as unsettled")

		require.NoError(t, b.d.Ack(b.ctx, b.fetchOne(s, g, time.Hour).LeaseID))        // 1: acked
		require.NoError(t, b.d.Reject(b.ctx, b.fetchOne(s, g, time.Hour).LeaseID, "")) // 2: dead letter
		b.fetchOne(s, g, 10*time.Second)                                               // 3: will expire
		_, err := b.d.Retry(b.ctx, b.fetchOne(s, g, time.Hour).LeaseID, &rheo.RetryOptions{Delay: time.Hour})
		require.NoError(t, err)     // 4: waiting for its delay
		b.fetchOne(s, g, time.Hour) // 5: inflight
		b.clock.Advance(20 * time.Second)

		info = b.info(s, g)
		require.Equal(t, int64(4), info.Lag)
		require.Equal(t, int64(1), info.Inflight)
		require.Equal(t, int64(2), info.PendingRetry, "a retry waiting for its delay and an expired lease")
		require.Equal(t, int64(1), info.DeadLetters)
		require.NotNil(t, info.OldestUnsettledTS)
		requireSameTime(t, ts(3), *info.OldestUnsettledTS)
		require.Equal(t, int64(4), b.lag(s, g, nil).Total)
	})

	t.Run("group info finds the oldest unsettled event of a long backlog whose timestamps go back and forth", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		// 1-1000 at minute 10, 1001-2000 at 20, 2001-3100 at 3, 3101-4100
		// at 20: the oldest events lie in the middle.
		appendTimes(b, s, []int{1000, 1000, 1100, 1000}, []int{10, 20, 3, 20})
		minute := func(m int) time.Time { return Epoch.Add(time.Duration(m) * time.Minute) }
		for after, oldest := range map[int64]int{0: 3, 1000: 3, 2000: 3, 2048: 3, 3100: 20, 4000: 20} {
			g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(after)})
			info := b.info(s, g)
			require.NotNil(t, info.OldestUnsettledTS, "start_after %d", after)
			requireSameTime(t, minute(oldest), *info.OldestUnsettledTS, fmt.Sprintf("start_after %d", after))
		}
		g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(4100))})
		require.Nil(t, b.info(s, g).OldestUnsettledTS, "nothing unsettled")

		// An old event reopened among newer ones.
		b.requireReplay()
		g = b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(3100))})
		old, err := b.d.Read(b.ctx, s, &rheo.ReadOptions{After: 2499, MaxCount: 1})
		require.NoError(t, err)
		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{EventIDs: []string{old[0].ID}})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		info := b.info(s, g)
		require.NotNil(t, info.OldestUnsettledTS)
		requireSameTime(t, minute(3), *info.OldestUnsettledTS, "a reopened event counts")
	})

	t.Run("leases lists the deliveries in progress, the soonest due first", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 4)
		first := b.fetchOne(s, g, time.Minute) // 1: leased for a minute
		second := b.fetchOne(s, g, time.Hour)  // 2: leased for an hour
		third := b.fetchOne(s, g, time.Hour)   // 3: retried in 10 s
		require.NoError(t, b.d.Ack(b.ctx, first.LeaseID))
		_, err := b.d.Retry(b.ctx, third.LeaseID, &rheo.RetryOptions{Reason: "later", Delay: 10 * time.Second})
		require.NoError(t, err)

		got, err := b.d.Leases(b.ctx, s, g, 0)
		require.NoError(t, err)
		require.Len(t, got, 2, "the acked one is gone, the unoffered one is not a delivery")
		require.Equal(t, third.Event.ID, got[0].EventID)
		require.Equal(t, "pending", got[0].State)
		require.Equal(t, "later", got[0].Reason)
		requireSameTime(t, Epoch.Add(10*time.Second), got[0].ExpiresAt)
		require.Equal(t, second.Event.ID, got[1].EventID)
		require.Equal(t, "leased", got[1].State)
		require.Equal(t, second.ConsumerID, got[1].ConsumerID)
		require.Equal(t, 1, got[1].Attempt)
		require.NotNil(t, got[1].LeasedAt)
		requireSameTime(t, Epoch, *got[1].LeasedAt)
		requireSameTime(t, second.ExpiresAt, got[1].ExpiresAt)
		require.Equal(t, int64(2), got[1].Sequence)

		got, err = b.d.Leases(b.ctx, s, g, 1)
		require.NoError(t, err)
		require.Len(t, got, 1, "at most maxCount")
		_, err = b.d.Leases(b.ctx, s, g, -1)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		_, err = b.d.Leases(b.ctx, s, "missing", 0)
		require.ErrorIs(t, err, rheo.ErrGroupNotFound)
	})

	t.Run("group info of a consumed group has no oldest unsettled event", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		require.Nil(t, b.info(s, g).OldestUnsettledTS, "an empty stream")
		b.appendN(s, 2)
		b.drain(s, g)
		require.Equal(t, rheo.GroupInfo{}, b.info(s, g))
	})
}

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

		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromSequence: ptr(int64(2))})
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		require.Equal(t, []int64{2}, b.frontiers(s, g), "the frontier moves back")
		require.Equal(t, int64(3), b.lag(s, g, nil).Total)
		leases := b.fetch(s, g, nil)
		require.Equal(t, []int64{3, 4, 5}, sequences(leases))
		for _, l := range leases {
			require.Equal(t, 1, l.Attempt)
		}
		n, err = b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromSequence: ptr(int64(0))})
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
		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromSequence: ptr(int64(0))})
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
		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromSequence: ptr(int64(0))})
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
		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromSequence: ptr(int64(1))})
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
		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromSequence: ptr(int64(4))})
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

		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{EventIDs: []string{"e1", "e2", "e3", "e4", "e5", "unknown"}})
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
		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{EventIDs: []string{"p0", "p1"}, Partitions: []int{1}})
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

		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromTS: at(10), Partitions: []int{0, 1}})
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
		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromTS: ptr(Epoch.Add(11 * time.Minute))})
		require.NoError(t, err)
		require.Equal(t, int64(1500), n)
		require.Equal(t, []int64{2000}, b.frontiers(s, g))
		n, err = b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromTS: ptr(Epoch.Add(21 * time.Minute))})
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
		n, err := b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromSequence: ptr(int64(0)), Partitions: []int{1}})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.Equal(t, []int64{1, 0}, b.frontiers(s, g))
		require.Equal(t, []position{{1, 1}}, positions(b.fetch(s, g, nil)))
		n, err = b.d.Replay(b.ctx, s, g, rheo.ReplayOptions{FromSequence: ptr(int64(0)), Partitions: []int{}})
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
			_, err := b.d.Replay(b.ctx, s, g, opts)
			require.ErrorIs(t, err, rheo.ErrInvalidReplayOpts, name)
		}
	})
}

func resetCases(t *testing.T, h Harness) {
	t.Run("reset without confirm reports confirm_required before anything else", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		missing := uniqueName("missing")
		for name, args := range map[string][2]string{"missing stream": {missing, missing}, "missing group": {s, missing}, "group": {s, g}} {
			err := b.d.ResetGroup(b.ctx, args[0], args[1], rheo.ResetOptions{StartAfter: ptr(int64(-1)), Partitions: []int{99}})
			require.ErrorIs(t, err, rheo.ErrConfirmRequired, name)
		}
	})

	t.Run("reset drops leases, retries and dead letters and starts at the beginning", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		before := b.appendN(s, 4)
		leases := b.fetch(s, g, nil)
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
		_, err := b.d.Retry(b.ctx, leases[1].LeaseID, &rheo.RetryOptions{Delay: time.Hour})
		require.NoError(t, err)
		require.NoError(t, b.d.Reject(b.ctx, leases[2].LeaseID, ""))

		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, rheo.ResetOptions{Confirm: true}))
		require.ErrorIs(t, b.d.Ack(b.ctx, leases[3].LeaseID), rheo.ErrStaleLease)
		require.Empty(t, b.deadLetters(s, g))
		info := b.info(s, g)
		require.Equal(t, int64(4), info.Lag)
		require.Zero(t, info.Inflight+info.PendingRetry+info.DeadLetters)
		again := b.fetch(s, g, nil)
		require.Equal(t, []int64{1, 2, 3, 4}, sequences(again))
		for _, l := range again {
			require.Equal(t, 1, l.Attempt)
		}
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Equal(t, eventSequences(before), eventSequences(events), "the log is kept")
	})

	t.Run("reset with start_after places the cursor after it", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 5)
		b.drain(s, g)
		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, rheo.ResetOptions{Confirm: true, StartAfter: ptr(int64(3))}))
		require.Equal(t, []int64{3}, b.frontiers(s, g))
		require.Equal(t, []int64{4, 5}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("reset with start_at places the cursor at the first event at or after it", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		for m := range 4 {
			b.append(s, payload(m), &rheo.AppendOptions{TS: ptr(Epoch.Add(time.Duration(m) * time.Minute))})
		}
		b.drain(s, g)
		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, rheo.ResetOptions{Confirm: true, StartAt: ptr(Epoch.Add(2 * time.Minute))}))
		require.Equal(t, []int64{3, 4}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("reset limited to partitions keeps the others' state", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		g := b.group(s, nil)
		b.appendTo(s, 0, 1)
		b.appendTo(s, 1, 2)
		b.appendTo(s, 1, 3)
		leases := b.fetch(s, g, nil)
		require.Equal(t, []position{{0, 1}, {1, 1}, {1, 2}}, positions(leases))
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
		require.NoError(t, b.d.Reject(b.ctx, leases[1].LeaseID, ""))

		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, rheo.ResetOptions{Confirm: true, Partitions: []int{0}}))
		require.Equal(t, []int64{0, 1}, b.frontiers(s, g))
		require.Len(t, b.deadLetters(s, g), 1, "partition 1 keeps its dead letter")
		require.NoError(t, b.d.Ack(b.ctx, leases[2].LeaseID), "partition 1 keeps its lease")
		require.Equal(t, []position{{0, 1}}, positions(b.fetch(s, g, nil)))
	})

	t.Run("reset with start_after and start_at together reports invalid_argument", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		err := b.d.ResetGroup(b.ctx, s, g, rheo.ResetOptions{Confirm: true, StartAfter: ptr(int64(1)), StartAt: ptr(Epoch)})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		err = b.d.ResetGroup(b.ctx, s, g, rheo.ResetOptions{Confirm: true, StartAfter: ptr(int64(-1))})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})
}

func partitionCases(t *testing.T, h Harness) {
	t.Run("holes block the frontier", func(t *testing.T) {
		b := setup(t, h)
		b.requireContiguousFrontier()
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 4)
		leases := b.fetch(s, g, nil)
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
		require.NoError(t, b.d.Ack(b.ctx, leases[2].LeaseID))
		lag := b.lag(s, g, nil)
		require.Equal(t, rheo.PartitionLag{Partition: 0, Frontier: 1, HighWatermark: 4, Lag: 3}, lag.Partitions[0])
		require.NoError(t, b.d.Ack(b.ctx, leases[1].LeaseID))
		require.Equal(t, []int64{3}, b.frontiers(s, g))
	})

	t.Run("reject advances the frontier like ack", func(t *testing.T) {
		b := setup(t, h)
		b.requireContiguousFrontier()
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 3)
		leases := b.fetch(s, g, nil)
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
		require.NoError(t, b.d.Ack(b.ctx, leases[2].LeaseID))
		require.NoError(t, b.d.Reject(b.ctx, leases[1].LeaseID, ""))
		require.Equal(t, []int64{3}, b.frontiers(s, g))
	})

	t.Run("retry does not advance the frontier", func(t *testing.T) {
		b := setup(t, h)
		b.requireContiguousFrontier()
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 2)
		leases := b.fetch(s, g, nil)
		_, err := b.d.Retry(b.ctx, leases[0].LeaseID, nil)
		require.NoError(t, err)
		require.NoError(t, b.d.Ack(b.ctx, leases[1].LeaseID))
		require.Equal(t, []int64{0}, b.frontiers(s, g))
		require.NoError(t, b.d.Ack(b.ctx, b.fetchOne(s, g, time.Minute).LeaseID))
		require.Equal(t, []int64{2}, b.frontiers(s, g))
	})

	t.Run("sequences are allocated per partition", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		var got []position
		for _, p := range []int{2, 0, 2, 2, 1, 0} {
			ev := b.appendTo(s, p, 0)
			got = append(got, position{ev.Partition, ev.Sequence})
		}
		require.Equal(t, []position{{2, 1}, {0, 1}, {2, 2}, {2, 3}, {1, 1}, {0, 2}}, got)
		lag := b.lag(s, b.group(s, nil), nil)
		require.Equal(t, []rheo.PartitionLag{
			{Partition: 0, Frontier: 0, HighWatermark: 2, Lag: 2},
			{Partition: 1, Frontier: 0, HighWatermark: 1, Lag: 1},
			{Partition: 2, Frontier: 0, HighWatermark: 3, Lag: 3},
		}, lag.Partitions)
		require.Equal(t, int64(6), lag.Total)
	})

	t.Run("keys route by md5 as rheo.PartitionForKey computes", func(t *testing.T) {
		b := setup(t, h)
		keys := []string{"a", "b", "user-42", "order:1234", "ümlaut", "日本語", "key with spaces", "0", strings.Repeat("long", 64)}
		for _, count := range []int{1, 2, 3, 7, 16} {
			s := b.stream(count)
			for _, key := range keys {
				want := rheo.PartitionForKey(key, count)
				require.Equal(t, want, b.append(s, payload(1), &rheo.AppendOptions{Key: key}).Partition, "key %q of %d", key, count)
				body, err := json.Marshal(map[string]string{"key": key})
				require.NoError(t, err)
				require.Equal(t, want, b.append(s, body, nil).Partition, "payload key %q of %d", key, count)
			}
		}
	})

	t.Run("fetch gives every partition with work at least one lease", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(4)
		g := b.group(s, nil)
		for p := range 4 {
			for i := range 3 {
				b.appendTo(s, p, i)
			}
		}
		first := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 4})
		require.Equal(t, []position{{0, 1}, {1, 1}, {2, 1}, {3, 1}}, positions(first))
		second := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 6})
		require.Len(t, second, 6)
		perPartition := map[int]int{}
		for _, l := range second {
			perPartition[l.Event.Partition]++
		}
		require.Len(t, perPartition, 4, "each of the 4 partitions got a lease")
		requireOrdered(t, second)
		rest := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 10})
		require.Len(t, rest, 2)
		seen := map[position]bool{}
		for _, l := range slices.Concat(first, second, rest) {
			require.False(t, seen[position{l.Event.Partition, l.Event.Sequence}])
			seen[position{l.Event.Partition, l.Event.Sequence}] = true
		}
		require.Len(t, seen, 12)
	})

	t.Run("fetch skips partitions without work", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(4)
		g := b.group(s, nil)
		b.appendTo(s, 1, 0)
		b.appendTo(s, 3, 0)
		b.appendTo(s, 3, 1)
		require.Equal(t, []position{{1, 1}, {3, 1}}, positions(b.fetch(s, g, &rheo.FetchOptions{MaxCount: 2})))
	})

	t.Run("fetch results are ordered by partition and sequence", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		g := b.group(s, nil)
		for i := range 12 {
			b.appendTo(s, (i*7)%3, i)
		}
		for range 3 {
			leases := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 5})
			requireOrdered(t, leases)
		}
	})

	t.Run("fetch takes a partition's events in sequence order", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 6)
		leases := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 2})
		require.Equal(t, []int64{1, 2}, sequences(leases))
		_, err := b.d.Retry(b.ctx, leases[0].LeaseID, nil)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 3}, sequences(b.fetch(s, g, &rheo.FetchOptions{MaxCount: 2})), "a retry ahead of new events")
	})

	t.Run("fetch with an empty partitions list claims nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		g := b.group(s, nil)
		b.appendTo(s, 0, 0)
		b.appendTo(s, 1, 0)
		require.Empty(t, b.fetch(s, g, &rheo.FetchOptions{Partitions: []int{}}))
		require.Equal(t, []position{{1, 1}}, positions(b.fetch(s, g, &rheo.FetchOptions{Partitions: []int{1}})))
		require.Equal(t, []position{{0, 1}}, positions(b.fetch(s, g, nil)))
	})

	t.Run("lag reports the partitions asked for in order, and their total", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(5)), Partitions: []int{2}})
		b.appendTo(s, 0, 0)
		b.appendTo(s, 2, 0)
		b.appendTo(s, 2, 0)
		lag := b.lag(s, g, []int{2, 0})
		require.Equal(t, []rheo.PartitionLag{
			{Partition: 0, Frontier: 0, HighWatermark: 1, Lag: 1},
			{Partition: 2, Frontier: 5, HighWatermark: 2, Lag: 0},
		}, lag.Partitions)
		require.Equal(t, int64(1), lag.Total)
		require.Empty(t, b.lag(s, g, []int{}).Partitions)
		require.Len(t, b.lag(s, g, nil).Partitions, 3)
	})
}

func requireOrdered(t *testing.T, leases []rheo.Lease) {
	t.Helper()
	require.True(t, slices.IsSortedFunc(leases, func(a, b rheo.Lease) int {
		if a.Event.Partition != b.Event.Partition {
			return a.Event.Partition - b.Event.Partition
		}
		return int(a.Event.Sequence - b.Event.Sequence)
	}), "leases ordered by (partition, sequence): %v", positions(leases))
}

func startCases(t *testing.T, h Harness) {
	t.Run("start_after skips the events up to it", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.appendN(s, 5)
		g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(3))})
		require.Equal(t, []int64{3}, b.frontiers(s, g))
		require.Equal(t, []int64{4, 5}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("start_after beyond the high watermark skips events up to it", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.appendN(s, 3)
		g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(10))})
		require.Equal(t, rheo.PartitionLag{Partition: 0, Frontier: 10, HighWatermark: 3, Lag: 0}, b.lag(s, g, nil).Partitions[0])
		require.Empty(t, b.fetch(s, g, nil))
		b.appendN(s, 9)
		require.Equal(t, []int64{11, 12}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("start_at starts at the first event at or after the time", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		for _, m := range []int{0, 10, 20, 5} {
			b.append(s, payload(m), &rheo.AppendOptions{TS: ptr(Epoch.Add(time.Duration(m) * time.Minute))})
		}
		g := b.group(s, &rheo.CreateGroupOptions{StartAt: ptr(Epoch.Add(10 * time.Minute))})
		require.Equal(t, []int64{1}, b.frontiers(s, g))
		require.Equal(t, []int64{2, 3, 4}, sequences(b.fetch(s, g, nil)), "a later event with an earlier ts is still delivered")
	})

	t.Run("start_at finds the first event at or after the time in a long log whose timestamps go back and forth", func(t *testing.T) {
		b := setup(t, h)
		for _, log := range []struct {
			counts, minutes []int
			next            map[int]int64 // start_at minute -> first sequence offered
		}{
			// 1-1000 at minute 10, 1001-2000 at 5, 2001-3000 at 20,
			// 3001-3500 at 15: the first event at or after a time is not
			// where the timestamps first pass it.
			{[]int{1000, 1000, 1000, 500}, []int{10, 5, 20, 15},
				map[int]int64{0: 1, 7: 1, 10: 1, 11: 2001, 15: 2001, 20: 2001, 21: 3501}},
			// 1-1500 at 20, 1501-2500 at 12, 2501-3500 at 5, 3501-4000 at
			// 30: the earliest events are the latest until sequence 3500.
			{[]int{1500, 1000, 1000, 500}, []int{20, 12, 5, 30},
				map[int]int64{3: 1, 12: 1, 13: 1, 20: 1, 21: 3501, 30: 3501, 31: 4001}},
		} {
			s := b.stream(1)
			appendTimes(b, s, log.counts, log.minutes)
			for minute, next := range log.next {
				g := b.group(s, &rheo.CreateGroupOptions{StartAt: ptr(Epoch.Add(time.Duration(minute) * time.Minute))})
				require.Equal(t, []int64{next - 1}, b.frontiers(s, g), "log %v at %v, start_at minute %d", log.counts, log.minutes, minute)
			}
		}
	})

	t.Run("start_at after every event starts after the high watermark", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.appendN(s, 3)
		g := b.group(s, &rheo.CreateGroupOptions{StartAt: ptr(Epoch.Add(time.Hour))})
		require.Equal(t, []int64{3}, b.frontiers(s, g))
		require.Empty(t, b.fetch(s, g, nil))
		b.appendN(s, 1)
		require.Equal(t, []int64{4}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("start options apply only to the listed partitions", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		for p := range 3 {
			for i := range 3 {
				b.appendTo(s, p, i)
			}
		}
		g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(2)), Partitions: []int{0, 2}})
		require.Equal(t, []int64{2, 0, 2}, b.frontiers(s, g))
		require.Equal(t, []position{{0, 3}, {1, 1}, {1, 2}, {1, 3}, {2, 3}}, positions(b.fetch(s, g, nil)))
	})

	t.Run("start_after and start_at together report invalid_argument", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		err := b.d.CreateGroup(b.ctx, s, uniqueName("g"), &rheo.CreateGroupOptions{StartAfter: ptr(int64(1)), StartAt: ptr(Epoch)})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		groups, err := b.d.ListGroups(b.ctx, s)
		require.NoError(t, err)
		require.Empty(t, groups)
	})
}

// appendTimes appends, for each i, counts[i] events in one batch whose
// ts is minutes[i] minutes after Epoch, moving the clock there and back.
func appendTimes(b *bundle, stream string, counts, minutes []int) {
	b.t.Helper()
	defer b.clock.Set(b.clock.Now())
	for i, n := range counts {
		b.clock.Set(Epoch.Add(time.Duration(minutes[i]) * time.Minute))
		items := make([]rheo.BatchItem, n)
		for j := range items {
			items[j] = rheo.BatchItem{Payload: payload(j)}
		}
		_, err := b.d.AppendBatch(b.ctx, stream, items, nil)
		require.NoError(b.t, err)
	}
}
