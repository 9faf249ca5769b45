package redis

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// Append adds one event; payload must be a JSON object. opts may be nil.
func (d *Driver) Append(ctx context.Context, stream string, payload json.RawMessage, opts *rheo.AppendOptions) (rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendOptions{}
	}
	if err := checkItem(payload, opts.Key, opts.ID); err != nil {
		return rheo.Event{}, err
	}
	if opts.TS != nil {
		if err := checkTime("ts", *opts.TS); err != nil {
			return rheo.Event{}, err
		}
	}
	items := []rheo.BatchItem{{Payload: payload, Key: opts.Key, ID: opts.ID}}
	events, err := d.appendItems(ctx, "append", stream, items, opts.Partition, opts.Metadata, opts.TS)
	if err != nil {
		return rheo.Event{}, err
	}
	return events[0], nil
}

// AppendBatch adds events atomically, in one script: the result keeps
// input order, and each partition's events get contiguous sequences.
// opts may be nil.
func (d *Driver) AppendBatch(ctx context.Context, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendBatchOptions{}
	}
	for _, item := range items {
		if err := checkItem(item.Payload, item.Key, item.ID); err != nil {
			return nil, err
		}
	}
	return d.appendItems(ctx, "append_batch", stream, items, opts.Partition, opts.Metadata, nil)
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

// appendChecks are the argument checks of an append that come after the
// stream's existence: before the partition's range (metadata) and after
// it (payloads, lengths), in rheo._append's order.
func appendChecks(items []rheo.BatchItem, metadata json.RawMessage) (before, after error, keys []string) {
	if !driverutil.IsObject(metadata) {
		return rheo.Errorf(rheo.ErrInvalidArgument, "metadata must be a JSON object"), nil, nil
	}
	if err := driverutil.CheckLineage(metadata); err != nil {
		return err, nil, nil
	}
	for i, item := range items {
		if !driverutil.IsObject(item.Payload) {
			if len(items) == 1 {
				return nil, rheo.Errorf(rheo.ErrInvalidArgument, "payload must be a JSON object"), nil
			}
			return nil, rheo.Errorf(rheo.ErrInvalidArgument, "payload %d of the batch is not a JSON object", i), nil
		}
	}
	at := func(i int) string {
		if len(items) == 1 {
			return ""
		}
		return fmt.Sprintf(" %d of the batch", i)
	}
	for i, item := range items {
		if err := driverutil.CheckLength("event id"+at(i), item.ID); err != nil {
			return nil, err, nil
		}
	}
	for i, item := range items {
		if err := driverutil.CheckLength("key"+at(i), item.Key); err != nil {
			return nil, err, nil
		}
	}
	keys = make([]string, len(items))
	for i, item := range items {
		keys[i] = item.Key
		if keys[i] != "" {
			continue
		}
		keys[i] = driverutil.PayloadKey(item.Payload)
		if err := driverutil.CheckLength("payload key"+at(i), keys[i]); err != nil {
			return nil, err, nil
		}
	}
	return nil, nil, keys
}

func (d *Driver) appendItems(ctx context.Context, op, stream string, items []rheo.BatchItem, partition *int,
	metadata json.RawMessage, ts *time.Time) ([]rheo.Event, error) {
	if err := driverutil.CheckText("text argument", stream); err != nil {
		return nil, err
	}
	if metadata == nil {
		metadata = json.RawMessage(`{}`)
	} else if err := checkJSON("metadata", metadata); err != nil {
		return nil, err
	}
	now, err := d.now()
	if err != nil {
		return nil, err
	}
	before, after, keys := appendChecks(items, metadata)
	explicit := ""
	if partition != nil {
		explicit = strconv.Itoa(*partition)
	}
	when := now.t
	if ts != nil {
		when = *ts
	}
	whenEnc := encTime(when)
	metaStored := compact(metadata)
	metaPrint := fingerprintPart(metadata)
	args := []any{stream, explicit, argWords(after), len(items)}
	type prepared struct {
		id, key, payload, typ string
	}
	prep := make([]prepared, len(items))
	if after == nil && before == nil {
		for i, item := range items {
			id, generated := item.ID, ""
			if id == "" {
				id, generated = driverutil.NewEventID(now.t.UnixMicro()), "1"
			}
			hash := ""
			if keys[i] != "" {
				sum := md5.Sum([]byte(keys[i]))
				hash = strconv.FormatUint(uint64(binary.BigEndian.Uint32(sum[:4])), 10)
			}
			payload := compact(item.Payload)
			doc, _ := driverutil.DecodeJSON(item.Payload) // checked: a JSON object
			typ := typeOf(doc, item.Payload)
			fp := fingerprint(canonical(doc), keys[i], metaPrint)
			prep[i] = prepared{id: id, key: keys[i], payload: payload, typ: typ}
			args = append(args, id, keys[i], hash, payload, metaStored, whenEnc, fp, typ, generated)
		}
	} else {
		args[3] = 0
	}
	v, err := d.call(ctx, scriptAppend, stream, before, now, args...)
	if err != nil {
		return nil, err
	}
	rows, _ := v.([]any)
	events := make([]rheo.Event, len(items))
	for i, r := range rows {
		f := r.([]any)
		p, seq := int(f[0].(int64)), f[1].(int64)
		ev := rheo.Event{Stream: stream, Partition: p, Sequence: seq}
		switch f[2].(int64) {
		case 0, 2:
			ev.ID, ev.Key, ev.Type = prep[i].id, prep[i].key, prep[i].typ
			ev.Payload, ev.Metadata, ev.TS = json.RawMessage(prep[i].payload), json.RawMessage(metaStored), when.UTC()
		case 1:
			ev.ID, ev.Key, ev.Type = prep[i].id, f[6].(string), f[7].(string)
			ev.Payload, ev.Metadata = json.RawMessage(f[4].(string)), json.RawMessage(f[5].(string))
			if ev.TS, err = decTime(f[3].(string)); err != nil {
				return nil, &rheo.FailedError{Op: op, Err: err}
			}
		}
		events[i] = ev
	}
	for i := range events {
		if f := rows[i].([]any); f[2].(int64) == 2 {
			// An id repeated in the batch is the event of its first
			// occurrence.
			for j := range i {
				if prep[j].id == prep[i].id {
					events[i] = events[j]
					break
				}
			}
		}
	}
	return events, nil
}

