package drivertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// appendKeys appends one event per key to the stream's partition 0, in
// order, and returns them; "" appends an event without a key.
func (b *bundle) appendKeys(stream string, keys ...string) []rheo.Event {
	b.t.Helper()
	return b.appendKeysTo(stream, 0, keys...)
}

// appendKeysTo appends one event per key to partition p, in order.
func (b *bundle) appendKeysTo(stream string, p int, keys ...string) []rheo.Event {
	b.t.Helper()
	items := make([]rheo.BatchItem, len(keys))
	for i, k := range keys {
		items[i] = rheo.BatchItem{Payload: payload(i + 1), Key: k}
	}
	events, err := b.d.AppendBatch(b.ctx, stream, items, &rheo.AppendBatchOptions{Partition: &p})
	require.NoError(b.t, err)
	require.Len(b.t, events, len(keys))
	return events
}

// orderedGroup creates a group with the given ordering and max attempts
// (0: the default).
func (b *bundle) orderedGroup(stream string, ordering rheo.Ordering, maxAttempts int) string {
	b.t.Helper()
	return b.group(stream, &rheo.CreateGroupOptions{Ordering: ordering, MaxAttempts: maxAttempts})
}

// ordering returns the group's ordering as list_groups reports it.
func (b *bundle) ordering(stream, group string) rheo.Ordering {
	b.t.Helper()
	groups, err := b.d.ListGroups(b.ctx, stream)
	require.NoError(b.t, err)
	for _, g := range groups {
		if g.Name == group {
			return g.Ordering
		}
	}
	require.FailNow(b.t, fmt.Sprintf("group %q is not listed", group))
	return ""
}

func (b *bundle) ack(leases ...rheo.Lease) {
	b.t.Helper()
	for _, l := range leases {
		require.NoError(b.t, b.d.Ack(b.ctx, l.LeaseID))
	}
}

// fetchMany fetches up to 100 leases of lease.
func (b *bundle) fetchMany(stream, group string, lease time.Duration) []rheo.Lease {
	b.t.Helper()
	return b.fetch(stream, group, &rheo.FetchOptions{MaxCount: 100, LeaseDuration: lease})
}

func orderingCases(t *testing.T, h Harness) {
	orderingSettingCases(t, h)
	keyOrderingCases(t, h)
	keySettleCases(t, h)
	keyProgressCases(t, h)
	partitionOrderingCases(t, h)
	orderingChangeCases(t, h)
}

