package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
)

var _ driver.Querier = (*Driver)(nil)

// Query returns one page of the events of stream that q selects, with the
// cursor of the next page, with the checks, merge order and cursor
// positions of PostgreSQL's rheo.query_page. Redis has no index on the
// events' fields: each partition in scope is read with XRANGE (XREVRANGE
// descending) from the cursor's position, in chunks, and the filters are
// applied here, until the page is full or the partition's end. A page
// costs the events it passes over, matching or not: a selective filter
// over a long log reads much of it (docs/redis.md).
func (d *Driver) Query(ctx context.Context, stream string, q rheo.Query) (rheo.Page, error) {
	if err := checkTexts(stream, q.Type, q.Key, q.After); err != nil {
		return rheo.Page{}, err
	}
	for name, v := range map[string]json.RawMessage{"payload": q.Payload, "metadata": q.Metadata} {
		if v == nil {
			continue
		}
		if err := checkJSON(name+" filter", v); err != nil {
			return rheo.Page{}, err
		}
	}
	page, err := d.queryPage(ctx, stream, q)
	if err != nil {
		return rheo.Page{}, interpretError("query", err, false)
	}
	return page, nil
}

// eventQuery is a checked Query: its filters ready for SQL and for the
// containment tests made in Go.
type eventQuery struct {
	rheo.Query
	maxCount int
	scope    []int
	// payload and metadata are the decoded patterns, nil when not given.
	payload, metadata any
}

// checkQuery checks q against a stream of count partitions, in the order
// rheo.query_page does.
func checkQuery(q rheo.Query, count int) (eventQuery, error) {
	eq := eventQuery{Query: q}
	if q.Partition != nil {
		if p := *q.Partition; p < 0 || p >= count {
			return eq, driverutil.OutOfRange(p, count)
		}
		eq.scope = []int{*q.Partition}
	} else {
		eq.scope = driverutil.AllPartitions(count)
	}
	for _, f := range []struct {
		name    string
		pattern json.RawMessage
		dst     *any
	}{{"payload", q.Payload, &eq.payload}, {"metadata", q.Metadata, &eq.metadata}} {
		if f.pattern == nil {
			continue
		}
		if !driverutil.IsObject(f.pattern) {
			return eq, rheo.Errorf(rheo.ErrInvalidArgument, "filter %s must be a JSON object", f.name)
		}
		v, err := driverutil.DecodeJSON(f.pattern)
		if err != nil {
			return eq, rheo.Errorf(rheo.ErrInvalidArgument, "filter %s is not valid JSON", f.name)
		}
		*f.dst = v
	}
	if q.AfterSequence < 0 {
		return eq, rheo.Errorf(rheo.ErrInvalidArgument, "filter after_sequence must be an integer >= 0, got %d", q.AfterSequence)
	}
	if q.UntilSequence != nil && *q.UntilSequence < 0 {
		return eq, rheo.Errorf(rheo.ErrInvalidArgument, "filter until_sequence must be an integer >= 0, got %d", *q.UntilSequence)
	}
	eq.maxCount = driverutil.WithDefaults(&q).MaxCount
	if eq.maxCount < 0 {
		return eq, rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", eq.maxCount)
	}
	return eq, nil
}

// matches applies every filter but the sequence bounds, which the reads
// apply.
func (eq eventQuery) matches(ev rheo.Event) bool {
	if eq.Type != "" && ev.Type != eq.Type || eq.Key != "" && ev.Key != eq.Key {
		return false
	}
	if eq.From != nil && ev.TS.Before(eq.From.Truncate(time.Microsecond)) {
		return false
	}
	if eq.To != nil && ev.TS.After(eq.To.Truncate(time.Microsecond)) {
		return false
	}
	for _, f := range []struct {
		pattern any
		doc     json.RawMessage
	}{{eq.payload, ev.Payload}, {eq.metadata, ev.Metadata}} {
		if f.pattern == nil {
			continue
		}
		doc, err := driverutil.DecodeJSON(f.doc)
		if err != nil || !driverutil.JSONContains(doc, f.pattern) {
			return false
		}
	}
	return true
}

func (d *Driver) queryPage(ctx context.Context, stream string, q rheo.Query) (rheo.Page, error) {
	p := prefix(stream)
	var metaCmd *goredis.MapStringStringCmd
	var hwmCmd *goredis.MapStringStringCmd
	// One MULTI on the stream's slot: the partition count and the high
	// watermarks agree.
	if _, err := d.client.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		metaCmd = pipe.HGetAll(ctx, p+"meta")
		hwmCmd = pipe.HGetAll(ctx, p+"hwm")
		return nil
	}); err != nil {
		return rheo.Page{}, err
	}
	meta := metaCmd.Val()
	if len(meta) == 0 {
		return rheo.Page{}, rheo.Errorf(rheo.ErrStreamNotFound, "stream %s does not exist", stream)
	}
	count, _ := strconv.Atoi(meta["n"])
	eq, err := checkQuery(q, count)
	if err != nil {
		return rheo.Page{}, err
	}
	fingerprint, err := driverutil.QueryFingerprint(stream, q)
	if err != nil {
		return rheo.Page{}, err
	}
	hwm := make([]int64, len(eq.scope))
	for i, part := range eq.scope {
		hwm[i], _ = strconv.ParseInt(hwmCmd.Val()[strconv.Itoa(part)], 10, 64)
	}

	var pos []int64
	switch {
	case q.After != "":
		if pos, err = driverutil.DecodeQueryCursor(q.After, fingerprint, len(eq.scope)); err != nil {
			return rheo.Page{}, err
		}
	case q.Descending:
		// Pin the walk to what is visible now.
		pos = make([]int64, len(hwm))
		for i, h := range hwm {
			if q.UntilSequence != nil {
				h = min(h, *q.UntilSequence)
			}
			pos[i] = h + 1
		}
	default:
		pos = make([]int64, len(eq.scope))
		for i := range pos {
			pos[i] = q.AfterSequence
		}
	}
	if eq.maxCount == 0 {
		return rheo.Page{Events: []rheo.Event{}, Cursor: driverutil.EncodeQueryCursor(fingerprint, pos)}, nil
	}

	events := []rheo.Event{}
	for i, p := range eq.scope {
		found, err := d.queryPartition(ctx, stream, p, pos[i], hwm[i], eq)
		if err != nil {
			return rheo.Page{}, err
		}
		events = append(events, found...)
	}
	slices.SortFunc(events, func(a, b rheo.Event) int {
		c := compareEvents(a, b)
		if q.Descending {
			return -c
		}
		return c
	})
	events = events[:min(len(events), eq.maxCount)]
	advance(pos, hwm, eq, events)
	return rheo.Page{Events: events, Cursor: driverutil.EncodeQueryCursor(fingerprint, pos)}, nil
}

