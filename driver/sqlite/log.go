package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// eventColumns are read by scanEvent, from rheo_events aliased e.
const eventColumns = `e."partition", e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts`

// scanEvent reads eventColumns, plus any extra destinations after them.
func scanEvent(rows *sql.Rows, stream string, extra ...any) (rheo.Event, error) {
	ev := rheo.Event{Stream: stream}
	var key, typ sql.NullString
	var payload, metadata []byte
	var ts int64
	dest := append([]any{&ev.Partition, &ev.Sequence, &ev.ID, &key, &typ, &payload, &metadata, &ts}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return ev, err
	}
	ev.Key, ev.Type = key.String, typ.String
	ev.Payload, ev.Metadata = payload, metadata
	ev.TS = fromMicros(ts)
	return ev, nil
}

// appendItem is one input of an append, with its effective id, key and
// partition.
type appendItem struct {
	payload   json.RawMessage
	id        string
	generated bool   // id was generated, so it cannot be stored yet
	key       string // "" for no key
	partition int
	// first is the index of the first input with the same id, itself
	// when the id is not repeated in the call.
	first int
}

// append is Append and AppendBatch: it stores the items that are new and
// returns, in input order, each item's event as stored. Ids already
// stored (or repeated in the call) with the same content are returned as
// stored and allocate nothing; with other content the whole call fails
// already_exists. ts is the events' timestamp, nil for the clock.
func (s *session) append(ctx context.Context, stream string, items []rheo.BatchItem, partition *int,
	metadata json.RawMessage, ts *time.Time) ([]rheo.Event, error) {
	count, err := s.stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	if !driverutil.IsObject(metadata) {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "metadata must be a JSON object")
	}
	if err := driverutil.CheckLineage(metadata); err != nil {
		return nil, err
	}
	if partition != nil && (*partition < 0 || *partition >= count) {
		return nil, driverutil.OutOfRange(*partition, count)
	}
	if len(items) == 0 {
		return []rheo.Event{}, nil
	}
	for i, item := range items {
		if !driverutil.IsObject(item.Payload) {
			if len(items) == 1 {
				return nil, rheo.Errorf(rheo.ErrInvalidArgument, "payload must be a JSON object")
			}
			return nil, rheo.Errorf(rheo.ErrInvalidArgument, "payload %d of the batch is not a JSON object", i)
		}
	}

	keys, err := effectiveKeys(items)
	if err != nil {
		return nil, err
	}
	inputs, err := s.routeItems(items, keys, count, partition)
	if err != nil {
		return nil, err
	}
	events := make([]rheo.Event, len(inputs))
	stored, err := s.storedEvents(ctx, stream, inputs, metadata)
	if err != nil {
		return nil, err
	}
	// New: the first occurrence of an id not stored yet.
	var fresh []int
	for i, in := range inputs {
		if ev, ok := stored[in.id]; ok {
			events[i] = ev
		} else if in.first == i {
			fresh = append(fresh, i)
		}
	}
	if len(fresh) > 0 {
		when := s.now
		if ts != nil {
			when = ts.UnixMicro() // checked to be in range (driverutil.CheckTime)
		}
		if err := s.insertEvents(ctx, stream, inputs, fresh, metadata, when, events); err != nil {
			return nil, err
		}
	}
	for i, in := range inputs {
		if in.first != i {
			events[i] = events[in.first]
		}
	}
	return events, nil
}

