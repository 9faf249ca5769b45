package drivertest

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// badInputCases check reference §1.5's rule for bad input: the word, a
// detail naming the argument, and nothing changed; and that the values
// at the edge of each limit still work (see docs/decisions.md).
func badInputCases(t *testing.T, h Harness) {
	t.Run("a partition count above 4096 is invalid_partition_count and creates no stream", func(t *testing.T) {
		b := setup(t, h)
		for _, n := range []int{driverutil.MaxPartitionCount + 1, math.MaxInt32, math.MaxInt} {
			name := uniqueName("s")
			requireBadInput(t, b.d.CreateStream(b.ctx, name, n), rheo.ErrInvalidPartitionCount, "partition_count")
			require.False(t, b.streamExists(name), "partition_count %d", n)
		}
	})

	t.Run("a stream can have 4096 partitions", func(t *testing.T) {
		b := setup(t, h)
		b.requirePartitions()
		s := b.stream(driverutil.MaxPartitionCount)
		g := b.group(s, nil)
		ev := b.appendTo(s, driverutil.MaxPartitionCount-1, 1)
		require.Len(t, b.lag(s, g, nil).Partitions, driverutil.MaxPartitionCount)
		leases := b.fetch(s, g, nil)
		require.Len(t, leases, 1)
		require.Equal(t, ev.ID, leases[0].Event.ID)
	})

	t.Run("max_attempts beyond 32 bits is invalid_argument and creates no group", func(t *testing.T) {
		b := setup(t, h)
		if strconv.IntSize == 32 {
			t.Skip("int has 32 bits here")
		}
		s := b.stream(1)
		big := int64(math.MaxInt32) + 1
		for _, n := range []int{int(big), int(-big), math.MaxInt} {
			name := uniqueName("g")
			err := b.d.CreateGroup(b.ctx, s, name, &rheo.CreateGroupOptions{MaxAttempts: n})
			requireBadInput(t, err, rheo.ErrInvalidArgument, "max_attempts")
		}
		groups, err := b.d.ListGroups(b.ctx, s)
		require.NoError(t, err)
		require.Empty(t, groups)
		require.NoError(t, b.d.CreateGroup(b.ctx, s, uniqueName("g"), &rheo.CreateGroupOptions{MaxAttempts: math.MaxInt32}),
			"the largest int32 is a valid max_attempts")
	})

	t.Run("start_after and from_sequence above 2^63-2 are invalid_argument and change nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 3)
		require.NoError(t, b.d.Ack(b.ctx, b.fetchOne(s, g, time.Minute).LeaseID))
		b.fetchOne(s, g, time.Minute)
		before := b.state(s, g)
		maxInt := int64(math.MaxInt64)

		name := uniqueName("g")
		err := b.d.CreateGroup(b.ctx, s, name, &rheo.CreateGroupOptions{StartAfter: &maxInt})
		requireBadInput(t, err, rheo.ErrInvalidArgument, "start_after")
		err = b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAfter: &maxInt})
		requireBadInput(t, err, rheo.ErrInvalidArgument, "start_after")
		_, err = b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: &maxInt})
		requireBadInput(t, err, rheo.ErrInvalidArgument, "from_sequence")
		require.Equal(t, before, b.state(s, g))
	})

	t.Run("start_after 2^63-2 puts the cursor at the top of the range without overflow", func(t *testing.T) {
		b := setup(t, h)
		b.requirePartitions()
		s := b.stream(2)
		b.appendTo(s, 0, 1)
		b.appendTo(s, 0, 2)
		top := int64(driverutil.MaxStartSequence)
		g := b.group(s, &rheo.CreateGroupOptions{StartAfter: &top})
		requireTop := func(msg string) {
			t.Helper()
			lag := b.lag(s, g, nil)
			require.Equal(t, int64(0), lag.Total, msg)
			for _, p := range lag.Partitions {
				require.Equal(t, top, p.Frontier, msg)
			}
			require.Empty(t, b.fetch(s, g, &rheo.FetchOptions{MaxCount: 100}), msg)
			info := b.info(s, g)
			require.Equal(t, rheo.GroupInfo{}, info, msg)
		}
		requireTop("after create_group")
		require.Empty(t, b.fetch(s, g, &rheo.FetchOptions{MaxCount: 0}))
		b.appendTo(s, 1, 3)
		requireTop("after another append")

		n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: &top})
		require.NoError(t, err)
		require.Zero(t, n, "replay from 2^63-2 reopens nothing")
		n, err = b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
		require.NoError(t, err)
		require.Equal(t, int64(3), n, "replay from 0 reopens every skipped event")
		require.Len(t, b.drain(s, g), 3)

		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAfter: &top}))
		requireTop("after reset_group")
		require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAfter: &top, Partitions: []int{1}}))
		require.Equal(t, []int64{top, top}, b.frontiers(s, g))
	})

	t.Run("a clock outside the years 0001 to 9999 is invalid_argument wherever it is read and changes nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 2)
		held := b.fetchOne(s, g, time.Hour)
		before := b.state(s, g)
		newStream, newGroup := uniqueName("s"), uniqueName("g")
		ops := []struct {
			name string
			op   func() error
		}{
			{"create_stream", func() error { return b.d.CreateStream(b.ctx, newStream, 1) }},
			{"create_group", func() error { return b.d.CreateGroup(b.ctx, s, newGroup, nil) }},
			{"append", func() error { _, err := b.d.Append(b.ctx, s, payload(9), nil); return err }},
			{"append_batch", func() error {
				_, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: payload(9)}}, nil)
				return err
			}},
			{"fetch", func() error { _, err := b.d.Fetch(b.ctx, s, g, nil); return err }},
			{"renew", func() error { _, err := b.d.Renew(b.ctx, held.LeaseID, time.Minute); return err }},
			{"ack", func() error { return b.d.Ack(b.ctx, held.LeaseID) }},
			{"ack_batch", func() error { _, err := b.d.AckBatch(b.ctx, []string{held.LeaseID}); return err }},
			{"retry", func() error { _, err := b.d.Retry(b.ctx, held.LeaseID, nil); return err }},
			{"reject", func() error { return b.d.Reject(b.ctx, held.LeaseID, "") }},
			{"replay", func() error {
				_, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
				return err
			}},
			{"reset_group", func() error { return b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true}) }},
			{"group_info", func() error { _, err := b.d.GroupInfo(b.ctx, s, g); return err }},
		}
		for _, bad := range badTimes() {
			b.clock.Set(bad.t)
			for _, o := range ops {
				requireBadInput(t, o.op(), rheo.ErrInvalidArgument, "clock", "%s with a clock %s", o.name, bad.name)
			}
		}
		b.clock.Set(Epoch)
		require.Equal(t, before, b.state(s, g))
		require.False(t, b.streamExists(newStream))
		require.NoError(t, b.d.Ack(b.ctx, held.LeaseID), "the lease is still held")
	})

	t.Run("operations without a clock argument work whatever the clock says", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 2)
		b.clock.Set(time.Date(300000, time.January, 1, 0, 0, 0, 0, time.UTC))
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, events, 2)
		lag, err := b.d.Lag(b.ctx, s, g, nil)
		require.NoError(t, err)
		require.Equal(t, int64(2), lag.Total)
		_, err = b.d.ListStreams(b.ctx)
		require.NoError(t, err)
		_, err = b.d.ListGroups(b.ctx, s)
		require.NoError(t, err)
		_, err = b.d.DeadLetters(b.ctx, s, g, nil)
		require.NoError(t, err)
		page, err := b.d.Query(b.ctx, s, rheo.Query{})
		require.NoError(t, err)
		require.Len(t, page.Events, 2)
	})

	t.Run("the first and last instants of the clock range are valid", func(t *testing.T) {
		b := setup(t, h)
		last := driverutil.EndTime.Add(-time.Microsecond)
		for _, at := range []time.Time{driverutil.MinTime, last} {
			b.clock.Set(at)
			s := b.stream(1)
			g := b.group(s, nil)
			ev := b.append(s, payload(1), nil)
			requireSameTime(t, at, ev.TS)
			b.appendN(s, 2)
			longest := time.Duration(math.MaxInt32) * time.Millisecond
			leases := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 3, LeaseDuration: longest})
			require.Len(t, leases, 3)
			requireSameTime(t, at.Add(longest), leases[0].ExpiresAt, "a lease of 2^31-1 ms from ", at)
			expires, err := b.d.Renew(b.ctx, leases[0].LeaseID, longest)
			require.NoError(t, err)
			requireSameTime(t, at.Add(longest), expires)
			outcome, err := b.d.Retry(b.ctx, leases[1].LeaseID, &rheo.RetryOptions{Delay: longest})
			require.NoError(t, err)
			require.Equal(t, rheo.Retrying, outcome)
			require.NoError(t, b.d.Reject(b.ctx, leases[2].LeaseID, ""))
			require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
			info := b.info(s, g)
			require.Equal(t, int64(1), info.PendingRetry)
			require.Equal(t, int64(1), info.DeadLetters)
			n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromSequence: ptr(int64(0))})
			require.NoError(t, err)
			require.Equal(t, int64(3), n)
			require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true}))
		}
	})

	t.Run("a ts outside the years 0001 to 9999 is invalid_argument and stores nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		for _, bad := range badTimes() {
			_, err := b.d.Append(b.ctx, s, payload(1), &rheo.AppendOptions{TS: &bad.t})
			requireBadInput(t, err, rheo.ErrInvalidArgument, "ts", "ts %s", bad.name)
		}
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Empty(t, events)
		for _, at := range []time.Time{driverutil.MinTime, driverutil.EndTime.Add(-time.Microsecond)} {
			requireSameTime(t, at, b.append(s, payload(1), &rheo.AppendOptions{TS: &at}).TS)
		}
	})

	t.Run("start_at, from_ts and query bounds outside the clock range compare as the infinities", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.appendN(s, 2)
		for _, bound := range badTimes() {
			t.Run(bound.name, func(t *testing.T) {
				at := bound.t
				late := at.After(Epoch)
				g := b.group(s, &rheo.CreateGroupOptions{StartAt: &at})
				want := []int64{0}
				if late {
					want = []int64{2}
				}
				require.Equal(t, want, b.frontiers(s, g), "create_group start_at")
				require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true, StartAt: &at}))
				require.Equal(t, want, b.frontiers(s, g), "reset_group start_at")
				require.NoError(t, b.d.ResetGroup(b.ctx, s, g, &rheo.ResetOptions{Confirm: true,
					StartAfter: ptr(int64(2))}))
				n, err := b.d.Replay(b.ctx, s, g, &rheo.ReplayOptions{FromTS: &at})
				require.NoError(t, err)
				if late {
					require.Zero(t, n, "replay from_ts")
				} else {
					require.Equal(t, int64(2), n, "replay from_ts")
				}
				for _, descending := range []bool{false, true} {
					from, err := b.d.Query(b.ctx, s, rheo.Query{From: &at, Descending: descending})
					require.NoError(t, err)
					to, err := b.d.Query(b.ctx, s, rheo.Query{To: &at, Descending: descending})
					require.NoError(t, err)
					if late {
						require.Empty(t, from.Events)
						require.Len(t, to.Events, 2)
					} else {
						require.Len(t, from.Events, 2)
						require.Empty(t, to.Events)
					}
				}
			})
		}
	})

	t.Run("ids, keys, consumer ids and lineage values longer than 1024 bytes are invalid_argument and store nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		before := b.state(s, g)
		long := strings.Repeat("x", driverutil.MaxTextBytes+1)
		wide := strings.Repeat("é", driverutil.MaxTextBytes/2+1) // 513 characters, 1026 bytes
		keyed := func(key string) json.RawMessage {
			p, err := json.Marshal(map[string]string{"key": key})
			require.NoError(t, err)
			return p
		}
		appendWith := func(p json.RawMessage, opts *rheo.AppendOptions) func() error {
			return func() error { _, err := b.d.Append(b.ctx, s, p, opts); return err }
		}
		batch := func(items []rheo.BatchItem, opts *rheo.AppendBatchOptions) func() error {
			return func() error { _, err := b.d.AppendBatch(b.ctx, s, items, opts); return err }
		}
		cases := []struct {
			name string
			want string
			op   func() error
		}{
			{"an id of 1025 bytes", "event id", appendWith(payload(1), &rheo.AppendOptions{ID: long})},
			{"an id of 513 two-byte characters", "event id", appendWith(payload(1), &rheo.AppendOptions{ID: wide})},
			{"a key of 1025 bytes", "key", appendWith(payload(1), &rheo.AppendOptions{Key: long})},
			{"a payload key of 1025 bytes", "payload key", appendWith(keyed(long), nil)},
			{"a batch id of 1025 bytes", "event id 1 of the batch",
				batch([]rheo.BatchItem{{Payload: payload(1), ID: "b0"}, {Payload: payload(2), ID: long}}, nil)},
			{"a batch key of 1025 bytes", "key 0 of the batch",
				batch([]rheo.BatchItem{{Payload: payload(1), Key: wide}, {Payload: payload(2)}}, nil)},
			{"a payload key of 1025 bytes in a batch", "payload key 1 of the batch",
				batch([]rheo.BatchItem{{Payload: keyed(long), Key: "short"}, {Payload: keyed(long)}}, nil)},
			{"a consumer id of 1025 bytes", "consumer_id", func() error {
				_, err := b.d.Fetch(b.ctx, s, g, &rheo.FetchOptions{ConsumerID: long})
				return err
			}},
			{"lineage metadata of 1025 bytes on an empty batch", "metadata correlation_id",
				batch([]rheo.BatchItem{}, &rheo.AppendBatchOptions{Metadata: json.RawMessage(`{"correlation_id": "` + long + `"}`)})},
		}
		for _, key := range []string{rheo.MetaCorrelationID, rheo.MetaCausationID, rheo.MetaProducer, rheo.MetaSchema, rheo.MetaSchemaVersion} {
			meta := json.RawMessage(fmt.Sprintf(`{%q: %q}`, key, long))
			cases = append(cases, struct {
				name string
				want string
				op   func() error
			}{"metadata " + key + " of 1025 bytes", "metadata " + key, appendWith(payload(1), &rheo.AppendOptions{Metadata: meta})})
		}
		for _, c := range cases {
			requireBadInput(t, c.op(), rheo.ErrInvalidArgument, c.want, c.name)
		}
		require.Equal(t, before, b.state(s, g))
	})

	t.Run("ids, keys, consumer ids and lineage values of 1024 bytes are accepted", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		limit := strings.Repeat("é", driverutil.MaxTextBytes/2)
		long := strings.Repeat("x", driverutil.MaxTextBytes+1)
		ev := b.append(s, payload(1), &rheo.AppendOptions{ID: limit, Key: limit,
			Metadata: json.RawMessage(fmt.Sprintf(`{"correlation_id": %q, "note": %q}`, limit, long+long))})
		require.Equal(t, limit, ev.ID)
		require.Equal(t, limit, ev.Key)
		keyed := json.RawMessage(fmt.Sprintf(`{"key": %q}`, limit))
		require.Equal(t, limit, b.append(s, keyed, nil).Key)
		batch, err := b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{
			{Payload: json.RawMessage(fmt.Sprintf(`{"key": %q}`, long)), Key: "short"},
		}, nil)
		require.NoError(t, err, "a longer payload key is not checked when Key is the effective key")
		require.Equal(t, "short", batch[0].Key)
		leases := b.fetch(s, g, &rheo.FetchOptions{ConsumerID: limit})
		require.Len(t, leases, 3)
		require.Equal(t, limit, leases[0].ConsumerID)
	})

	t.Run("query bounds at the largest int64 page without overflow", func(t *testing.T) {
		b := setup(t, h)
		b.requirePartitions()
		s := b.stream(2)
		b.appendTo(s, 0, 1)
		b.appendTo(s, 1, 2)
		b.appendTo(s, 0, 3)
		maxInt := int64(math.MaxInt64)
		for _, c := range []struct {
			name string
			q    rheo.Query
			want int
		}{
			{"after_sequence 2^63-1", rheo.Query{AfterSequence: maxInt}, 0},
			{"after_sequence 2^63-2", rheo.Query{AfterSequence: maxInt - 1}, 0},
			{"until_sequence 2^63-1", rheo.Query{UntilSequence: &maxInt}, 3},
			{"after_sequence and until_sequence 2^63-1", rheo.Query{AfterSequence: maxInt, UntilSequence: &maxInt}, 0},
			{"after_sequence 1 and until_sequence 2^63-1", rheo.Query{AfterSequence: 1, UntilSequence: &maxInt}, 1},
		} {
			for _, descending := range []bool{false, true} {
				for _, maxCount := range []int{1, 2, 100} {
					q := c.q
					q.Descending, q.MaxCount = descending, maxCount
					var got int
					for _, err := range driver.QueryAll(b.ctx, b.d, s, q) {
						require.NoError(t, err, "%s descending %v max_count %d", c.name, descending, maxCount)
						got++
					}
					require.Equal(t, c.want, got, "%s descending %v max_count %d", c.name, descending, maxCount)
					// The cursor of a last page leads to an empty page.
					page, err := b.d.Query(b.ctx, s, q)
					require.NoError(t, err)
					for len(page.Events) == maxCount {
						q.After = page.Cursor
						page, err = b.d.Query(b.ctx, s, q)
						require.NoError(t, err)
					}
					q.After = page.Cursor
					next, err := b.d.Query(b.ctx, s, q)
					require.NoError(t, err, "%s descending %v max_count %d: the next page", c.name, descending, maxCount)
					require.Empty(t, next.Events)
				}
			}
		}
	})

	t.Run("json nested deeper than 512 levels is invalid_argument and stores nothing", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		nested := func(depth int) json.RawMessage {
			// {"a": [[...]]}: the object is one level, each array another.
			return json.RawMessage(`{"a": ` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
		}
		deep := nested(driverutil.MaxJSONDepth + 1)
		_, err := b.d.Append(b.ctx, s, deep, nil)
		requireBadInput(t, err, rheo.ErrInvalidArgument, "payload")
		_, err = b.d.AppendBatch(b.ctx, s, []rheo.BatchItem{{Payload: payload(1)}, {Payload: deep}}, nil)
		requireBadInput(t, err, rheo.ErrInvalidArgument, "payload")
		_, err = b.d.Append(b.ctx, s, payload(1), &rheo.AppendOptions{Metadata: deep})
		requireBadInput(t, err, rheo.ErrInvalidArgument, "metadata")
		_, err = b.d.Query(b.ctx, s, rheo.Query{Payload: deep})
		requireBadInput(t, err, rheo.ErrInvalidArgument, "payload")
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Empty(t, events)

		limit := nested(driverutil.MaxJSONDepth)
		ev := b.append(s, limit, &rheo.AppendOptions{Metadata: limit})
		requireJSONEq(t, string(limit), ev.Payload)
		requireJSONEq(t, string(limit), ev.Metadata)
		page, err := b.d.Query(b.ctx, s, rheo.Query{Payload: limit})
		require.NoError(t, err)
		require.Len(t, page.Events, 1)
	})

	t.Run("json that PostgreSQL's jsonb cannot hold is invalid_argument on both drivers", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		refused := []string{
			`"\u0000"`, `"a\u0000b"`,
			`"\ud800"`, `"\udc00"`, `"\ud800x"`, `"\ud800\u0041"`, `"\ud800\ud800\udc00"`, `"\ude00\ud83d"`,
			`1e131072`, `-1e131072`, `123456.7e131067`, `1e-16384`, `0.5e-16383`, `0.00e-16382`,
			`0e1073741823`, `0e-1073741822`, `1e99999999999999999999`,
		}
		for _, v := range refused {
			doc := json.RawMessage(`{"v": ` + v + `}`)
			_, err := b.d.Append(b.ctx, s, doc, nil)
			requireBadInput(t, err, rheo.ErrInvalidArgument, "payload", "payload %s", v)
			_, err = b.d.Append(b.ctx, s, payload(1), &rheo.AppendOptions{Metadata: doc})
			requireBadInput(t, err, rheo.ErrInvalidArgument, "metadata", "metadata %s", v)
			_, err = b.d.Query(b.ctx, s, rheo.Query{Payload: doc})
			requireBadInput(t, err, rheo.ErrInvalidArgument, "payload", "payload filter %s", v)
		}
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Empty(t, events)
		accepted := []string{
			`"\ud83d\ude00"`, `"\\ud800"`, `"\\u0000"`, `"\u00e9"`,
			`1e131071`, `-9.99e131071`, `123456.7e131066`, `1E+131071`, `1e-16383`, `0.5e-16382`, `0.00e-16381`,
			`0e1073741822`, `1e-0000000000000000016383`, `-0`, `0.0`,
		}
		for _, v := range accepted {
			doc := json.RawMessage(`{"v": ` + v + `}`)
			_, err := b.d.Append(b.ctx, s, doc, &rheo.AppendOptions{Metadata: doc})
			require.NoError(t, err, v)
		}
	})
}

