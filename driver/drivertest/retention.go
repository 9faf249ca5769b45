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

// retentionAge is the retention of the cases that prune: events appended
// at the clock qualify once the clock has moved past it.
const retentionAge = time.Hour

// retain sets the stream's retention to retentionAge.
func (b *bundle) retain(stream string) {
	b.t.Helper()
	require.NoError(b.t, b.d.SetRetention(b.ctx, stream, retentionAge))
}

// age moves the clock past the retention of every event appended so far.
func (b *bundle) age() {
	b.clock.Advance(retentionAge + time.Minute)
}

// prune prunes once; opts may be nil.
func (b *bundle) prune(stream string, opts *rheo.PruneOptions) int64 {
	b.t.Helper()
	n, err := b.d.Prune(b.ctx, stream, opts)
	require.NoError(b.t, err)
	return n
}

// streamRange returns the stream's retention and watermarks.
func (b *bundle) streamRange(stream string) rheo.StreamInfo {
	b.t.Helper()
	info, err := b.d.StreamInfo(b.ctx, stream)
	require.NoError(b.t, err)
	return info
}

// lows returns the low watermark of every partition.
func (b *bundle) lows(stream string) []int64 {
	b.t.Helper()
	var out []int64
	for _, p := range b.streamRange(stream).Partitions {
		out = append(out, p.LowWatermark)
	}
	return out
}

// readAfter returns the sequences of a partition after a sequence.
func (b *bundle) readAfter(stream string, partition int, after int64) []int64 {
	b.t.Helper()
	events, err := b.d.Read(b.ctx, stream, &rheo.ReadOptions{After: after, Partition: partition})
	require.NoError(b.t, err)
	return eventSequences(events)
}

// fetchAck fetches up to n events and acks them all.
func (b *bundle) fetchAck(stream, group string, n int) []rheo.Lease {
	b.t.Helper()
	leases := b.fetch(stream, group, &rheo.FetchOptions{MaxCount: n})
	for _, l := range leases {
		require.NoError(b.t, b.d.Ack(b.ctx, l.LeaseID))
	}
	return leases
}

// requireStale requires every settle of lease to fail stale_lease.
func (b *bundle) requireStale(lease rheo.Lease, why string) {
	b.t.Helper()
	require.ErrorIs(b.t, b.d.Ack(b.ctx, lease.LeaseID), rheo.ErrStaleLease, "ack: %s", why)
	_, err := b.d.Renew(b.ctx, lease.LeaseID, time.Minute)
	require.ErrorIs(b.t, err, rheo.ErrStaleLease, "renew: %s", why)
	_, err = b.d.Retry(b.ctx, lease.LeaseID, nil)
	require.ErrorIs(b.t, err, rheo.ErrStaleLease, "retry: %s", why)
	require.ErrorIs(b.t, b.d.Reject(b.ctx, lease.LeaseID, ""), rheo.ErrStaleLease, "reject: %s", why)
	results, err := b.d.AckBatch(b.ctx, []string{lease.LeaseID})
	require.NoError(b.t, err)
	require.Equal(b.t, []rheo.AckResult{{LeaseID: lease.LeaseID}}, results, "ack_batch: %s", why)
}

// prunedTo4 makes a stream of one partition with five events {"n": 1}…
// with ids e1…e5, prunes the first three with no group on the stream,
// and returns it: low watermark 4, high watermark 5.
func (b *bundle) prunedTo4() string {
	b.t.Helper()
	s := b.stream(1)
	b.retain(s)
	for i := 1; i <= 3; i++ {
		b.append(s, payload(i), &rheo.AppendOptions{ID: fmt.Sprintf("e%d", i)})
	}
	b.age()
	for i := 4; i <= 5; i++ {
		b.append(s, payload(i), &rheo.AppendOptions{ID: fmt.Sprintf("e%d", i)})
	}
	require.Equal(b.t, int64(3), b.prune(s, nil))
	require.Equal(b.t, []int64{4}, b.lows(s))
	return s
}

func retentionCases(t *testing.T, h Harness) {
	retentionSettingCases(t, h)
	pruneCases(t, h)
	afterPruneCases(t, h)
}