func orderingSettingCases(t *testing.T, h Harness) {
	t.Run("a group's ordering defaults to none and list_groups reports each group's", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		plain := b.group(s, nil)
		for _, o := range []rheo.Ordering{rheo.OrderingNone, rheo.OrderingKey, rheo.OrderingPartition} {
			g := b.orderedGroup(s, o, 0)
			require.Equal(t, o, b.ordering(s, g))
		}
		require.Equal(t, rheo.OrderingNone, b.ordering(s, plain))
	})

	t.Run("set_ordering changes a group's ordering and nothing else", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, &rheo.CreateGroupOptions{MaxAttempts: 3})
		for _, o := range []rheo.Ordering{rheo.OrderingKey, rheo.OrderingPartition, rheo.OrderingPartition, rheo.OrderingNone} {
			require.NoError(t, b.d.SetOrdering(b.ctx, s, g, o))
			require.Equal(t, o, b.ordering(s, g))
		}
		groups, err := b.d.ListGroups(b.ctx, s)
		require.NoError(t, err)
		require.Equal(t, 3, groups[0].MaxAttempts)
	})

	t.Run("an ordering other than none, key and partition is invalid_argument and changes nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		for _, word := range []rheo.Ordering{"sideways", "Key", "KEY", " key", "none ", "partitions", ""} {
			require.ErrorIs(t, b.d.SetOrdering(b.ctx, s, g, word), rheo.ErrInvalidArgument, "set_ordering %q", word)
			if word != "" { // an empty Ordering creates a group ordered by nothing
				name := uniqueName("g")
				err := b.d.CreateGroup(b.ctx, s, name, &rheo.CreateGroupOptions{Ordering: word})
				require.ErrorIs(t, err, rheo.ErrInvalidArgument, "create_group %q", word)
			}
		}
		groups, err := b.d.ListGroups(b.ctx, s)
		require.NoError(t, err)
		require.Len(t, groups, 1, "no group was created")
		require.Equal(t, rheo.OrderingKey, groups[0].Ordering, "the ordering is unchanged")
	})

	t.Run("set_ordering checks the stream, then the group, then the word", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		missing := uniqueName("missing")
		require.ErrorIs(t, b.d.SetOrdering(b.ctx, missing, missing, "sideways"), rheo.ErrStreamNotFound)
		require.ErrorIs(t, b.d.SetOrdering(b.ctx, "has space", "g", rheo.OrderingKey), rheo.ErrStreamNotFound)
		require.ErrorIs(t, b.d.SetOrdering(b.ctx, s, missing, "sideways"), rheo.ErrGroupNotFound)
		require.ErrorIs(t, b.d.SetOrdering(b.ctx, s, "has space", rheo.OrderingKey), rheo.ErrGroupNotFound)
		require.ErrorIs(t, b.d.CreateGroup(b.ctx, missing, "g", &rheo.CreateGroupOptions{Ordering: "sideways"}),
			rheo.ErrStreamNotFound)
	})

	t.Run("none holds several leases of one key and brings a retried event back after later ones", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingNone, 0)
		b.appendKeys(s, "a", "a", "a")
		leases := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 2})
		require.Equal(t, []int64{1, 2}, sequences(leases), "one key, two leases at once")
		outcome, err := b.d.Retry(b.ctx, leases[0].LeaseID, nil)
		require.NoError(t, err)
		require.Equal(t, rheo.Retrying, outcome)
		require.Equal(t, []int64{1, 3}, sequences(b.fetchMany(s, g, time.Minute)), "the retry and the later event of its key")
	})
}

