package drivertest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func logCases(t *testing.T, h Harness) {
	t.Run("append returns the stored event", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.clock.Advance(90 * time.Second)
		ev := b.append(s, json.RawMessage(`{"type": "order.placed", "amount": 12.5, "lines": [1, 2]}`), nil)
		require.Equal(t, s, ev.Stream)
		require.Equal(t, 0, ev.Partition)
		require.Equal(t, int64(1), ev.Sequence)
		require.NotEmpty(t, ev.ID)
		require.Empty(t, ev.Key)
		require.Equal(t, "order.placed", ev.Type)
		requireJSONEq(t, `{"type": "order.placed", "amount": 12.5, "lines": [1, 2]}`, ev.Payload)
		requireJSONEq(t, `{}`, ev.Metadata)
		requireSameTime(t, b.clock.Now(), ev.TS, "ts defaults to the clock")

		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, events, 1)
		require.Equal(t, ev.ID, events[0].ID)
		require.Equal(t, ev.Type, events[0].Type)
		requireJSONEq(t, string(ev.Payload), events[0].Payload)
		requireSameTime(t, ev.TS, events[0].TS)
	})

	t.Run("an event without a type field has an empty type", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		require.Empty(t, b.append(s, payload(1), nil).Type)
	})

	t.Run("appends get contiguous sequences from 1", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		var got []int64
		for i := range 5 {
			got = append(got, b.append(s, payload(i), nil).Sequence)
		}
		require.Equal(t, []int64{1, 2, 3, 4, 5}, got)
		got = eventSequences(b.appendN(s, 3))
		require.Equal(t, []int64{6, 7, 8}, got)
	})

	t.Run("an explicit ts is stored and the clock is the default", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		at := Epoch.Add(-24 * time.Hour)
		ev := b.append(s, payload(1), &rheo.AppendOptions{TS: &at})
		requireSameTime(t, at, ev.TS)
		now := b.clock.Advance(time.Hour)
		ev = b.append(s, payload(2), nil)
		requireSameTime(t, now, ev.TS)
		now = b.clock.Advance(time.Minute)
		batch := b.appendN(s, 2)
		requireSameTime(t, now, batch[0].TS, "batch ts defaults to the clock")
		requireSameTime(t, now, batch[1].TS)
	})

	t.Run("generated ids are unique version 7 uuids", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		v7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
		seen := map[string]bool{}
		for i := range 3 {
			b.clock.Advance(time.Millisecond)
			id := b.append(s, payload(i), nil).ID
			require.Regexp(t, v7, id)
			seen[id] = true
		}
		for _, ev := range b.appendN(s, 3) {
			require.Regexp(t, v7, ev.ID)
			seen[ev.ID] = true
		}
		require.Len(t, seen, 6)
	})

	t.Run("the key comes from the argument, else from the payload", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		require.Equal(t, "from-arg", b.append(s, json.RawMessage(`{"key": "from-payload"}`), &rheo.AppendOptions{Key: "from-arg"}).Key)
		require.Equal(t, "from-payload", b.append(s, json.RawMessage(`{"key": "from-payload"}`), nil).Key)
		require.Empty(t, b.append(s, payload(1), nil).Key)
		batch, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{
			{Payload: json.RawMessage(`{"key": "p"}`), Key: "a"},
			{Payload: json.RawMessage(`{"key": "p"}`)},
			{Payload: payload(1)},
		}, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "p", ""}, []string{batch[0].Key, batch[1].Key, batch[2].Key})
	})

	t.Run("the effective key routes the event", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(8)
		for _, key := range []string{"alpha", "beta", "gamma", "delta"} {
			want := rheo.PartitionForKey(key, 8)
			require.Equal(t, want, b.append(s, payload(1), &rheo.AppendOptions{Key: key}).Partition, "key argument %q", key)
			p := json.RawMessage(fmt.Sprintf(`{"key": %q}`, key))
			require.Equal(t, want, b.append(s, p, nil).Partition, "payload key %q", key)
			// The argument wins over the payload's key.
			require.Equal(t, want, b.append(s, json.RawMessage(`{"key": "other"}`), &rheo.AppendOptions{Key: key}).Partition)
		}
	})

	t.Run("an empty key counts as no key", func(t *testing.T) {
		b := setup(t, h)
		// md5("") would route to partition 1 of 4; no key means partition 0.
		require.Equal(t, 1, rheo.PartitionForKey("", 4))
		s := b.stream(4)
		ev := b.append(s, json.RawMessage(`{"key": ""}`), &rheo.AppendOptions{Key: ""})
		require.Equal(t, 0, ev.Partition)
		require.Empty(t, ev.Key)
		batch, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: json.RawMessage(`{"key": ""}`)}}, nil)
		require.NoError(t, err)
		require.Equal(t, 0, batch[0].Partition)
	})

	t.Run("an explicit partition overrides routing and keeps the key", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(4)
		routed := rheo.PartitionForKey("k", 4)
		explicit := (routed + 1) % 4
		ev := b.append(s, payload(1), &rheo.AppendOptions{Key: "k", Partition: &explicit})
		require.Equal(t, explicit, ev.Partition)
		require.Equal(t, "k", ev.Key)
		batch, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: payload(2), Key: "k"}},
			&rheo.AppendBatchOptions{Partition: &explicit})
		require.NoError(t, err)
		require.Equal(t, explicit, batch[0].Partition)
		require.Equal(t, "k", batch[0].Key)
		require.Equal(t, int64(2), batch[0].Sequence)
	})

	t.Run("metadata is stored as given", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		meta := `{"correlation_id": "c-1", "causation_id": "e-0", "producer": "billing", "schema": "order", "schema_version": 3}`
		ev := b.append(s, payload(1), &rheo.AppendOptions{Metadata: json.RawMessage(meta)})
		requireJSONEq(t, meta, ev.Metadata)
		batch, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: payload(2)}, {Payload: payload(3)}},
			&rheo.AppendBatchOptions{Metadata: json.RawMessage(`{"producer": "batch"}`)})
		require.NoError(t, err)
		for _, ev := range batch {
			requireJSONEq(t, `{"producer": "batch"}`, ev.Metadata)
		}
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		requireJSONEq(t, meta, events[0].Metadata)
		requireJSONEq(t, `{"producer": "batch"}`, events[2].Metadata)
	})

	t.Run("a batch keeps input order and gets contiguous sequences per partition", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(4)
		b.appendTo(s, 0, 0)
		b.appendTo(s, 2, 0)
		var items []rheo.BatchItem
		for i := range 20 {
			items = append(items, rheo.BatchItem{Payload: payload(i), Key: fmt.Sprintf("key-%d", i)})
		}
		batch, err := b.d.AppendBatch(b.ctx, s, items, nil)
		require.NoError(t, err)
		require.Len(t, batch, 20)
		next := map[int]int64{0: 2, 1: 1, 2: 2, 3: 1}
		for i, ev := range batch {
			requireJSONEq(t, string(payload(i)), ev.Payload)
			require.Equal(t, rheo.PartitionForKey(items[i].Key, 4), ev.Partition)
			require.Equal(t, next[ev.Partition], ev.Sequence, "event %d", i)
			next[ev.Partition]++
		}
		lag := b.lag(s, b.group(s, nil), nil)
		for _, p := range lag.Partitions {
			require.Equal(t, next[p.Partition]-1, p.HighWatermark)
		}
	})

	t.Run("an empty batch returns no events", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		batch, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{}, nil)
		require.NoError(t, err)
		require.Empty(t, batch)
		require.Equal(t, int64(1), b.append(s, payload(1), nil).Sequence)
	})

	t.Run("a batch that fails writes nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		_, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{
			{Payload: payload(1)}, {Payload: json.RawMessage(`[]`)}, {Payload: payload(3)},
		}, nil)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Empty(t, events)
		require.Equal(t, int64(1), b.append(s, payload(1), nil).Sequence)
	})

	t.Run("read pages through one partition in sequence order", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		for i := range 5 {
			b.appendTo(s, 1, i)
		}
		b.appendTo(s, 0, 99)
		page := func(after int64, maxCount int) []int64 {
			events, err := b.d.Read(b.ctx, s, &rheo.ReadOptions{After: after, MaxCount: maxCount, Partition: 1})
			require.NoError(t, err)
			for _, ev := range events {
				require.Equal(t, 1, ev.Partition)
			}
			return eventSequences(events)
		}
		require.Equal(t, []int64{1, 2}, page(0, 2))
		require.Equal(t, []int64{3, 4}, page(2, 2))
		require.Equal(t, []int64{5}, page(4, 2))
		require.Empty(t, page(5, 2))
		require.Equal(t, []int64{4, 5}, page(3, 0), "max_count defaults to 100")
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, events, 1, "partition defaults to 0")
		requireJSONEq(t, string(payload(99)), events[0].Payload)
	})

	t.Run("read returns at most 100 events by default", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.appendN(s, 105)
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, events, 100)
		require.Equal(t, int64(100), events[99].Sequence)
	})
}