// compareEvents orders events by (sequence, partition).
func compareEvents(a, b rheo.Event) int {
	return cmp.Or(cmp.Compare(a.Sequence, b.Sequence), cmp.Compare(a.Partition, b.Partition))
}

// advance moves each position over what the page examined, as
// rheo.query_page does: a short page examined everything visible within
// the bounds; a full page ending at (s, p) examined, ascending, every
// event up to (s, p) in the merge order but never past the high
// watermark, and descending every event from (s, p) down.
func advance(pos, hwm []int64, eq eventQuery, page []rheo.Event) {
	if len(page) < eq.maxCount {
		for i := range pos {
			if eq.Descending {
				// Below AfterSequence + 1 nothing is left to match; at
				// the largest int64, a position at it leaves nothing
				// either, and adding 1 would overflow.
				pos[i] = min(eq.AfterSequence, math.MaxInt64-1) + 1
				continue
			}
			limit := hwm[i]
			if eq.UntilSequence != nil {
				limit = min(limit, *eq.UntilSequence)
			}
			pos[i] = max(pos[i], limit)
		}
		return
	}
	last := page[len(page)-1]
	for i, p := range eq.scope {
		if eq.Descending {
			bound := last.Sequence
			if p < last.Partition {
				bound++
			}
			pos[i] = min(pos[i], bound)
			continue
		}
		bound := last.Sequence
		if p > last.Partition {
			bound--
		}
		pos[i] = max(pos[i], min(hwm[i], bound))
	}
}

// queryChunk is how many entries one XRANGE of a query reads.
const queryChunk = 500

// queryPartition returns up to eq.maxCount events of one partition past
// position pos (below it, descending) that match eq, in the query's
// order, reading the partition in chunks up to its high watermark hwm.
func (d *Driver) queryPartition(ctx context.Context, stream string, partition int, pos, hwm int64, eq eventQuery) ([]rheo.Event, error) {
	key := prefix(stream) + "e:" + strconv.Itoa(partition)
	found := []rheo.Event{}
	if eq.Descending {
		if pos <= eq.AfterSequence+1 || pos <= 1 {
			return found, nil
		}
		hi := fmt.Sprintf("(%d-0", pos)
		lo := fmt.Sprintf("(%d-0", eq.AfterSequence)
		for len(found) < eq.maxCount {
			entries, err := d.client.XRevRangeN(ctx, key, hi, lo, queryChunk).Result()
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				ev, err := messageEvent(stream, partition, e)
				if err != nil {
					return nil, err
				}
				if eq.matches(ev) {
					found = append(found, ev)
					if len(found) == eq.maxCount {
						break
					}
				}
			}
			if len(entries) < queryChunk {
				break
			}
			hi = "(" + entries[len(entries)-1].ID
		}
		return found, nil
	}
	limit := hwm
	if eq.UntilSequence != nil {
		limit = min(limit, *eq.UntilSequence)
	}
	if pos >= limit {
		return found, nil
	}
	lo := fmt.Sprintf("(%d-0", pos)
	hi := fmt.Sprintf("%d-0", limit)
	for len(found) < eq.maxCount {
		entries, err := d.client.XRangeN(ctx, key, lo, hi, queryChunk).Result()
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ev, err := messageEvent(stream, partition, e)
			if err != nil {
				return nil, err
			}
			if eq.matches(ev) {
				found = append(found, ev)
				if len(found) == eq.maxCount {
					break
				}
			}
		}
		if len(entries) < queryChunk {
			break
		}
		lo = "(" + entries[len(entries)-1].ID
	}
	return found, nil
}

// messageEvent decodes an entry as go-redis reads it.
func messageEvent(stream string, partition int, m goredis.XMessage) (rheo.Event, error) {
	fields := make([]any, 0, 2*len(m.Values))
	for k, v := range m.Values {
		fields = append(fields, k, v)
	}
	ev, err := decodeFields(stream, fields)
	if err != nil {
		return ev, err
	}
	ev.Partition = partition
	if _, err := fmt.Sscanf(m.ID, "%d-0", &ev.Sequence); err != nil {
		return ev, fmt.Errorf("entry id %q: %w", m.ID, err)
	}
	return ev, nil
}