func keyOrderingCases(t *testing.T, h Harness) {
	t.Run("key leases no event while an earlier event of its key is leased", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a", "b", "a", "b")
		first := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1, 3}, sequences(first), "the first event of each key")
		require.Empty(t, b.fetchMany(s, g, time.Minute), "the later events of both keys wait")
		b.ack(first[0])
		second := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{2}, sequences(second), "a's next event; b's still waits for 3")
		require.Equal(t, 1, second[0].Attempt)
		b.ack(first[1])
		require.Equal(t, []int64{5}, sequences(b.fetchMany(s, g, time.Minute)))
		b.ack(second[0])
		require.Equal(t, []int64{4}, sequences(b.fetchMany(s, g, time.Minute)))
	})

	t.Run("key does not order events without a key", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "", "", "a", "", "a")
		require.Equal(t, []int64{1, 2, 3, 4}, sequences(b.fetchMany(s, g, time.Minute)))
	})

	t.Run("key orders a key within its partition only", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeysTo(s, 0, "a", "a")
		b.appendKeysTo(s, 1, "a", "a")
		require.Equal(t, []position{{0, 1}, {1, 1}}, positions(b.fetchMany(s, g, time.Minute)))
	})

	t.Run("key: a blocked key does not stall the other keys", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		keys := make([]string, 0, 61)
		for range 60 {
			keys = append(keys, "hot")
		}
		b.appendKeys(s, append(keys, "cold")...)
		require.Equal(t, []int64{1}, sequences(b.fetch(s, g, &rheo.FetchOptions{MaxCount: 1})))
		cold := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 1})
		require.Equal(t, []int64{61}, sequences(cold), "the 59 blocked events take no share of max_count")
		require.Equal(t, "cold", cold[0].Event.Key)
		require.Empty(t, b.fetchMany(s, g, time.Minute))
	})

	t.Run("key stays round-robin over the partitions with claimable work", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeysTo(s, 0, "a", "a", "a", "b")
		b.appendKeysTo(s, 1, "c", "c")
		b.appendKeysTo(s, 2, "d", "e", "f")
		leases := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 3})
		require.Len(t, leases, 3)
		seen := map[int]bool{}
		for _, l := range leases {
			seen[l.Event.Partition] = true
		}
		require.Len(t, seen, 3, "each of the three partitions gets a lease: %v", positions(leases))
		require.ElementsMatch(t, []position{{0, 1}, {0, 4}, {1, 1}, {2, 1}, {2, 2}, {2, 3}},
			positions(append(leases, b.fetchMany(s, g, time.Minute)...)), "then everything claimable")
	})

	t.Run("key hands out each key's events in sequence order, one at a time", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		// Each key's events in sequence order, and how many are handled.
		order := map[string][]int64{}
		done := map[string]int{}
		for p := range 2 {
			keys := make([]string, 40)
			for i := range keys {
				keys[i] = fmt.Sprintf("k%d", (i*7+p)%5)
			}
			for _, ev := range b.appendKeysTo(s, p, keys...) {
				k := fmt.Sprintf("%d/%s", ev.Partition, ev.Key)
				order[k] = append(order[k], ev.Sequence)
			}
		}
		handled := 0
		for round := 0; handled < 80; round++ {
			require.Less(t, round, 200, "the events drain")
			leases := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 7})
			require.NotEmpty(t, leases, "something is claimable while events are left")
			held := map[string]bool{}
			for _, l := range leases {
				k := fmt.Sprintf("%d/%s", l.Event.Partition, l.Event.Key)
				require.False(t, held[k], "two leases of %s in one fetch", k)
				held[k] = true
				require.Equal(t, order[k][done[k]], l.Event.Sequence, "%s goes in sequence order", k)
			}
			// Ack some leases, retry the others: keys stay blocked
			// across fetches, and retried events come back first.
			for i, l := range leases {
				k := fmt.Sprintf("%d/%s", l.Event.Partition, l.Event.Key)
				if i%2 == 0 || round%3 == 0 {
					b.ack(l)
					done[k]++
					handled++
					continue
				}
				outcome, err := b.d.Retry(b.ctx, l.LeaseID, nil)
				require.NoError(t, err)
				require.Equal(t, rheo.Retrying, outcome)
			}
		}
		require.Equal(t, int64(0), b.lag(s, g, nil).Total)
	})
}