func immutabilityCases(t *testing.T, h Harness) {
	t.Run("consumption never changes the log", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, &rheo.CreateGroupOptions{MaxAttempts: 2})
		before := b.appendN(s, 4)
		leases := b.fetch(s, g, nil)
		require.Len(t, leases, 4)
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
		_, err := b.d.Retry(b.ctx, leases[1].LeaseID, nil)
		require.NoError(t, err)
		require.NoError(t, b.d.Reject(b.ctx, leases[2].LeaseID, "bad"))
		if b.caps.Replay {
			_, err = b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
			require.NoError(t, err)
		}
		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true}))
		after, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, after, len(before))
		for i := range before {
			require.Equal(t, before[i].ID, after[i].ID)
			require.Equal(t, before[i].Sequence, after[i].Sequence)
			requireJSONEq(t, string(before[i].Payload), after[i].Payload)
			requireJSONEq(t, string(before[i].Metadata), after[i].Metadata)
			requireSameTime(t, before[i].TS, after[i].TS)
		}
	})

	t.Run("writes to the log that bypass the API fail immutable_event", func(t *testing.T) {
		if h.RawWrites == nil {
			t.Skip("the harness has no RawWrites")
		}
		b := setup(t, h)
		s := b.stream(1)
		b.appendN(s, 2)
		errs := h.RawWrites(b.ctx, t, b.d, s)
		for _, kind := range []string{"update", "delete"} {
			require.Contains(t, errs, kind)
		}
		for kind, err := range errs {
			require.ErrorIs(t, err, rheo.ErrImmutableEvent, kind)
		}
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 2}, eventSequences(events))
	})
}

