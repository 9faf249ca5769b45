package drivertest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// QueryCases checks history search (driver.Querier, part of every
// driver): filters, ordering, paging, lineage and replay by query.
func QueryCases(t *testing.T, h Harness) {
	t.Run("a query without filters returns every event in (sequence, partition) order", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		for _, p := range []int{0, 0, 0, 1, 2, 2} {
			b.appendTo(s, p, 0)
		}
		b.appendTo(b.stream(1), 0, 0) // another stream's event is never returned
		page := b.query(s, rheo.Query{})
		require.Equal(t, []position{{0, 1}, {1, 1}, {2, 1}, {0, 2}, {2, 2}, {0, 3}}, eventPositions(page.Events))
		for _, ev := range page.Events {
			require.Equal(t, s, ev.Stream)
		}
		desc := b.query(s, rheo.Query{Descending: true})
		require.Equal(t, []position{{0, 3}, {2, 2}, {0, 2}, {2, 1}, {1, 1}, {0, 1}}, eventPositions(desc.Events))
	})

	t.Run("query rows are the stored events", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		at := Epoch.Add(-time.Hour)
		want := b.append(s, json.RawMessage(`{"type": "t", "n": 1.5, "nested": {"a": [1, "x"]}}`),
			&rheo.AppendOptions{Key: "k", ID: "id-1", Metadata: json.RawMessage(`{"producer": "p"}`), TS: &at})
		page := b.query(s, rheo.Query{})
		require.Len(t, page.Events, 1)
		got := page.Events[0]
		require.Equal(t, []any{want.Stream, want.Partition, want.Sequence, want.ID, want.Key, want.Type},
			[]any{got.Stream, got.Partition, got.Sequence, got.ID, got.Key, got.Type})
		requireJSONEq(t, string(want.Payload), got.Payload)
		requireJSONEq(t, string(want.Metadata), got.Metadata)
		requireSameTime(t, at, got.TS)
	})

	t.Run("each filter selects its events", func(t *testing.T) {
		b := setup(t, h)
		s := b.filterFixture()
		cases := []struct {
			name  string
			query rheo.Query
			want  []string
		}{
			{"type", rheo.Query{Type: "order.placed"}, []string{"e1", "e3", "e6"}},
			{"key", rheo.Query{Key: "o1"}, []string{"e1", "e4", "e2"}},
			{"partition", rheo.Query{Partition: ptr(1)}, []string{"e4", "e5", "e6"}},
			{"payload numbers compare by value: 10 matches 10, 10.0 and 1e1 but not \"10\"",
				rheo.Query{Payload: json.RawMessage(`{"order": {"total": 10}}`)}, []string{"e1", "e2", "e6"}},
			{"a payload string matches only the string",
				rheo.Query{Payload: json.RawMessage(`{"order": {"total": "10"}}`)}, []string{"e3"}},
			{"an array contains an object element that contains the pattern's",
				rheo.Query{Payload: json.RawMessage(`{"order": {"lines": [{"sku": "b"}]}}`)}, []string{"e1"}},
			{"an array contains the elements of the pattern's array in any order",
				rheo.Query{Payload: json.RawMessage(`{"tags": ["vip", "new"]}`)}, []string{"e1"}},
			{"a nested array does not contain a bare scalar",
				rheo.Query{Payload: json.RawMessage(`{"tags": "vip"}`)}, nil},
			{"every key of the pattern must match",
				rheo.Query{Payload: json.RawMessage(`{"order": {"id": "o1", "total": 11}}`)}, nil},
			{"an object does not contain an array",
				rheo.Query{Payload: json.RawMessage(`{"order": []}`)}, nil},
			{"an empty pattern matches every event", rheo.Query{Payload: json.RawMessage(`{}`)},
				[]string{"e1", "e4", "e2", "e5", "e3", "e6"}},
			{"metadata correlation id", rheo.Query{Metadata: rheo.Lineage{CorrelationID: "c1"}.Metadata()},
				[]string{"e1", "e4", "e2"}},
			{"a numeric correlation id matches the number",
				rheo.Query{Metadata: json.RawMessage(`{"correlation_id": 42}`)}, []string{"e6"}},
			{"a string correlation id does not match the number",
				rheo.Query{Metadata: json.RawMessage(`{"correlation_id": "42"}`)}, nil},
			{"metadata causation id", rheo.Query{Metadata: rheo.Lineage{CausationID: "e2"}.Metadata()}, []string{"e4"}},
			{"metadata producer, schema and schema version",
				rheo.Query{Metadata: rheo.Lineage{Producer: "shop", Schema: "order", SchemaVersion: 1}.Metadata()},
				[]string{"e1"}},
			{"from and to are inclusive", rheo.Query{From: ptr(Epoch.Add(2 * time.Second)), To: ptr(Epoch.Add(4 * time.Second))},
				[]string{"e4", "e2", "e3"}},
			{"from in another time zone is the same instant",
				rheo.Query{From: ptr(Epoch.Add(3 * time.Second).In(time.FixedZone("x", 3600)))}, []string{"e4", "e5", "e3"}},
			{"after_sequence is exclusive and until_sequence inclusive",
				rheo.Query{AfterSequence: 1, UntilSequence: ptr(int64(2))}, []string{"e2", "e5"}},
			{"sequence bounds descending",
				rheo.Query{AfterSequence: 1, UntilSequence: ptr(int64(2)), Descending: true}, []string{"e5", "e2"}},
			{"filters combine with AND",
				rheo.Query{Type: "order.placed", Partition: ptr(0), Metadata: json.RawMessage(`{"correlation_id": "c2"}`)},
				[]string{"e3"}},
			{"a key in another partition matches nothing there", rheo.Query{Key: "o2", Partition: ptr(1)}, nil},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				require.Equal(t, c.want, eventIDs(b.query(s, c.query).Events))
			})
		}
	})

	t.Run("bad arguments report the reference's words", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		b.appendTo(s, 0, 1)
		b.appendTo(s, 1, 2)
		q := b.d
		cursor := b.query(s, rheo.Query{MaxCount: 1}).Cursor
		cases := []struct {
			name   string
			stream string
			query  rheo.Query
			want   error
		}{
			{"a missing stream, before the filter", "missing-" + uniqueName("s"), rheo.Query{MaxCount: -1}, rheo.ErrStreamNotFound},
			{"a partition out of range", s, rheo.Query{Partition: ptr(2)}, rheo.ErrInvalidPartition},
			{"a negative partition", s, rheo.Query{Partition: ptr(-1)}, rheo.ErrInvalidPartition},
			{"a payload that is not JSON", s, rheo.Query{Payload: json.RawMessage(`{`)}, rheo.ErrInvalidArgument},
			{"a payload that is not an object", s, rheo.Query{Payload: json.RawMessage(`[1]`)}, rheo.ErrInvalidArgument},
			{"metadata that is not an object", s, rheo.Query{Metadata: json.RawMessage(`"c1"`)}, rheo.ErrInvalidArgument},
			{"a negative after_sequence", s, rheo.Query{AfterSequence: -1}, rheo.ErrInvalidArgument},
			{"a negative until_sequence", s, rheo.Query{UntilSequence: ptr(int64(-1))}, rheo.ErrInvalidArgument},
			{"a negative max_count", s, rheo.Query{MaxCount: -1}, rheo.ErrInvalidArgument},
			{"a string that is not a cursor", s, rheo.Query{After: "not a cursor!"}, rheo.ErrInvalidArgument},
			{"base64 of something else", s, rheo.Query{After: "eHl6"}, rheo.ErrInvalidArgument},
			{"a cursor of another filter", s, rheo.Query{After: cursor, Type: "t"}, rheo.ErrCursorNotFound},
			{"a cursor of the other direction", s, rheo.Query{After: cursor, Descending: true}, rheo.ErrCursorNotFound},
			{"a cursor of one partition for all", s, rheo.Query{After: b.query(s, rheo.Query{Partition: ptr(0)}).Cursor},
				rheo.ErrCursorNotFound},
			{"a cursor of another stream", b.stream(2), rheo.Query{After: cursor}, rheo.ErrCursorNotFound},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := q.Query(b.ctx, c.stream, c.query)
				require.ErrorIs(t, err, c.want)
			})
		}
	})

	t.Run("random page sizes over random data concatenate to the whole ordered result", func(t *testing.T) {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
				b := setup(t, h)
				rng := rand.New(rand.NewPCG(seed, seed))
				partitions := 1 + rng.IntN(4)
				s := b.stream(partitions)
				all := b.randomEvents(s, rng, partitions, 40+rng.IntN(80))
				for _, f := range randomFilters(rng, partitions) {
					for _, descending := range []bool{false, true} {
						q := f.query
						q.Descending = descending
						want := f.apply(all, descending)
						q.MaxCount = len(all) + 1
						require.Equal(t, eventIDs(want), eventIDs(b.query(s, q).Events), "%s, descending %v: one page", f.name, descending)
						sizes := []int{1 + rng.IntN(3), 1 + rng.IntN(10), 1 + rng.IntN(30)}
						require.Equal(t, eventIDs(want), eventIDs(b.walk(s, q, sizes)),
							"%s, descending %v: pages of sizes %v", f.name, descending, sizes)
					}
				}
			})
		}
	})

	t.Run("paging while appends continue never skips or repeats an event", func(t *testing.T) {
		b := setup(t, h)
		rng := rand.New(rand.NewPCG(7, 7))
		s := b.stream(4)
		var appended, seen []rheo.Event
		appendSome := func(n int) {
			for range n {
				appended = append(appended, b.appendTo(s, rng.IntN(4), len(appended)))
			}
		}
		appendSome(10)
		q := rheo.Query{}
		for round := 0; ; round++ {
			q.MaxCount = 1 + rng.IntN(6)
			page := b.query(s, q)
			seen = append(seen, page.Events...)
			q.After = page.Cursor
			if round < 30 {
				appendSome(rng.IntN(4))
			} else if len(page.Events) < q.MaxCount {
				break
			}
		}
		require.ElementsMatch(t, eventIDs(appended), eventIDs(seen), "every event once")
		last := map[int]int64{}
		for _, ev := range seen {
			require.Greater(t, ev.Sequence, last[ev.Partition], "partition %d in sequence order", ev.Partition)
			last[ev.Partition] = ev.Sequence
		}
	})

	t.Run("the cursor of a short page finds what is appended later", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		b.appendTo(s, 1, 1)
		b.appendTo(s, 1, 2)
		page := b.query(s, rheo.Query{MaxCount: 10})
		require.Len(t, page.Events, 2)
		later := []rheo.Event{b.appendTo(s, 0, 3), b.appendTo(s, 1, 4)}
		next := b.query(s, rheo.Query{After: page.Cursor})
		require.Equal(t, eventIDs(later), eventIDs(next.Events))
		require.Empty(t, b.query(s, rheo.Query{After: next.Cursor}).Events)
	})

	t.Run("a filtered page's cursor moves past the events it examined", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		for n := range 6 {
			b.appendTo(s, n%2, n)
		}
		q := rheo.Query{Payload: json.RawMessage(`{"n": 4}`)}
		page := b.query(s, q)
		require.Len(t, page.Events, 1)
		b.appendTo(s, 0, 4)
		q.After = page.Cursor
		next := b.query(s, q)
		require.Equal(t, []position{{0, 4}}, eventPositions(next.Events), "only the new match, not the old one again")
	})

	t.Run("a descending walk covers the events present at its first page", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		for n := range 5 {
			b.appendTo(s, n%2, n)
		}
		first := b.query(s, rheo.Query{Descending: true, MaxCount: 2})
		require.Equal(t, []position{{0, 3}, {1, 2}}, eventPositions(first.Events))
		b.appendTo(s, 1, 5)
		rest := b.query(s, rheo.Query{Descending: true, After: first.Cursor})
		require.Equal(t, []position{{0, 2}, {1, 1}, {0, 1}}, eventPositions(rest.Events))
	})

	t.Run("QueryAll reads pages only as the loop asks for more", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(2)
		var all []rheo.Event
		for n := range 7 {
			all = append(all, b.appendTo(s, n%2, n))
		}
		slices.SortFunc(all, compareQueryOrder)
		counting := &countingQuerier{q: b.d}
		var got []rheo.Event
		for ev, err := range driver.QueryAll(b.ctx, counting, s, rheo.Query{MaxCount: 2}) {
			require.NoError(t, err)
			got = append(got, ev)
		}
		require.Equal(t, eventIDs(all), eventIDs(got))
		require.Equal(t, 4, counting.calls, "pages of 2, 2, 2 and 1")

		counting.calls = 0
		for range driver.QueryAll(b.ctx, counting, s, rheo.Query{MaxCount: 2}) {
			break
		}
		require.Equal(t, 1, counting.calls, "stopping after the first event reads one page")
	})

	t.Run("QueryAll yields the query's error", func(t *testing.T) {
		b := setup(t, h)
		var errs []error
		for _, err := range driver.QueryAll(b.ctx, b.d, "missing-"+uniqueName("s"), rheo.Query{}) {
			errs = append(errs, err)
		}
		require.Len(t, errs, 1)
		require.ErrorIs(t, errs[0], rheo.ErrStreamNotFound)
	})

	t.Run("lineage round trip: a conversation is found by its correlation id and each step by its cause", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(3)
		placed := b.append(s, json.RawMessage(`{"type": "order.placed", "key": "o1"}`),
			&rheo.AppendOptions{Metadata: rheo.Lineage{Producer: "shop", Schema: "order", SchemaVersion: 2}.Metadata()})
		b.append(s, json.RawMessage(`{"type": "unrelated"}`), nil)
		paidMeta, err := rheo.CausedBy(placed, rheo.Lineage{Producer: "billing"}.Metadata())
		require.NoError(t, err)
		paid := b.append(s, json.RawMessage(`{"type": "order.paid", "key": "p1"}`), &rheo.AppendOptions{Metadata: paidMeta})
		shippedMeta, err := rheo.CausedBy(paid, nil)
		require.NoError(t, err)
		shipped := b.append(s, json.RawMessage(`{"type": "order.shipped", "key": "s1"}`), &rheo.AppendOptions{Metadata: shippedMeta})

		lineage, err := rheo.LineageOf(shipped.Metadata)
		require.NoError(t, err)
		require.Equal(t, rheo.Lineage{CorrelationID: placed.ID, CausationID: paid.ID}, lineage)
		lineage, err = rheo.LineageOf(paid.Metadata)
		require.NoError(t, err)
		require.Equal(t, rheo.Lineage{CorrelationID: placed.ID, CausationID: placed.ID, Producer: "billing"}, lineage)

		want := []rheo.Event{paid, shipped}
		slices.SortFunc(want, compareQueryOrder)
		byCorrelation := b.query(s, rheo.Query{Metadata: rheo.Lineage{CorrelationID: placed.ID}.Metadata()})
		require.Equal(t, eventIDs(want), eventIDs(byCorrelation.Events),
			"the parent has no correlation id of its own; its children carry its id")
		byCause := b.query(s, rheo.Query{Metadata: rheo.Lineage{CausationID: paid.ID}.Metadata()})
		require.Equal(t, []string{shipped.ID}, eventIDs(byCause.Events))
		bySchema := b.query(s, rheo.Query{Metadata: rheo.Lineage{Schema: "order", SchemaVersion: 2}.Metadata()})
		require.Equal(t, []string{placed.ID}, eventIDs(bySchema.Events))
	})

	t.Run("replay by query reopens the matching events the group finished", func(t *testing.T) {
		b := setup(t, h)
		b.requireReplay()
		s := b.stream(2)
		g := b.group(s, nil)
		other := b.group(s, nil)
		var red []string
		for n := range 9 {
			typ := "blue"
			if n%3 == 0 {
				typ = "red"
			}
			ev := b.append(s, json.RawMessage(fmt.Sprintf(`{"type": %q, "n": %d}`, typ, n)), &rheo.AppendOptions{Partition: ptr(n % 2)})
			if typ == "red" {
				red = append(red, ev.ID)
			}
		}
		b.drain(s, g)
		leases := b.fetch(s, other, &rheo.FetchOptions{MaxCount: 100})
		require.Len(t, leases, 9)

		n, err := driver.ReplayQuery(b.ctx, b.d, s, g, rheo.Query{Type: "red", MaxCount: 2})
		require.NoError(t, err)
		require.Equal(t, int64(len(red)), n)
		again := b.fetch(s, g, &rheo.FetchOptions{MaxCount: 100})
		require.ElementsMatch(t, red, leasedEventIDs(again))
		for _, l := range again {
			require.Equal(t, 1, l.Attempt)
		}

		n, err = driver.ReplayQuery(b.ctx, b.d, s, other, rheo.Query{Type: "red"})
		require.NoError(t, err)
		require.Zero(t, n, "leased events are left as they are")

		_, err = driver.ReplayQuery(b.ctx, b.d, s, "missing", rheo.Query{MaxCount: -1})
		require.ErrorIs(t, err, rheo.ErrGroupNotFound, "the group is checked before the query")
		_, err = driver.ReplayQuery(b.ctx, b.d, s, g, rheo.Query{Partition: ptr(5)})
		require.ErrorIs(t, err, rheo.ErrInvalidPartition)
	})

	t.Run("a query in a transaction sees the transaction's appends", func(t *testing.T) {
		b := setup(t, h)
		tr, ok := b.d.(driver.Transactor)
		if !ok {
			t.Skip("the driver has no transactions (driver.Transactor)")
		}
		s := b.stream(1)
		b.appendN(s, 1)
		err := tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			ev, err := tx.Append(ctx, s, payload(2), nil)
			require.NoError(t, err)
			page, err := tx.Query(ctx, s, rheo.Query{Descending: true, MaxCount: 1})
			require.NoError(t, err)
			require.Equal(t, []string{ev.ID}, eventIDs(page.Events))
			return nil
		})
		require.NoError(t, err)
	})
}