func retentionSettingCases(t *testing.T, h Harness) {
	t.Run("stream_info reports each partition's watermarks in order and no retention by default", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		b.appendTo(s, 1, 1)
		b.appendTo(s, 1, 2)
		b.appendTo(s, 2, 3)
		require.Equal(t, rheo.StreamInfo{Partitions: []rheo.PartitionRange{
			{Partition: 0, LowWatermark: 1, HighWatermark: 0},
			{Partition: 1, LowWatermark: 1, HighWatermark: 2},
			{Partition: 2, LowWatermark: 1, HighWatermark: 1},
		}}, b.streamRange(s))
	})

	t.Run("set_retention sets and removes a stream's max age", func(t *testing.T) {
		b := setup(t, h)
		s, other := b.stream(1), b.stream(1)
		for _, age := range []time.Duration{36 * time.Hour, time.Microsecond, 30 * 24 * time.Hour, 1500 * time.Millisecond} {
			require.NoError(t, b.d.SetRetention(b.ctx, s, age))
			require.Equal(t, age, b.streamRange(s).MaxAge)
		}
		require.NoError(t, b.d.SetRetention(b.ctx, s, 0), "0 removes the retention")
		require.Zero(t, b.streamRange(s).MaxAge)
		require.NoError(t, b.d.SetRetention(b.ctx, s, 0), "removing it twice")
		require.Zero(t, b.streamRange(other).MaxAge, "other streams keep theirs")
	})

	t.Run("set_retention of a max age that is not positive reports invalid_argument and changes nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.retain(s)
		// Ages are whole microseconds: below one rounds down to zero.
		for _, age := range []time.Duration{-time.Second, -time.Nanosecond, 500 * time.Nanosecond} {
			require.ErrorIs(t, b.d.SetRetention(b.ctx, s, age), rheo.ErrInvalidArgument, "max age %s", age)
		}
		require.Equal(t, retentionAge, b.streamRange(s).MaxAge)
	})

	t.Run("set_retention rounds a max age down to whole microseconds", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		require.NoError(t, b.d.SetRetention(b.ctx, s, time.Second+1999*time.Nanosecond))
		require.Equal(t, time.Second+time.Microsecond, b.streamRange(s).MaxAge)
	})

	t.Run("the retention operations check confirm, then the stream, the group and the arguments", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		missing := uniqueName("missing")
		cases := []struct {
			name string
			want error
			op   func() error
		}{
			{"drop_group without confirm on a missing stream", rheo.ErrConfirmRequired, func() error {
				return b.d.DropGroup(b.ctx, missing, missing, nil)
			}},
			{"drop_stream without confirm on a missing stream", rheo.ErrConfirmRequired, func() error {
				_, err := b.d.DropStream(b.ctx, missing, nil)
				return err
			}},
			{"drop_group on a missing stream", rheo.ErrStreamNotFound, func() error {
				return b.d.DropGroup(b.ctx, missing, missing, &rheo.DropOptions{Confirm: true})
			}},
			{"drop_group of a missing group", rheo.ErrGroupNotFound, func() error {
				return b.d.DropGroup(b.ctx, s, missing, &rheo.DropOptions{Confirm: true})
			}},
			{"set_retention of a negative age on a missing stream", rheo.ErrStreamNotFound, func() error {
				return b.d.SetRetention(b.ctx, missing, -time.Hour)
			}},
			{"set_retention of a negative age on an invalid name", rheo.ErrStreamNotFound, func() error {
				return b.d.SetRetention(b.ctx, "has space", -time.Hour)
			}},
			{"set_retention on a missing stream", rheo.ErrStreamNotFound, func() error {
				return b.d.SetRetention(b.ctx, missing, time.Hour)
			}},
			{"prune with a negative max_count on a missing stream", rheo.ErrStreamNotFound, func() error {
				_, err := b.d.Prune(b.ctx, missing, &rheo.PruneOptions{MaxCount: -1, Force: true})
				return err
			}},
			{"prune of a missing stream", rheo.ErrStreamNotFound, func() error {
				_, err := b.d.Prune(b.ctx, missing, nil)
				return err
			}},
			{"stream_info of a missing stream", rheo.ErrStreamNotFound, func() error {
				_, err := b.d.StreamInfo(b.ctx, missing)
				return err
			}},
			{"stream_info of an invalid name", rheo.ErrStreamNotFound, func() error {
				_, err := b.d.StreamInfo(b.ctx, "")
				return err
			}},
			{"prune with a negative max_count on a stream without retention", rheo.ErrInvalidArgument, func() error {
				_, err := b.d.Prune(b.ctx, s, &rheo.PruneOptions{MaxCount: -1})
				return err
			}},
		}
		for _, c := range cases {
			require.ErrorIs(t, c.op(), c.want, c.name)
		}
	})

	t.Run("prune with a clock outside the years 0001 to 9999 is invalid_argument and deletes nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.retain(s)
		b.appendN(s, 2)
		for _, bad := range badTimes() {
			b.clock.Set(bad.t)
			_, err := b.d.Prune(b.ctx, s, &rheo.PruneOptions{Force: true})
			requireBadInput(t, err, rheo.ErrInvalidArgument, "clock", "prune with a clock %s", bad.name)
		}
		b.clock.Set(Epoch)
		require.Equal(t, []int64{1}, b.lows(s))
	})

	t.Run("the drop and retention operations without a clock argument work whatever the clock says", func(t *testing.T) {
		b := setup(t, h)
		s, other := b.stream(1), b.stream(1)
		g := b.group(s, nil)
		b.clock.Set(time.Date(300000, time.January, 1, 0, 0, 0, 0, time.UTC))
		require.NoError(t, b.d.SetRetention(b.ctx, s, time.Hour))
		require.Equal(t, time.Hour, b.streamRange(s).MaxAge)
		require.NoError(t, b.d.DropGroup(b.ctx, s, g, &rheo.DropOptions{Confirm: true}))
		_, err := b.d.DropStream(b.ctx, other, &rheo.DropOptions{Confirm: true})
		require.NoError(t, err)
	})

	t.Run("names that PostgreSQL cannot receive are invalid_argument in the drop and retention operations", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		for _, name := range []string{"nul\x00byte", "bad\xffutf8"} {
			for op, err := range map[string]error{
				"drop_group":    b.d.DropGroup(b.ctx, s, name, &rheo.DropOptions{Confirm: true}),
				"set_retention": b.d.SetRetention(b.ctx, name, time.Hour),
				"prune":         second(b.d.Prune(b.ctx, name, nil)),
				"stream_info":   second(b.d.StreamInfo(b.ctx, name)),
				"drop_stream":   second(b.d.DropStream(b.ctx, name, &rheo.DropOptions{Confirm: true})),
			} {
				require.ErrorIs(t, err, rheo.ErrInvalidArgument, "%s of %q", op, name)
			}
		}
		require.True(t, b.streamExists(s))
	})

	t.Run("prune with a negative max_count reports invalid_argument and deletes nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.retain(s)
		b.appendN(s, 2)
		b.age()
		for _, force := range []bool{false, true} {
			_, err := b.d.Prune(b.ctx, s, &rheo.PruneOptions{MaxCount: -1, Force: force})
			require.ErrorIs(t, err, rheo.ErrInvalidArgument, "force %v", force)
		}
		require.Equal(t, []int64{1}, b.lows(s))
	})
}