// effectiveKeys returns each item's routing key (its Key, else the
// payload's key field), after checking, in rheo._append's order, that the
// ids, then the keys given, then the keys taken from payloads are at most
// driverutil.MaxTextBytes long.
func effectiveKeys(items []rheo.BatchItem) ([]string, error) {
	at := func(i int) string {
		if len(items) == 1 {
			return ""
		}
		return fmt.Sprintf(" %d of the batch", i)
	}
	for i, item := range items {
		if err := driverutil.CheckLength("event id"+at(i), item.ID); err != nil {
			return nil, err
		}
	}
	for i, item := range items {
		if err := driverutil.CheckLength("key"+at(i), item.Key); err != nil {
			return nil, err
		}
	}
	keys := make([]string, len(items))
	for i, item := range items {
		keys[i] = item.Key
		if keys[i] != "" {
			continue
		}
		keys[i] = driverutil.PayloadKey(item.Payload)
		if err := driverutil.CheckLength("payload key"+at(i), keys[i]); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// routeItems gives each item its id (generated when empty) and partition,
// routed by its effective key (keys, from effectiveKeys), and rejects an
// id repeated with different content.
func (s *session) routeItems(items []rheo.BatchItem, keys []string, count int, partition *int) ([]appendItem, error) {
	inputs := make([]appendItem, len(items))
	firstByID := make(map[string]int, len(items))
	for i, item := range items {
		in := appendItem{payload: item.Payload, id: item.ID, key: keys[i], first: i}
		switch {
		case partition != nil:
			in.partition = *partition
		case in.key != "":
			in.partition = rheo.PartitionForKey(in.key, count)
		}
		if in.id == "" {
			in.id, in.generated = driverutil.NewEventID(s.now), true
		} else if j, ok := firstByID[in.id]; ok {
			if inputs[j].key != in.key || !driverutil.JSONEqual(inputs[j].payload, in.payload) {
				return nil, rheo.Errorf(rheo.ErrAlreadyExists, "event id %q appears twice in the batch with different content", in.id)
			}
			in.first = j
		} else {
			firstByID[in.id] = i
		}
		inputs[i] = in
	}
	return inputs, nil
}

// storedEvents returns the events already stored under the inputs' ids,
// failing already_exists when one differs from its input in payload, key
// or metadata.
func (s *session) storedEvents(ctx context.Context, stream string, inputs []appendItem, metadata json.RawMessage) (map[string]rheo.Event, error) {
	var ids []string
	for _, in := range inputs {
		if !in.generated {
			ids = append(ids, in.id)
		}
	}
	stored := map[string]rheo.Event{}
	if ids == nil {
		return stored, nil
	}
	// CROSS JOIN keeps json_each outside: one probe of the id index per input.
	rows, err := s.query(ctx, `
		SELECT `+eventColumns+`
		  FROM json_each(?2) AS u
		 CROSS JOIN rheo_events AS e ON e.id = u.value AND e.stream = ?1`, stream, stringsJSON(ids))
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		ev, err := scanEvent(rows, stream)
		if err != nil {
			return err
		}
		stored[ev.ID] = ev
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, in := range inputs {
		ev, ok := stored[in.id]
		if ok && (ev.Key != in.key || !driverutil.JSONEqual(ev.Payload, in.payload) || !driverutil.JSONEqual(ev.Metadata, metadata)) {
			return nil, rheo.Errorf(rheo.ErrAlreadyExists, "event id %q already exists on stream %q with other content", in.id, stream)
		}
	}
	return stored, nil
}

// timeMarkEvery is the distance between two time marks of a partition
// (rheo_time_marks), as on PostgreSQL.
const timeMarkEvery = 1024

// markTimes records a time mark at every multiple of timeMarkEvery in
// (before, high], the sequences just allocated in partition p. The
// events of one call share their ts, so the greatest ts up to each mark
// is the partition's new max_ts.
func (s *session) markTimes(ctx context.Context, stream string, p int, before, high, maxTS int64) error {
	for mark := (before/timeMarkEvery + 1) * timeMarkEvery; mark <= high; mark += timeMarkEvery {
		if _, err := s.exec(ctx, `INSERT INTO rheo_time_marks (stream, "partition", sequence, max_ts) VALUES (?1, ?2, ?3, ?4)`,
			stream, p, mark, maxTS); err != nil {
			return err
		}
	}
	return nil
}

// firstAtSQL is the lowest sequence of partition ?P of stream ?S whose ts
// is at or after ?T, or NULL when there is none, with ?S, ?P and ?T
// replaced by the caller's expressions. As on PostgreSQL (rheo._first_at):
// the first time mark whose running maximum reaches ?T bounds the search
// to the events after the mark before it.
func firstAtSQL(stream, partition, at string) string {
	return strings.NewReplacer("?S", stream, "?P", partition, "?T", at).Replace(`(
		SELECT e.sequence FROM rheo_events AS e
		 WHERE e.stream = ?S AND e."partition" = ?P AND e.ts >= ?T
		   AND e.sequence > coalesce(
		           (SELECT m.sequence - 1024 FROM rheo_time_marks AS m
		             WHERE m.stream = ?S AND m."partition" = ?P AND m.max_ts >= ?T
		             ORDER BY m.max_ts, m.sequence LIMIT 1),
		           (SELECT m.sequence FROM rheo_time_marks AS m
		             WHERE m.stream = ?S AND m."partition" = ?P
		             ORDER BY m.sequence DESC LIMIT 1),
		           0)
		 ORDER BY e.sequence LIMIT 1)`)
}

// insertEvents allocates sequences for the inputs listed in fresh and
// stores them, filling their places in events. Each partition's
// allocator row is bumped once for all its events, which get contiguous
// sequences in input order.
func (s *session) insertEvents(ctx context.Context, stream string, inputs []appendItem, fresh []int,
	metadata json.RawMessage, ts int64, events []rheo.Event) error {
	counts := map[int]int64{}
	for _, i := range fresh {
		counts[inputs[i].partition]++
	}
	parts := make([]int, 0, len(counts))
	for p := range counts {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	next := map[int]int64{} // the next sequence to give in each partition
	for _, p := range parts {
		var high, maxTS int64
		if err := s.queryRow(ctx, `
			UPDATE rheo_partitions SET high_watermark = high_watermark + ?3, max_ts = max(coalesce(max_ts, ?4), ?4)
			 WHERE stream = ?1 AND "partition" = ?2
			RETURNING high_watermark, max_ts`, stream, p, counts[p], ts).Scan(&high, &maxTS); err != nil {
			return err
		}
		next[p] = high - counts[p] + 1
		if err := s.markTimes(ctx, stream, p, high-counts[p], high, maxTS); err != nil {
			return err
		}
	}

	// One row per new event: [partition, sequence, id, key, payload].
	batch := []byte{'['}
	at := map[[2]int64]int{} // (partition, sequence) -> input index
	for n, i := range fresh {
		in := inputs[i]
		seq := next[in.partition]
		next[in.partition]++
		at[[2]int64{int64(in.partition), seq}] = i
		if n > 0 {
			batch = append(batch, ',')
		}
		batch = append(batch, '[')
		batch = strconv.AppendInt(batch, int64(in.partition), 10)
		batch = append(batch, ',')
		batch = strconv.AppendInt(batch, seq, 10)
		batch = append(batch, ',')
		batch = appendJSONString(batch, in.id)
		batch = append(batch, ',')
		if in.key == "" {
			batch = append(batch, "null"...)
		} else {
			batch = appendJSONString(batch, in.key)
		}
		batch = append(batch, ',')
		batch = append(batch, in.payload...)
		batch = append(batch, ']')
	}
	batch = append(batch, ']')
	rows, err := s.query(ctx, `
		INSERT INTO rheo_events (stream, "partition", sequence, id, key, payload, metadata, ts)
		SELECT ?1, j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value -> 4, json(?2), ?3
		  FROM json_each(?4) AS j
		RETURNING "partition", sequence, id, key, type, payload, metadata, ts`,
		stream, string(metadata), ts, string(batch))
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		ev, err := scanEvent(rows, stream)
		if err != nil {
			return err
		}
		events[at[[2]int64{int64(ev.Partition), ev.Sequence}]] = ev
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range parts {
		s.wakeups = append(s.wakeups, driver.Wakeup{Stream: stream, Partition: p, Sequence: next[p] - 1})
	}
	return nil
}

// appendJSONString appends s, valid UTF-8, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	quoted, _ := json.Marshal(s) // marshalling a string cannot fail
	return append(b, quoted...)
}

func (s *session) read(ctx context.Context, stream string, after int64, maxCount, partition int) ([]rheo.Event, error) {
	count, err := s.stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	if maxCount < 0 {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", maxCount)
	}
	if partition < 0 || partition >= count {
		return nil, driverutil.OutOfRange(partition, count)
	}
	events := []rheo.Event{}
	rows, err := s.query(ctx, `
		SELECT `+eventColumns+` FROM rheo_events AS e
		 WHERE e.stream = ? AND e."partition" = ? AND e.sequence > ?
		 ORDER BY e.sequence
		 LIMIT ?`, stream, partition, after, maxCount)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		ev, err := scanEvent(rows, stream)
		events = append(events, ev)
		return err
	})
	return events, err
}