func (b *bundle) query(stream string, q rheo.Query) rheo.Page {
	b.t.Helper()
	page, err := b.d.Query(b.ctx, stream, q)
	require.NoError(b.t, err)
	require.NotEmpty(b.t, page.Cursor, "every page has a cursor")
	return page
}

// walk pages through q with page sizes taken in turn from sizes, each
// page after the previous one's cursor, until a short page.
func (b *bundle) walk(stream string, q rheo.Query, sizes []int) []rheo.Event {
	b.t.Helper()
	var all []rheo.Event
	for i := 0; ; i++ {
		q.MaxCount = sizes[i%len(sizes)]
		page := b.query(stream, q)
		all = append(all, page.Events...)
		if len(page.Events) < q.MaxCount {
			return all
		}
		q.After = page.Cursor
	}
}

// filterFixture makes a stream of two partitions whose events every
// filter tells apart (ids e1…e6):
//
//	p0 s1  e1 order.placed o1, total 10, lines, tags   c1                  +1s
//	p0 s2  e2 order.paid   o1, total 10.0              c1, caused by e1    +2s
//	p0 s3  e3 order.placed o2, total "10"              c2                  +3s
//	p1 s1  e4 order.shipped o1                         c1, caused by e2    +4s
//	p1 s2  e5 no type, no key                          {}                  +5s
//	p1 s3  e6 order.placed, total 1e1                  42 (a number)       +0s
func (b *bundle) filterFixture() string {
	b.t.Helper()
	s := b.stream(2)
	for _, e := range []struct {
		id, key, payload, metadata string
		partition                  int
		ts                         time.Duration
	}{
		{"e1", "o1", `{"type": "order.placed", "order": {"id": "o1", "total": 10, "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]}, "tags": ["new", "vip"]}`,
			`{"correlation_id": "c1", "producer": "shop", "schema": "order", "schema_version": 1}`, 0, time.Second},
		{"e2", "o1", `{"type": "order.paid", "order": {"id": "o1", "total": 10.0}}`,
			`{"correlation_id": "c1", "causation_id": "e1"}`, 0, 2 * time.Second},
		{"e3", "o2", `{"type": "order.placed", "order": {"id": "o2", "total": "10"}}`,
			`{"correlation_id": "c2"}`, 0, 3 * time.Second},
		{"e4", "o1", `{"type": "order.shipped", "order": {"id": "o1"}}`,
			`{"correlation_id": "c1", "causation_id": "e2"}`, 1, 4 * time.Second},
		{"e5", "", `{"n": 1}`, `{}`, 1, 5 * time.Second},
		{"e6", "", `{"type": "order.placed", "order": {"id": "o3", "total": 1e1}}`,
			`{"correlation_id": 42}`, 1, 0},
	} {
		ts := Epoch.Add(e.ts)
		b.append(s, json.RawMessage(e.payload), &rheo.AppendOptions{
			ID: e.id, Key: e.key, Partition: ptr(e.partition), Metadata: json.RawMessage(e.metadata), TS: &ts,
		})
	}
	return s
}

