package drivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func lifecycleCases(t *testing.T, h Harness) {
	dropCases(t, h)
	resetCases(t, h)
}

func dropCases(t *testing.T, h Harness) {
	t.Run("drop_group and drop_stream without confirm report confirm_required before any other check", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 2)
		missing := uniqueName("missing")
		for name, op := range map[string]func() error{
			"drop_group":                       func() error { return b.d.DropGroup(b.ctx, s, g, nil) },
			"drop_group of a missing group":    func() error { return b.d.DropGroup(b.ctx, s, missing, nil) },
			"drop_group on a missing stream":   func() error { return b.d.DropGroup(b.ctx, missing, missing, nil) },
			"drop_group with an invalid name":  func() error { return b.d.DropGroup(b.ctx, "has space", "", nil) },
			"drop_stream":                      func() error { _, err := b.d.DropStream(b.ctx, s, nil); return err },
			"drop_stream of a missing stream":  func() error { _, err := b.d.DropStream(b.ctx, missing, nil); return err },
			"drop_stream with an invalid name": func() error { _, err := b.d.DropStream(b.ctx, "has space", nil); return err },
		} {
			require.ErrorIs(t, op(), rheo.ErrConfirmRequired, name)
		}
		groups, err := b.d.ListGroups(b.ctx, s)
		require.NoError(t, err)
		require.Len(t, groups, 1, "nothing was dropped")
		require.Equal(t, []int64{1, 2}, b.readAfter(s, 0, 0))
	})

	t.Run("the drops look the stream up before the group", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		missing := uniqueName("missing")
		require.ErrorIs(t, b.d.DropGroup(b.ctx, missing, missing, &rheo.DropOptions{Confirm: true}), rheo.ErrStreamNotFound)
		require.ErrorIs(t, b.d.DropGroup(b.ctx, s, missing, &rheo.DropOptions{Confirm: true}), rheo.ErrGroupNotFound)
		require.ErrorIs(t, b.d.DropGroup(b.ctx, s, "has space", &rheo.DropOptions{Confirm: true}), rheo.ErrGroupNotFound, "an invalid name in a lookup")
		_, err := b.d.DropStream(b.ctx, missing, &rheo.DropOptions{Confirm: true})
		require.ErrorIs(t, err, rheo.ErrStreamNotFound)
		_, err = b.d.DropStream(b.ctx, "has space", &rheo.DropOptions{Confirm: true})
		require.ErrorIs(t, err, rheo.ErrStreamNotFound, "an invalid name in a lookup")
	})

	t.Run("drop_group removes the group with its deliveries, dead letters and cursors", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 5)
		require.NoError(t, b.d.Reject(b.ctx, b.fetchOne(s, g, time.Hour).LeaseID, "poison")) // 1: dead letter
		b.fetchAck(s, g, 1)                                                                  // 2: acked
		_, err := b.d.Retry(b.ctx, b.fetchOne(s, g, time.Hour).LeaseID, &rheo.RetryOptions{Delay: time.Hour})
		require.NoError(t, err)     // 3: waiting for its delay
		b.fetchOne(s, g, time.Hour) // 4: in flight

		require.NoError(t, b.d.DropGroup(b.ctx, s, g, &rheo.DropOptions{Confirm: true}))
		groups, err := b.d.ListGroups(b.ctx, s)
		require.NoError(t, err)
		require.Empty(t, groups)
		_, err = b.d.Lag(b.ctx, s, g, nil)
		require.ErrorIs(t, err, rheo.ErrGroupNotFound)
		_, err = b.d.DeadLetters(b.ctx, s, g, nil)
		require.ErrorIs(t, err, rheo.ErrGroupNotFound)
		_, err = b.d.Fetch(b.ctx, s, g, nil)
		require.ErrorIs(t, err, rheo.ErrGroupNotFound)
		require.ErrorIs(t, b.d.DropGroup(b.ctx, s, g, &rheo.DropOptions{Confirm: true}), rheo.ErrGroupNotFound, "a second drop")

		// A group created anew under the name starts from nothing.
		require.NoError(t, b.d.CreateGroup(b.ctx, s, g, nil))
		require.Equal(t, rheo.GroupInfo{Lag: 5, OldestUnsettledTS: ptr(Epoch)}, normalizeInfo(b.info(s, g)))
		require.Empty(t, b.deadLetters(s, g))
		leases := b.fetch(s, g, nil)
		require.Equal(t, []int64{1, 2, 3, 4, 5}, sequences(leases))
		for _, l := range leases {
			require.Equal(t, 1, l.Attempt)
		}
		require.Equal(t, []int64{1, 2, 3, 4, 5}, b.readAfter(s, 0, 0), "the log is untouched")
	})

	t.Run("the leases of a dropped group are stale", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		l := b.fetchOne(s, g, time.Hour)
		require.NoError(t, b.d.DropGroup(b.ctx, s, g, &rheo.DropOptions{Confirm: true}))
		b.requireStale(l, "the group was dropped")
		require.NoError(t, b.d.CreateGroup(b.ctx, s, g, nil))
		b.requireStale(l, "the group was created anew")
	})

	t.Run("drop_group leaves the stream's other groups alone", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g, other := b.group(s, nil), b.group(s, nil)
		b.appendN(s, 3)
		b.fetchAck(s, other, 1)
		held := b.fetchOne(s, other, time.Hour)
		require.NoError(t, b.d.Reject(b.ctx, b.fetchOne(s, g, time.Hour).LeaseID, ""))
		require.NoError(t, b.d.Reject(b.ctx, b.fetchOne(s, other, time.Hour).LeaseID, ""))

		require.NoError(t, b.d.DropGroup(b.ctx, s, g, &rheo.DropOptions{Confirm: true}))
		require.Equal(t, []int64{1}, b.frontiers(s, other))
		require.Len(t, b.deadLetters(s, other), 1)
		require.NoError(t, b.d.Ack(b.ctx, held.LeaseID), "the other group's lease is still held")
		require.Equal(t, []int64{3}, b.frontiers(s, other))
	})

	t.Run("drop_stream removes the stream, its groups and every event and returns how many", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		g := b.group(s, nil)
		for i := range 5 {
			b.appendTo(s, i%2, i)
		}
		held := b.fetchOne(s, g, time.Hour)
		require.NoError(t, b.d.Reject(b.ctx, b.fetchOne(s, g, time.Hour).LeaseID, ""))
		require.NoError(t, b.d.SetRetention(b.ctx, s, retentionAge))

		n, err := b.d.DropStream(b.ctx, s, &rheo.DropOptions{Confirm: true})
		require.NoError(t, err)
		require.Equal(t, int64(5), n)
		streams, err := b.d.ListStreams(b.ctx)
		require.NoError(t, err)
		for _, info := range streams {
			require.NotEqual(t, s, info.Name)
		}
		for name, op := range map[string]func() error{
			"read":        func() error { _, err := b.d.Read(b.ctx, s, nil); return err },
			"list_groups": func() error { _, err := b.d.ListGroups(b.ctx, s); return err },
			"lag":         func() error { _, err := b.d.Lag(b.ctx, s, g, nil); return err },
			"stream_info": func() error { _, err := b.d.StreamInfo(b.ctx, s); return err },
			"append":      func() error { _, err := b.d.Append(b.ctx, s, payload(1), nil); return err },
			"drop_stream": func() error { _, err := b.d.DropStream(b.ctx, s, &rheo.DropOptions{Confirm: true}); return err },
		} {
			require.ErrorIs(t, op(), rheo.ErrStreamNotFound, name)
		}
		b.requireStale(held, "the stream was dropped")
	})

	t.Run("a dropped stream's name can be created anew with sequences from 1", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.retain(s)
		first := b.append(s, payload(1), &rheo.AppendOptions{ID: "once"})
		b.appendN(s, 2)
		b.drain(s, g)
		n, err := b.d.DropStream(b.ctx, s, &rheo.DropOptions{Confirm: true})
		require.NoError(t, err)
		require.Equal(t, int64(3), n)

		require.NoError(t, b.d.CreateStream(b.ctx, s, 2))
		require.NoError(t, b.d.CreateGroup(b.ctx, s, g, nil))
		again := b.append(s, payload(99), &rheo.AppendOptions{ID: "once", Partition: ptr(0)})
		require.Equal(t, int64(1), again.Sequence, "sequences start from 1")
		require.NotEqual(t, string(first.Payload), string(again.Payload), "the id is free for other content")
		require.Equal(t, rheo.StreamInfo{Partitions: []rheo.PartitionRange{
			{Partition: 0, LowWatermark: 1, HighWatermark: 1},
			{Partition: 1, LowWatermark: 1, HighWatermark: 0},
		}}, b.streamRange(s), "no retention and no watermarks are left from before")
		require.Equal(t, []int64{0, 0}, b.frontiers(s, g))
		require.Empty(t, b.deadLetters(s, g))
		require.Equal(t, []int64{1}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("drop_stream of an empty stream returns 0", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		n, err := b.d.DropStream(b.ctx, s, &rheo.DropOptions{Confirm: true})
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("drop_stream leaves other streams alone", func(t *testing.T) {
		b := setup(t, h)
		s, other := b.stream(1), b.stream(1)
		g := b.group(other, nil)
		b.appendN(s, 2)
		b.appendN(other, 3)
		held := b.fetchOne(other, g, time.Hour)
		_, err := b.d.DropStream(b.ctx, s, &rheo.DropOptions{Confirm: true})
		require.NoError(t, err)
		require.Equal(t, []int64{1, 2, 3}, b.readAfter(other, 0, 0))
		require.NoError(t, b.d.Ack(b.ctx, held.LeaseID))
		require.Equal(t, int64(2), b.lag(other, g, nil).Total)
	})
}

func resetCases(t *testing.T, h Harness) {
	t.Run("reset without confirm reports confirm_required before anything else", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		missing := uniqueName("missing")
		for name, args := range map[string][2]string{"missing stream": {missing, missing}, "missing group": {s, missing}, "group": {s, g}} {
			err := b.d.ResetGroup(b.ctx, args[0], args[1], &rheo.ResetOptions{StartAfter: ptr(int64(-1)), Partitions: []int{99}})
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

		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true}))
		require.ErrorIs(t, b.d.Ack(b.ctx, leases[3].LeaseID), rheo.ErrStaleLease)
		require.Empty(t, b.deadLetters(s, g))
		info := b.info(s, g)
		require.Equal(t, int64(4), info.Lag)
		require.Zero(t, info.InFlight+info.PendingRetry+info.DeadLetters)
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
		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAfter: ptr(int64(3))}))
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
		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAt: ptr(Epoch.Add(2 * time.Minute))}))
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

		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, Partitions: []int{0}}))
		require.Equal(t, []int64{0, 1}, b.frontiers(s, g))
		require.Len(t, b.deadLetters(s, g), 1, "partition 1 keeps its dead letter")
		require.NoError(t, b.d.Ack(b.ctx, leases[2].LeaseID), "partition 1 keeps its lease")
		require.Equal(t, []position{{0, 1}}, positions(b.fetch(s, g, nil)))
	})

	t.Run("reset with start_after and start_at together reports invalid_argument", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		err := b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAfter: ptr(int64(1)), StartAt: ptr(Epoch)})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		err = b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAfter: ptr(int64(-1))})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})
}