func keySettleCases(t *testing.T, h Harness) {
	t.Run("key: a retry waiting for its delay blocks the later events of its key", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a", "b")
		leases := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1, 3}, sequences(leases))
		_, err := b.d.Retry(b.ctx, leases[0].LeaseID, &rheo.RetryOptions{Delay: 10 * time.Second})
		require.NoError(t, err)
		require.Empty(t, b.fetchMany(s, g, time.Minute), "2 waits for the retry of 1")
		b.clock.Advance(10 * time.Second)
		again := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1}, sequences(again), "the retry comes back before the later event of its key")
		require.Equal(t, 2, again[0].Attempt)
		b.ack(again[0])
		next := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{2}, sequences(next))
		require.Equal(t, 1, next[0].Attempt, "a blocked event was never leased")
	})

	t.Run("key: an expired lease is leased again before the later events of its key", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a")
		require.Equal(t, []int64{1}, sequences(b.fetchMany(s, g, time.Second)))
		b.clock.Advance(time.Second)
		again := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1}, sequences(again))
		require.Equal(t, 2, again[0].Attempt)
	})

	t.Run("key: a dead letter by reject unblocks the later events of its key", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a", "a")
		leases := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1}, sequences(leases))
		require.NoError(t, b.d.Reject(b.ctx, leases[0].LeaseID, "poison"))
		require.Equal(t, []int64{2}, sequences(b.fetchMany(s, g, time.Minute)))
	})

	t.Run("key: a retry at the attempt limit dead-letters and unblocks the later events of its key", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 1)
		b.appendKeys(s, "a", "a")
		leases := b.fetchMany(s, g, time.Minute)
		outcome, err := b.d.Retry(b.ctx, leases[0].LeaseID, &rheo.RetryOptions{Delay: time.Hour})
		require.NoError(t, err)
		require.Equal(t, rheo.DeadLettered, outcome)
		require.Equal(t, []int64{2}, sequences(b.fetchMany(s, g, time.Minute)))
	})

	t.Run("key: a lease a fetch dead-letters on expiry unblocks its key within that same fetch", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 1)
		b.appendKeys(s, "a", "a", "a")
		require.Equal(t, []int64{1}, sequences(b.fetchMany(s, g, time.Second)))
		b.clock.Advance(time.Second)
		leases := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{2}, sequences(leases), "one fetch dead-letters 1 and leases 2")
		letters := b.deadLetters(s, g)
		require.Len(t, letters, 1)
		require.Equal(t, "lease_expired", letters[0].Reason)
	})

	t.Run("key: ack_batch unblocks the next event of each key", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "b", "a", "b", "a")
		leases := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1, 2}, sequences(leases))
		results, err := b.d.AckBatch(b.ctx, []string{leases[0].LeaseID, leases[1].LeaseID, leases[0].LeaseID})
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false}, []bool{results[0].OK, results[1].OK, results[2].OK})
		require.Equal(t, []int64{3, 4}, sequences(b.fetchMany(s, g, time.Minute)))
	})

	t.Run("key: an ack inside a transaction unblocks the next event of its key when it commits", func(t *testing.T) {
		b := setup(t, h)
		tr, ok := b.d.(driver.Transactor)
		if !ok {
			t.Skip("the driver does not join transactions (driver.Transactor)")
		}
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a")
		leases := b.fetchMany(s, g, time.Minute)
		rollback := errors.New("roll back")
		err := tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			require.NoError(t, tx.Ack(ctx, leases[0].LeaseID))
			return rollback
		})
		require.ErrorIs(t, err, rollback)
		require.Empty(t, b.fetchMany(s, g, time.Minute), "the rolled back ack unblocked nothing")
		require.NoError(t, tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			return tx.Ack(ctx, leases[0].LeaseID)
		}))
		require.Equal(t, []int64{2}, sequences(b.fetchMany(s, g, time.Minute)))
	})
}