// badTime is a time outside the clock range, named for messages.
type badTime struct {
	name string
	t    time.Time
}

// badTimes are the times just outside the clock range and far outside
// it, where PostgreSQL's timestamptz and int64 microseconds end.
func badTimes() []badTime {
	return []badTime{
		{"of 10000-01-01", driverutil.EndTime},
		{"just before 0001-01-01", driverutil.MinTime.Add(-time.Microsecond)},
		{"in the year 300000", time.Date(300000, time.January, 1, 0, 0, 0, 0, time.UTC)},
		{"in the year -300000", time.Date(-300000, time.January, 1, 0, 0, 0, 0, time.UTC)},
	}
}

// requireBadInput checks that err is the sentinel and that its detail
// names the argument.
func requireBadInput(t *testing.T, err error, sentinel *rheo.Error, names string, msgAndArgs ...any) {
	t.Helper()
	require.ErrorIs(t, err, sentinel, msgAndArgs...)
	require.Contains(t, err.Error(), names, msgAndArgs...)
}

// streamExists reports whether ListStreams lists name.
func (b *bundle) streamExists(name string) bool {
	b.t.Helper()
	streams, err := b.d.ListStreams(b.ctx)
	require.NoError(b.t, err)
	return slices.ContainsFunc(streams, func(s rheo.StreamSummary) bool { return s.Name == name })
}

