package drivertest

import (
	"encoding/json"
	"fmt"
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
		var mine []rheo.StreamSummary
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
		require.Equal(t, int64(1), info.InFlight)
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
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{EventIDs: []string{old[0].ID}})
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