func keyProgressCases(t *testing.T, h Harness) {
	t.Run("key: a blocked event holds back the frontier and counts in lag, and is neither in flight nor pending retry", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		events := b.appendKeys(s, "a", "a", "b")
		leases := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1, 3}, sequences(leases))
		b.ack(leases[1])
		require.Equal(t, []int64{0}, b.frontiers(s, g))
		info := b.info(s, g)
		require.Equal(t, int64(3), info.Lag)
		require.Equal(t, int64(1), info.InFlight)
		require.Equal(t, int64(0), info.PendingRetry)
		require.NotNil(t, info.OldestUnsettledTS)
		requireSameTime(t, events[0].TS, *info.OldestUnsettledTS)
		deliveries, err := b.d.Leases(b.ctx, s, g, 0)
		require.NoError(t, err)
		require.Len(t, deliveries, 1, "leases lists the lease, not the event waiting behind it")
		require.Equal(t, int64(1), deliveries[0].Sequence)
		require.Equal(t, "leased", deliveries[0].State)
		b.ack(leases[0])
		require.Equal(t, []int64{1}, b.frontiers(s, g), "the blocked event now holds the frontier")
		require.Equal(t, int64(2), b.lag(s, g, nil).Total)
		b.ack(b.fetchMany(s, g, time.Minute)...)
		require.Equal(t, []int64{3}, b.frontiers(s, g))
	})

	t.Run("key: replay from_sequence does not count blocked events as offered and blocks them again", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a", "b", "a")
		first := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1, 3}, sequences(first))
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "1 and 3 were leased; 2 and 4 were only blocked")
		require.ErrorIs(t, b.d.Ack(b.ctx, first[0].LeaseID), rheo.ErrStaleLease)
		again := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1, 3}, sequences(again))
		require.Equal(t, 1, again[0].Attempt)
		b.ack(again...)
		require.Equal(t, []int64{2}, sequences(b.fetchMany(s, g, time.Minute)))
	})

	t.Run("key: reset_group clears blocked events with the rest", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a", "a")
		require.Equal(t, []int64{1}, sequences(b.fetchMany(s, g, time.Minute)))
		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAfter: ptr(int64(1))}))
		leases := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{2}, sequences(leases), "2 is claimable: nothing before it is in progress")
		require.Equal(t, 1, leases[0].Attempt)
		info := b.info(s, g)
		require.Equal(t, int64(2), info.Lag)
	})

	t.Run("key: drop_group removes blocked events, and a group created anew starts clean", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a")
		b.fetchMany(s, g, time.Minute)
		require.NoError(t, b.d.DropGroup(b.ctx, s, g, &rheo.DropOptions{Confirm: true}))
		require.NoError(t, b.d.CreateGroup(b.ctx, s, g, &rheo.CreateGroupOptions{Ordering: rheo.OrderingKey}))
		deliveries, err := b.d.Leases(b.ctx, s, g, 0)
		require.NoError(t, err)
		require.Empty(t, deliveries)
		require.Equal(t, []int64{1}, sequences(b.fetchMany(s, g, time.Minute)))
	})

	t.Run("key: prune stops at a blocked event, and a forced prune unblocks its key", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.retain(s)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "b", "a", "a", "a")
		leases := b.fetchMany(s, g, time.Hour*3)
		require.Equal(t, []int64{1, 2}, sequences(leases))
		b.ack(leases[0])
		b.age()
		n, err := b.d.Prune(b.ctx, s, nil)
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "the lease of 2 holds the frontier at 1")
		n, err = b.d.Prune(b.ctx, s, &rheo.PruneOptions{Force: true, MaxCount: 1})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.ErrorIs(t, b.d.Ack(b.ctx, leases[1].LeaseID), rheo.ErrStaleLease)
		require.Equal(t, []int64{3}, sequences(b.fetchMany(s, g, time.Minute)), "3 is no longer blocked behind the pruned 2")
	})
}

func partitionOrderingCases(t *testing.T, h Harness) {
	t.Run("partition hands out one event of a partition at a time, in sequence order", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingPartition, 0)
		b.appendKeys(s, "a", "b", "", "c")
		for seq := int64(1); seq <= 4; seq++ {
			leases := b.fetchMany(s, g, time.Minute)
			require.Equal(t, []int64{seq}, sequences(leases))
			require.Empty(t, b.fetchMany(s, g, time.Minute), "nothing else while %d is leased", seq)
			b.ack(leases...)
		}
		require.Empty(t, b.fetchMany(s, g, time.Minute))
	})

	t.Run("partition: a retry blocks its partition until it is handled", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingPartition, 0)
		b.appendKeys(s, "a", "b")
		leases := b.fetchMany(s, g, time.Minute)
		_, err := b.d.Retry(b.ctx, leases[0].LeaseID, &rheo.RetryOptions{Delay: 5 * time.Second})
		require.NoError(t, err)
		require.Empty(t, b.fetchMany(s, g, time.Minute))
		b.clock.Advance(5 * time.Second)
		again := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1}, sequences(again))
		require.Equal(t, 2, again[0].Attempt)
		b.clock.Advance(time.Minute)
		expired := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1}, sequences(expired), "an expired lease comes back first too")
		require.Equal(t, 3, expired[0].Attempt)
		require.NoError(t, b.d.Reject(b.ctx, expired[0].LeaseID, ""))
		require.Equal(t, []int64{2}, sequences(b.fetchMany(s, g, time.Minute)), "a dead letter frees the partition")
	})

	t.Run("partition: a lease a fetch dead-letters on expiry frees its partition within that same fetch", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingPartition, 1)
		b.appendKeys(s, "a", "b")
		b.fetchMany(s, g, time.Second)
		b.clock.Advance(time.Second)
		require.Equal(t, []int64{2}, sequences(b.fetchMany(s, g, time.Minute)))
		require.Len(t, b.deadLetters(s, g), 1)
	})

	t.Run("partition gives each partition with work its turn", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		g := b.orderedGroup(s, rheo.OrderingPartition, 0)
		b.appendKeysTo(s, 0, "a", "b")
		b.appendKeysTo(s, 2, "c", "d")
		leases := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []position{{0, 1}, {2, 1}}, positions(leases))
		b.ack(leases[1])
		require.Equal(t, []position{{2, 2}}, positions(b.fetchMany(s, g, time.Minute)))
	})
}