func pruneCases(t *testing.T, h Harness) {
	t.Run("a stream without retention prunes nothing, even with force", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.group(s, nil)
		b.appendN(s, 3)
		b.clock.Advance(1000 * time.Hour)
		require.Zero(t, b.prune(s, nil))
		require.Zero(t, b.prune(s, &rheo.PruneOptions{Force: true}))
		b.retain(s)
		require.NoError(t, b.d.SetRetention(b.ctx, s, 0))
		require.Zero(t, b.prune(s, &rheo.PruneOptions{Force: true}), "a removed retention")
		require.Equal(t, []int64{1, 2, 3}, b.readAfter(s, 0, 0))
	})

	t.Run("prune deletes the aged events every group has passed, oldest first", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.retain(s)
		b.appendN(s, 5)
		b.fetchAck(s, g, 3)
		b.age()
		require.Equal(t, int64(3), b.prune(s, nil))
		require.Equal(t, []rheo.PartitionRange{{Partition: 0, LowWatermark: 4, HighWatermark: 5}}, b.streamRange(s).Partitions)
		require.Equal(t, []int64{4, 5}, b.readAfter(s, 0, 0))
		require.Zero(t, b.prune(s, nil), "nothing else qualifies")
	})

	t.Run("a stream with no groups is pruned by age alone", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.retain(s)
		b.appendN(s, 3)
		require.Zero(t, b.prune(s, nil), "young events are kept")
		b.age()
		require.Equal(t, int64(3), b.prune(s, nil))
		require.Equal(t, []rheo.PartitionRange{{Partition: 0, LowWatermark: 4, HighWatermark: 3}}, b.streamRange(s).Partitions,
			"the low watermark is the high watermark + 1 when nothing is retained")
		require.Empty(t, b.readAfter(s, 0, 0))
	})

	t.Run("an event exactly max_age old is kept", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.retain(s)
		b.appendN(s, 1)
		b.clock.Advance(retentionAge)
		require.Zero(t, b.prune(s, nil), "ts = clock - max_age is not older")
		b.clock.Advance(time.Microsecond)
		require.Equal(t, int64(1), b.prune(s, nil))
	})

	t.Run("an event older than the one before it waits behind it", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.retain(s)
		old := Epoch.Add(-3 * retentionAge)
		b.append(s, payload(1), &rheo.AppendOptions{TS: &old})
		b.append(s, payload(2), nil) // young: ts is the clock
		b.append(s, payload(3), &rheo.AppendOptions{TS: &old})
		require.Equal(t, int64(1), b.prune(s, nil))
		require.Equal(t, []int64{2, 3}, b.readAfter(s, 0, 0), "no hole opens")
		require.Zero(t, b.prune(s, &rheo.PruneOptions{Force: true}), "force waits too")
		b.age()
		require.Equal(t, int64(2), b.prune(s, nil))
	})

	t.Run("prune stops at the first event a group has not settled", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g, done := b.group(s, nil), b.group(s, nil)
		b.retain(s)
		b.appendN(s, 5)
		b.drain(s, done)
		leases := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 3, LeaseDuration: 10 * retentionAge})
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
		require.NoError(t, b.d.Ack(b.ctx, leases[2].LeaseID)) // 2 in flight: frontier 1
		b.age()
		require.Equal(t, int64(1), b.prune(s, nil))
		require.Equal(t, []int64{2}, b.lows(s))
		require.NoError(t, b.d.Ack(b.ctx, leases[1].LeaseID))
		require.Equal(t, int64(2), b.prune(s, nil), "up to the frontier: 4 and 5 were not offered")
		require.Equal(t, []int64{4}, b.lows(s))
		require.Equal(t, []int64{4, 5}, sequences(b.fetch(s, g, nil)), "the group goes on where it was")
	})

	t.Run("a retry or a lease in flight holds prune back, a dead letter does not", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.retain(s)
		b.appendN(s, 4)
		require.NoError(t, b.d.Reject(b.ctx, b.fetchOne(s, g, time.Hour).LeaseID, "poison")) // 1
		b.fetchAck(s, g, 1)                                                                  // 2
		retried := b.fetchOne(s, g, 10*retentionAge)                                         // 3
		_, err := b.d.Retry(b.ctx, retried.LeaseID, nil)
		require.NoError(t, err)
		b.age()
		require.Equal(t, int64(2), b.prune(s, nil), "the dead letter and the ack")
		require.Empty(t, b.deadLetters(s, g), "the dead letters of pruned events go with them")
		require.Zero(t, b.info(s, g).DeadLetters)
		require.Equal(t, []int64{3}, b.lows(s))
		again := b.fetchOne(s, g, 10*retentionAge)
		require.Equal(t, int64(3), again.Event.Sequence)
		require.Zero(t, b.prune(s, nil), "the lease in flight")
		require.NoError(t, b.d.Ack(b.ctx, again.LeaseID))
		require.Equal(t, int64(1), b.prune(s, nil))
	})

	t.Run("prune keeps the dead letters of retained events", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.retain(s)
		b.appendN(s, 1)
		b.age()
		b.appendN(s, 1)
		b.fetchAck(s, g, 1)
		require.NoError(t, b.d.Reject(b.ctx, b.fetchOne(s, g, time.Hour).LeaseID, "young"))
		require.Equal(t, int64(1), b.prune(s, nil))
		letters := b.deadLetters(s, g)
		require.Len(t, letters, 1)
		require.Equal(t, int64(2), letters[0].Event.Sequence)
	})

	t.Run("prune deletes at most max_count per call, partitions in order", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		b.retain(s)
		for i := range 3 {
			b.appendTo(s, 0, i)
			b.appendTo(s, 2, i)
		}
		b.age()
		b.appendTo(s, 0, 9) // young: stops partition 0 after 3
		require.Equal(t, int64(4), b.prune(s, &rheo.PruneOptions{MaxCount: 4}))
		require.Equal(t, []int64{4, 1, 2}, b.lows(s), "partition 0 first, then 1 of partition 2")
		require.Equal(t, int64(2), b.prune(s, &rheo.PruneOptions{MaxCount: 4}))
		require.Equal(t, []int64{4, 1, 4}, b.lows(s))
		require.Zero(t, b.prune(s, &rheo.PruneOptions{MaxCount: 4}))
		require.Equal(t, []int64{4}, b.readAfter(s, 0, 0))
	})

	t.Run("prune without force leaves lag unchanged", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		fast, slow := b.group(s, nil), b.group(s, nil)
		b.retain(s)
		for i := range 10 {
			b.appendTo(s, i%2, i)
		}
		b.drain(s, fast)
		leases := b.fetch(s, slow, &rheo.FetchOptions{MaxCount: 6, LeaseDuration: 10 * retentionAge})
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
		require.NoError(t, b.d.Reject(b.ctx, leases[1].LeaseID, ""))
		require.NoError(t, b.d.Ack(b.ctx, leases[3].LeaseID))
		_, err := b.d.Retry(b.ctx, leases[4].LeaseID, &rheo.RetryOptions{Delay: time.Hour})
		require.NoError(t, err)
		b.age()
		before := map[string]rheo.Lag{fast: b.lag(s, fast, nil), slow: b.lag(s, slow, nil)}
		infoBefore := b.info(s, slow)
		require.Positive(t, b.prune(s, nil))
		for _, g := range []string{fast, slow} {
			require.Equal(t, before[g], b.lag(s, g, nil), "group %s", g)
		}
		require.Equal(t, infoBefore.Lag, b.info(s, slow).Lag)
	})

	t.Run("force also deletes aged events a group has not settled, and their leases become stale", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		done, behind := b.group(s, nil), b.group(s, nil)
		b.retain(s)
		b.appendN(s, 4)
		held := b.fetchOne(s, behind, 10*retentionAge) // 1: in flight
		retried := b.fetchOne(s, behind, 10*retentionAge)
		_, err := b.d.Retry(b.ctx, retried.LeaseID, &rheo.RetryOptions{Delay: 10 * retentionAge}) // 2: waits
		require.NoError(t, err)
		require.NoError(t, b.d.Reject(b.ctx, b.fetchOne(s, behind, time.Hour).LeaseID, "")) // 3: dead letter
		// 4 was never offered.
		b.age()
		b.appendN(s, 2) // 5, 6: young
		b.drain(s, done)

		require.Zero(t, b.prune(s, nil), "without force the lease in flight holds it back")
		require.Equal(t, int64(4), b.prune(s, &rheo.PruneOptions{Force: true}))
		require.Equal(t, []int64{5}, b.lows(s))
		b.requireStale(held, "its event was pruned")
		require.Empty(t, b.deadLetters(s, behind))
		info := b.info(s, behind)
		require.Equal(t, rheo.GroupInfo{Lag: 2, OldestUnsettledTS: ptr(b.clock.Now())}, normalizeInfo(info),
			"no lease, retry or dead letter of a pruned event is left")
		require.Equal(t, rheo.PartitionLag{Partition: 0, Frontier: 4, HighWatermark: 6, Lag: 2}, b.lag(s, behind, nil).Partitions[0],
			"the frontier moved past the pruned events")
		leases := b.fetch(s, behind, nil)
		require.Equal(t, []int64{5, 6}, sequences(leases))
		require.Equal(t, 1, leases[0].Attempt)
		require.Equal(t, rheo.PartitionLag{Partition: 0, Frontier: 6, HighWatermark: 6, Lag: 0}, b.lag(s, done, nil).Partitions[0])
	})

	t.Run("force moves the cursors of groups that were never offered the events", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		g := b.group(s, nil)
		b.retain(s)
		b.appendTo(s, 0, 1)
		b.appendTo(s, 1, 2)
		b.appendTo(s, 1, 3)
		b.age()
		b.appendTo(s, 1, 4)
		require.Equal(t, int64(3), b.prune(s, &rheo.PruneOptions{Force: true}))
		require.Equal(t, []int64{1, 2}, b.frontiers(s, g))
		require.Equal(t, []position{{1, 3}}, positions(b.fetch(s, g, nil)))
	})

	t.Run("pruned sequences are never reused", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.retain(s)
		b.appendN(s, 3)
		b.age()
		require.Equal(t, int64(3), b.prune(s, nil))
		ev := b.append(s, payload(4), nil)
		require.Equal(t, int64(4), ev.Sequence)
		require.Equal(t, []rheo.PartitionRange{{Partition: 0, LowWatermark: 4, HighWatermark: 4}}, b.streamRange(s).Partitions)
	})

	t.Run("a prune rolled back with its transaction deletes nothing", func(t *testing.T) {
		b := setup(t, h)
		tr, ok := b.d.(driver.Transactor)
		if !ok {
			t.Skip("the driver has no transactions (driver.Transactor)")
		}
		s := b.stream(1)
		b.retain(s)
		b.appendN(s, 3)
		b.age()
		errRollback := errors.New("roll back")
		err := tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			n, err := tx.Prune(ctx, s, nil)
			require.NoError(t, err)
			require.Equal(t, int64(3), n)
			info, err := tx.StreamInfo(ctx, s)
			require.NoError(t, err)
			require.Equal(t, int64(4), info.Partitions[0].LowWatermark, "inside the transaction")
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		require.Equal(t, []int64{1}, b.lows(s))
		require.Equal(t, []int64{1, 2, 3}, b.readAfter(s, 0, 0))
		require.Equal(t, int64(3), b.prune(s, nil))
	})

	t.Run("plain deletes of events still fail immutable_event after a prune", func(t *testing.T) {
		if h.RawWrites == nil {
			t.Skip("the harness cannot write raw SQL (Harness.RawWrites)")
		}
		b := setup(t, h)
		s := b.stream(1)
		b.retain(s)
		b.appendN(s, 2)
		b.age()
		b.appendN(s, 2)
		require.Equal(t, int64(2), b.prune(s, nil))
		errs := h.RawWrites(b.ctx, t, b.d, s)
		for _, kind := range []string{"update", "delete"} {
			require.ErrorIs(t, errs[kind], rheo.ErrImmutableEvent, kind)
		}
		require.Equal(t, []int64{3, 4}, b.readAfter(s, 0, 0))
	})
}