// Append adds one event; payload must be a JSON object. opts may be nil.
func (o ops) Append(ctx context.Context, stream string, payload json.RawMessage, opts *rheo.AppendOptions) (rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendOptions{}
	}
	if err := checkItem(payload, opts.Key, opts.ID); err != nil {
		return rheo.Event{}, err
	}
	metadata, err := metadataArg(opts.Metadata)
	if err != nil {
		return rheo.Event{}, err
	}
	if opts.TS != nil {
		if err := driverutil.CheckTime("ts", *opts.TS); err != nil {
			return rheo.Event{}, err
		}
	}
	var events []rheo.Event
	err = o.runClocked(ctx, "append", []string{stream}, func(s *session) error {
		items := []rheo.BatchItem{{Payload: payload, Key: opts.Key, ID: opts.ID}}
		var err error
		events, err = s.append(ctx, stream, items, opts.Partition, metadata, opts.TS)
		return err
	})
	if err != nil {
		return rheo.Event{}, err
	}
	return events[0], nil
}

// AppendBatch adds events atomically; the result keeps input order.
// opts may be nil.
func (o ops) AppendBatch(ctx context.Context, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendBatchOptions{}
	}
	metadata, err := metadataArg(opts.Metadata)
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		if err := checkItem(item.Payload, item.Key, item.ID); err != nil {
			return nil, err
		}
	}
	var events []rheo.Event
	err = o.runClocked(ctx, "append_batch", []string{stream}, func(s *session) error {
		var err error
		events, err = s.append(ctx, stream, items, opts.Partition, metadata, nil)
		return err
	})
	return events, err
}

// Read returns a page of one partition in sequence order. opts may be nil.
func (o ops) Read(ctx context.Context, stream string, opts *rheo.ReadOptions) ([]rheo.Event, error) {
	opts = driverutil.WithDefaults(opts)
	maxCount := opts.MaxCount
	var events []rheo.Event
	err := o.runChecked(ctx, "read", []string{stream}, func(s *session) error {
		var err error
		events, err = s.read(ctx, stream, opts.After, maxCount, opts.Partition)
		return err
	})
	return events, err
}

// checkItem checks what PostgreSQL checks of an event as it receives it.
func checkItem(payload json.RawMessage, key, id string) error {
	if err := checkJSON("payload", payload); err != nil {
		return err
	}
	if err := driverutil.CheckText("key", key); err != nil {
		return err
	}
	return driverutil.CheckText("event id", id)
}
