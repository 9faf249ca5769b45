package drivertest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

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