// compact is JSON text without insignificant space.
func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}

// typeOf is payload->>'type', from the decoded payload doc (its raw
// text for a type that is not a string).
func typeOf(doc any, payload json.RawMessage) string {
	fields, _ := doc.(map[string]any)
	switch t := fields["type"].(type) {
	case nil:
		return ""
	case string:
		return t
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(payload, &raw) != nil {
		return ""
	}
	return driverutil.FieldText(raw["type"])
}

// fingerprintPart is canonical of a JSON text.
func fingerprintPart(v json.RawMessage) string {
	doc, err := driverutil.DecodeJSON(v)
	if err != nil {
		return string(v)
	}
	return canonical(doc)
}

// canonical is a decoded JSON value in a form that two values
// PostgreSQL's jsonb holds equal share: keys sorted, the last of
// duplicates kept, numbers reduced to their value.
func canonical(doc any) string {
	var b bytes.Buffer
	writeCanonical(&b, doc)
	return b.String()
}

func writeCanonical(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			q, _ := json.Marshal(k)
			b.Write(q)
			b.WriteByte(':')
			writeCanonical(b, v[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, x)
		}
		b.WriteByte(']')
	case json.Number:
		n, ok := driverutil.CanonicalNumber(string(v))
		if !ok {
			b.WriteString(string(v))
			return
		}
		b.WriteString(n)
	default:
		q, _ := json.Marshal(v)
		b.Write(q)
	}
}

// fingerprint is the digest of an event's content that an idempotent
// repeat must match: payload, effective key and metadata.
func fingerprint(payload, key, metadata string) string {
	h := sha256.New()
	for _, part := range []string{payload, key, metadata} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	// 128 bits are plenty to tell contents apart, and half the bytes of
	// the whole digest stored with every event.
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Read returns a page of one partition in sequence order. opts may be nil.
func (d *Driver) Read(ctx context.Context, stream string, opts *rheo.ReadOptions) ([]rheo.Event, error) {
	opts = driverutil.WithDefaults(opts)
	if err := driverutil.CheckText("text argument", stream); err != nil {
		return nil, err
	}
	var argErr error
	if opts.MaxCount < 0 {
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", opts.MaxCount)
	}
	after := opts.After
	if after < 0 {
		after = 0
	}
	v, err := d.call(ctx, scriptRead, stream, argErr, noClock, stream, after, opts.MaxCount, opts.Partition)
	if err != nil {
		return nil, err
	}
	events := []rheo.Event{}
	for _, e := range v.([]any) {
		ev, err := decodeEntry(stream, e.([]any))
		if err != nil {
			return nil, &rheo.FailedError{Op: "read", Err: err}
		}
		ev.Partition = opts.Partition
		events = append(events, ev)
	}
	return events, nil
}

// decodeEntry decodes an XRANGE entry: {id, {field, value, …}}.
func decodeEntry(stream string, e []any) (rheo.Event, error) {
	id := e[0].(string)
	ev, err := decodeFields(stream, e[1].([]any))
	if err != nil {
		return ev, err
	}
	var seq int64
	if _, err := fmt.Sscanf(id, "%d-0", &seq); err != nil {
		return ev, fmt.Errorf("entry id %q: %w", id, err)
	}
	ev.Sequence = seq
	return ev, nil
}

// decodeFields decodes an entry's fields; the partition and sequence are
// the caller's to set.
func decodeFields(stream string, fields []any) (rheo.Event, error) {
	ev := rheo.Event{Stream: stream}
	for i := 0; i+1 < len(fields); i += 2 {
		v := fields[i+1].(string)
		switch fields[i].(string) {
		case "i":
			ev.ID = v
		case "k":
			ev.Key = v
		case "y":
			ev.Type = v
		case "p":
			ev.Payload = json.RawMessage(v)
		case "m":
			ev.Metadata = json.RawMessage(v)
		case "t":
			ts, err := decTime(v)
			if err != nil {
				return ev, err
			}
			ev.TS = ts
		}
	}
	return ev, nil
}