// state is what the operations on stream and group can change, as one
// comparable value: the events of every partition, the groups, and the
// group's lag, summary and dead letters.
func (b *bundle) state(stream, group string) string {
	b.t.Helper()
	var out strings.Builder
	streams, err := b.d.ListStreams(b.ctx)
	require.NoError(b.t, err)
	for _, info := range streams {
		if info.Name != stream {
			continue
		}
		for p := range info.PartitionCount {
			events, err := b.d.Read(b.ctx, stream, &rheo.ReadOptions{Partition: p, MaxCount: math.MaxInt32})
			require.NoError(b.t, err)
			for _, ev := range events {
				fmt.Fprintf(&out, "event %d %d %s %q %s %s %s\n", ev.Partition, ev.Sequence, ev.ID, ev.Key,
					ev.Payload, ev.Metadata, ev.TS.UTC().Format(time.RFC3339Nano))
			}
		}
	}
	groups, err := b.d.ListGroups(b.ctx, stream)
	require.NoError(b.t, err)
	for _, g := range groups {
		fmt.Fprintf(&out, "group %s %d\n", g.Name, g.MaxAttempts)
	}
	fmt.Fprintf(&out, "lag %+v\n", b.lag(stream, group, nil))
	fmt.Fprintf(&out, "info %+v\n", b.info(stream, group))
	for _, d := range b.deadLetters(stream, group) {
		fmt.Fprintf(&out, "dead %s %d %s\n", d.Event.ID, d.Attempt, d.Reason)
	}
	return out.String()
}