func idempotencyCases(t *testing.T, h Harness) {
	t.Run("appending an existing id with the same content returns the stored event and allocates nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(4)
		at := Epoch.Add(-time.Hour)
		meta := json.RawMessage(`{"producer": "p"}`)
		first := b.append(s, json.RawMessage(`{"n": 1, "key": "k"}`), &rheo.AppendOptions{ID: "order-1", TS: &at, Metadata: meta})
		require.Equal(t, "order-1", first.ID)
		b.clock.Advance(time.Minute)
		// ts, partition and clock of a repeat are ignored.
		other := (first.Partition + 1) % 4
		later := Epoch.Add(time.Hour)
		again := b.append(s, json.RawMessage(`{"key": "k", "n": 1}`),
			&rheo.AppendOptions{ID: "order-1", TS: &later, Partition: &other, Metadata: meta})
		require.Equal(t, first.Partition, again.Partition)
		require.Equal(t, first.Sequence, again.Sequence)
		requireSameTime(t, first.TS, again.TS)
		// The same key given as an argument is the same effective key.
		again = b.append(s, json.RawMessage(`{"n": 1, "key": "k"}`), &rheo.AppendOptions{ID: "order-1", Key: "k", Metadata: meta})
		require.Equal(t, first.Sequence, again.Sequence)
		batch, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: json.RawMessage(`{"n": 1, "key": "k"}`), ID: "order-1"}},
			&rheo.AppendBatchOptions{Metadata: meta})
		require.NoError(t, err)
		require.Equal(t, first.Sequence, batch[0].Sequence)

		next := b.append(s, json.RawMessage(`{"n": 2}`), &rheo.AppendOptions{Partition: &first.Partition})
		require.Equal(t, first.Sequence+1, next.Sequence, "the repeats allocated no sequence")
		events, err := b.d.Read(b.ctx, s, &rheo.ReadOptions{Partition: first.Partition})
		require.NoError(t, err)
		require.Len(t, events, 2)
	})

	t.Run("appending an existing id with other content reports already_exists and writes nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.append(s, json.RawMessage(`{"n": 1}`), &rheo.AppendOptions{ID: "x", Key: "k"})
		cases := map[string]struct {
			payload string
			opts    rheo.AppendOptions
		}{
			"other payload":  {`{"n": 2}`, rheo.AppendOptions{ID: "x", Key: "k"}},
			"other key":      {`{"n": 1}`, rheo.AppendOptions{ID: "x", Key: "j"}},
			"no key":         {`{"n": 1}`, rheo.AppendOptions{ID: "x"}},
			"other metadata": {`{"n": 1}`, rheo.AppendOptions{ID: "x", Key: "k", Metadata: json.RawMessage(`{"a": 1}`)}},
		}
		for name, c := range cases {
			_, err := b.d.Append(b.ctx, s, json.RawMessage(c.payload), &c.opts)
			require.ErrorIs(t, err, rheo.ErrAlreadyExists, name)
		}
		_, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: payload(7)}, {Payload: json.RawMessage(`{"n": 2}`), ID: "x", Key: "k"}}, nil)
		require.ErrorIs(t, err, rheo.ErrAlreadyExists, "in a batch")
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, events, 1, "nothing was written")
		require.Equal(t, int64(2), b.append(s, payload(3), nil).Sequence)
	})

	t.Run("a repeated id inside one batch is stored once", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		batch, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{
			{Payload: payload(1), ID: "a"}, {Payload: payload(2), ID: "b"}, {Payload: payload(1), ID: "a"},
		}, nil)
		require.NoError(t, err)
		require.Len(t, batch, 3, "one result per input")
		require.Equal(t, []int64{1, 2, 1}, eventSequences(batch))
		require.Equal(t, "a", batch[2].ID)
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, events, 2)
	})

	t.Run("a repeated id inside one batch with other content reports already_exists", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		_, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{
			{Payload: payload(1), ID: "a"}, {Payload: payload(2), ID: "a"},
		}, nil)
		require.ErrorIs(t, err, rheo.ErrAlreadyExists)
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Empty(t, events)
	})

	t.Run("a batch repeating a stored id returns the stored event among new ones", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		stored := b.append(s, payload(1), &rheo.AppendOptions{ID: "a"})
		batch, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{
			{Payload: payload(0)}, {Payload: payload(1), ID: "a"}, {Payload: payload(2), ID: "b"},
		}, nil)
		require.NoError(t, err)
		require.Equal(t, []int64{2, stored.Sequence, 3}, eventSequences(batch))
		require.Equal(t, []string{"a", "b"}, []string{batch[1].ID, batch[2].ID})
	})

	t.Run("ids are unique per stream, not across streams", func(t *testing.T) {
		b := setup(t, h)
		s1, s2 := b.stream(1), b.stream(1)
		b.append(s1, payload(1), &rheo.AppendOptions{ID: "same"})
		ev := b.append(s2, payload(2), &rheo.AppendOptions{ID: "same"})
		require.Equal(t, s2, ev.Stream)
		requireJSONEq(t, string(payload(2)), ev.Payload)
	})

	t.Run("concurrent appends of one id store it once", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		const writers = 6
		results := make([]rheo.Event, writers)
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				results[i], errs[i] = b.d.Append(b.ctx, s, payload(1), &rheo.AppendOptions{ID: "once"})
			})
		}
		wg.Wait()
		for i := range writers {
			require.NoError(t, errs[i])
			require.Equal(t, int64(1), results[i].Sequence)
		}
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, events, 1)
	})
}