func afterPruneCases(t *testing.T, h Harness) {
	t.Run("after pruning a new group without start options starts at the low watermark", func(t *testing.T) {
		b := setup(t, h)
		s := b.prunedTo4()
		g := b.group(s, nil)
		require.Equal(t, rheo.PartitionLag{Partition: 0, Frontier: 3, HighWatermark: 5, Lag: 2}, b.lag(s, g, nil).Partitions[0])
		leases := b.fetch(s, g, nil)
		require.Equal(t, []int64{4, 5}, sequences(leases))
		require.Equal(t, 1, leases[0].Attempt)
	})

	t.Run("after pruning start_after below the low watermark starts at it", func(t *testing.T) {
		b := setup(t, h)
		s := b.prunedTo4()
		for after, frontier := range map[int64]int64{0: 3, 1: 3, 3: 3, 4: 4, 9: 9} {
			g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(after)})
			require.Equal(t, []int64{frontier}, b.frontiers(s, g), "start_after %d", after)
		}
		g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(1))})
		require.Equal(t, []int64{4, 5}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("after pruning start_at before every retained event starts at the low watermark", func(t *testing.T) {
		b := setup(t, h)
		s := b.prunedTo4()
		g := b.group(s, &rheo.CreateGroupOptions{StartAt: ptr(Epoch.Add(-24 * time.Hour))})
		require.Equal(t, []int64{3}, b.frontiers(s, g))
		g = b.group(s, &rheo.CreateGroupOptions{StartAt: ptr(b.clock.Now())})
		require.Equal(t, []int64{3}, b.frontiers(s, g), "the first retained event at or after the time")
		g = b.group(s, &rheo.CreateGroupOptions{StartAt: ptr(b.clock.Now().Add(time.Second))})
		require.Equal(t, []int64{5}, b.frontiers(s, g), "after every event")
	})

	t.Run("after pruning partitions left out of start options start at the low watermark", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		b.retain(s)
		for p := range 2 {
			b.appendTo(s, p, 1)
			b.appendTo(s, p, 2)
		}
		b.age()
		for p := range 2 {
			for i := range 3 {
				b.appendTo(s, p, i)
			}
		}
		require.Equal(t, int64(4), b.prune(s, nil))
		require.Equal(t, []int64{3, 3}, b.lows(s))
		g := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(4)), Partitions: []int{1}})
		require.Equal(t, []int64{2, 4}, b.frontiers(s, g))
		g = b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(0)), Partitions: []int{1}})
		require.Equal(t, []int64{2, 2}, b.frontiers(s, g))
	})

	t.Run("after pruning a reset starts at the low watermark whatever it asks", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.retain(s)
		b.appendN(s, 3)
		b.drain(s, g)
		b.age()
		b.appendN(s, 2)
		require.Equal(t, int64(3), b.prune(s, nil))
		for name, opts := range map[string]rheo.ResetOptions{
			"no start options":            {Confirm: true},
			"start_after 0":               {Confirm: true, StartAfter: ptr(int64(0))},
			"start_after below":           {Confirm: true, StartAfter: ptr(int64(2))},
			"start_at before every event": {Confirm: true, StartAt: ptr(Epoch.Add(-time.Hour))},
			"the partition listed":        {Confirm: true, Partitions: []int{0}},
		} {
			require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &opts), name)
			require.Equal(t, []int64{3}, b.frontiers(s, g), name)
		}
		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAfter: ptr(int64(4))}))
		require.Equal(t, []int64{4}, b.frontiers(s, g), "above the low watermark as asked")
		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true}))
		require.Equal(t, []int64{4, 5}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("after pruning read after a sequence below the low watermark returns from it", func(t *testing.T) {
		b := setup(t, h)
		s := b.prunedTo4()
		for after, want := range map[int64][]int64{0: {4, 5}, 2: {4, 5}, 3: {4, 5}, 4: {5}, 5: {}} {
			require.Equal(t, want, nonNilSeqs(b.readAfter(s, 0, after)), "after %d", after)
		}
	})

	t.Run("after pruning replay from a sequence below the low watermark rewinds to it", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.group(s, nil)
		b.retain(s)
		b.appendN(s, 3)
		b.age()
		b.appendN(s, 2)
		b.drain(s, g)
		require.Equal(t, int64(3), b.prune(s, nil))
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "the retained events")
		require.Equal(t, []int64{3}, b.frontiers(s, g))
		leases := b.fetch(s, g, nil)
		require.Equal(t, []int64{4, 5}, sequences(leases))
		require.Equal(t, 1, leases[0].Attempt)
		for _, l := range leases {
			require.NoError(t, b.d.Ack(b.ctx, l.LeaseID))
		}
		n, err = b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromTS: ptr(Epoch.Add(-24 * time.Hour))})
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "from a time before every retained event")
		require.Equal(t, []int64{3}, b.frontiers(s, g))
	})

	t.Run("after pruning replay of pruned event ids ignores them", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(1)
		g := b.group(s, nil)
		b.retain(s)
		for i := 1; i <= 3; i++ {
			b.append(s, payload(i), &rheo.AppendOptions{ID: fmt.Sprintf("e%d", i)})
		}
		b.age()
		b.append(s, payload(4), &rheo.AppendOptions{ID: "e4"})
		b.drain(s, g)
		require.Equal(t, int64(3), b.prune(s, nil))
		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{EventIDs: []string{"e1", "e2", "e4"}})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.Equal(t, []int64{4}, sequences(b.fetch(s, g, nil)))
		n, err = b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{EventIDs: []string{"e3"}})
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("after pruning an idempotent append of a pruned id stores a new event", func(t *testing.T) {
		b := setup(t, h)
		s := b.prunedTo4()
		again := b.append(s, payload(1), &rheo.AppendOptions{ID: "e1"})
		require.Equal(t, int64(6), again.Sequence, "a new event, not the pruned one")
		require.Equal(t, normalizeEvent(again), normalizeEvent(b.append(s, payload(1), &rheo.AppendOptions{ID: "e1"})),
			"which is then repeated")
		other := b.append(s, payload(99), &rheo.AppendOptions{ID: "e2"})
		require.Equal(t, int64(7), other.Sequence, "other content under a pruned id")
		_, err := b.d.Append(b.ctx, s, payload(98), &rheo.AppendOptions{ID: "e4"})
		require.ErrorIs(t, err, rheo.ErrAlreadyExists, "a retained id keeps its content")
	})

	t.Run("after a long prune start_at and replay from_ts find the first retained event at or after a time", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		passed := b.group(s, &rheo.CreateGroupOptions{StartAfter: ptr(int64(3300))})
		// 1-1100 at minute 0, 1101-2200 at 1, 2201-3300 at 2: several
		// time marks of 1024 events each.
		appendTimes(b, s, []int{1100, 1100, 1100}, []int{0, 1, 2})
		b.retain(s)
		b.clock.Set(Epoch.Add(retentionAge + 90*time.Second)) // minutes 0 and 1 are aged
		require.Equal(t, int64(1500), b.prune(s, &rheo.PruneOptions{MaxCount: 1500}))
		require.Equal(t, []int64{1501}, b.lows(s))
		for minute, frontier := range map[int]int64{-10: 1500, 0: 1500, 1: 1500, 2: 2200, 3: 3300} {
			g := b.group(s, &rheo.CreateGroupOptions{StartAt: ptr(Epoch.Add(time.Duration(minute) * time.Minute))})
			require.Equal(t, []int64{frontier}, b.frontiers(s, g), "start_at minute %d", minute)
		}
		b.requireReplay()
		n, err := b.d.Replay(b.ctx, s, passed, &rheo.ReplayOptions{FromTS: ptr(Epoch.Add(2 * time.Minute))})
		require.NoError(t, err)
		require.Equal(t, int64(1100), n)
		n, err = b.d.Replay(b.ctx, s, passed, &rheo.ReplayOptions{FromTS: ptr(Epoch)})
		require.NoError(t, err)
		require.Equal(t, int64(700), n, "1501-2200, down to the low watermark")
		require.Equal(t, []int64{1500}, b.frontiers(s, passed))
		require.Equal(t, int64(700), b.prune(s, &rheo.PruneOptions{Force: true}), "force takes the rest of minute 1")
		require.Equal(t, []int64{2200}, b.frontiers(s, passed))
	})

	t.Run("after pruning lag and group info count only retained events", func(t *testing.T) {
		b := setup(t, h)
		s := b.prunedTo4()
		g := b.group(s, nil)
		info := b.info(s, g)
		require.Equal(t, int64(2), info.Lag)
		require.NotNil(t, info.OldestUnsettledTS)
		requireSameTime(t, b.clock.Now(), *info.OldestUnsettledTS, "the oldest retained event")
		require.Equal(t, int64(2), b.lag(s, g, nil).Total)
	})
}

// nonNilSeqs maps a nil slice to an empty one, for comparisons.
func nonNilSeqs(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

// normalizeEvent gives an event's TS the UTC location, for comparing
// whole events of one driver.
func normalizeEvent(ev rheo.Event) rheo.Event {
	ev.TS = ev.TS.UTC()
	return ev
}

// second returns the error of a call with two results.
func second[T any](_ T, err error) error { return err }