func orderingChangeCases(t *testing.T, h Harness) {
	t.Run("set_ordering takes effect from the next fetch and takes back no lease", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendKeys(s, "a", "a")
		leases := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1, 2}, sequences(leases))
		require.NoError(t, b.d.SetOrdering(b.ctx, s, g, rheo.OrderingKey))
		b.appendKeys(s, "a", "b")
		require.Equal(t, []int64{4}, sequences(b.fetchMany(s, g, time.Minute)), "3 waits for the leases of its key")
		_, err := b.d.Renew(b.ctx, leases[1].LeaseID, time.Minute)
		require.NoError(t, err, "the leases handed out before are still held")
		b.ack(leases[1])
		require.Empty(t, b.fetchMany(s, g, time.Minute), "3 still waits for 1")
		b.ack(leases[0])
		require.Equal(t, []int64{3}, sequences(b.fetchMany(s, g, time.Minute)))
	})

	t.Run("set_ordering to none makes blocked events pending and claimable at once", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a", "a")
		first := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1}, sequences(first))
		require.Equal(t, int64(0), b.info(s, g).PendingRetry)
		require.NoError(t, b.d.SetOrdering(b.ctx, s, g, rheo.OrderingNone))
		info := b.info(s, g)
		require.Equal(t, int64(1), info.InFlight)
		require.Equal(t, int64(2), info.PendingRetry, "the events that waited are pending now")
		deliveries, err := b.d.Leases(b.ctx, s, g, 0)
		require.NoError(t, err)
		require.Len(t, deliveries, 3)
		for _, d := range deliveries {
			if d.Sequence > 1 {
				require.Equal(t, "pending", d.State)
				require.Equal(t, 0, d.Attempt)
			}
		}
		leases := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{2, 3}, sequences(leases))
		for _, l := range leases {
			require.Equal(t, 1, l.Attempt)
		}
		b.ack(append(first, leases...)...)
		require.Equal(t, int64(0), b.lag(s, g, nil).Total)
	})

	t.Run("set_ordering from key to partition keeps one event of the partition at a time", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.orderedGroup(s, rheo.OrderingKey, 0)
		b.appendKeys(s, "a", "a", "b")
		first := b.fetchMany(s, g, time.Minute)
		require.Equal(t, []int64{1, 3}, sequences(first))
		require.NoError(t, b.d.SetOrdering(b.ctx, s, g, rheo.OrderingPartition))
		require.Empty(t, b.fetchMany(s, g, time.Minute))
		b.ack(first...)
		require.Equal(t, []int64{2}, sequences(b.fetchMany(s, g, time.Minute)), "the blocked event's turn")
	})
}