// randomEvents appends n events to random partitions with random types
// and timestamps that do not follow the sequences.
func (b *bundle) randomEvents(stream string, rng *rand.Rand, partitions, n int) []rheo.Event {
	b.t.Helper()
	events := make([]rheo.Event, n)
	for i := range events {
		ts := Epoch.Add(time.Duration(rng.IntN(600)) * time.Second)
		p := json.RawMessage(fmt.Sprintf(`{"type": "t%d", "n": %d, "odd": %v}`, rng.IntN(3), i, i%2 == 1))
		events[i] = b.append(stream, p, &rheo.AppendOptions{Partition: ptr(rng.IntN(partitions)), TS: &ts})
	}
	return events
}

// randomFilter is a query and the events it selects, worked out here.
type randomFilter struct {
	name  string
	query rheo.Query
	keep  func(ev rheo.Event) bool
}

// apply returns the events of all that f keeps, in query order.
func (f randomFilter) apply(all []rheo.Event, descending bool) []rheo.Event {
	var out []rheo.Event
	for _, ev := range all {
		if f.keep(ev) {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, compareQueryOrder)
	if descending {
		slices.Reverse(out)
	}
	return out
}

func randomFilters(rng *rand.Rand, partitions int) []randomFilter {
	typ := fmt.Sprintf("t%d", rng.IntN(3))
	partition := rng.IntN(partitions)
	from := Epoch.Add(time.Duration(rng.IntN(300)) * time.Second)
	to := from.Add(time.Duration(rng.IntN(300)) * time.Second)
	after := int64(rng.IntN(10))
	until := after + int64(rng.IntN(30))
	return []randomFilter{
		{"no filter", rheo.Query{}, func(rheo.Event) bool { return true }},
		{"type " + typ, rheo.Query{Type: typ}, func(ev rheo.Event) bool { return ev.Type == typ }},
		{fmt.Sprintf("partition %d", partition), rheo.Query{Partition: ptr(partition)},
			func(ev rheo.Event) bool { return ev.Partition == partition }},
		{"odd payloads", rheo.Query{Payload: json.RawMessage(`{"odd": true}`)},
			func(ev rheo.Event) bool { return jsonField(ev.Payload, "odd") == true }},
		{fmt.Sprintf("ts from %s to %s", from, to), rheo.Query{From: &from, To: &to},
			func(ev rheo.Event) bool { return !ev.TS.Before(from) && !ev.TS.After(to) }},
		{fmt.Sprintf("sequences %d < s <= %d", after, until), rheo.Query{AfterSequence: after, UntilSequence: &until},
			func(ev rheo.Event) bool { return ev.Sequence > after && ev.Sequence <= until }},
	}
}

// jsonField returns a top-level field of a JSON object, decoded.
func jsonField(object json.RawMessage, name string) any {
	var fields map[string]any
	if json.Unmarshal(object, &fields) != nil {
		return nil
	}
	return fields[name]
}

// compareQueryOrder orders events by (sequence, partition).
func compareQueryOrder(a, b rheo.Event) int {
	return cmp.Or(cmp.Compare(a.Sequence, b.Sequence), cmp.Compare(a.Partition, b.Partition))
}

// countingQuerier counts the pages read through it.
type countingQuerier struct {
	q     driver.Querier
	calls int
}

func (c *countingQuerier) Query(ctx context.Context, stream string, q rheo.Query) (rheo.Page, error) {
	c.calls++
	return c.q.Query(ctx, stream, q)
}

func eventIDs(events []rheo.Event) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.ID)
	}
	return out
}

func eventPositions(events []rheo.Event) []position {
	out := make([]position, len(events))
	for i, ev := range events {
		out[i] = position{ev.Partition, ev.Sequence}
	}
	return out
}

func leasedEventIDs(leases []rheo.Lease) []string {
	out := make([]string, len(leases))
	for i, l := range leases {
		out[i] = l.Event.ID
	}
	return out
}
