package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

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
	eq, err := driverutil.CheckQuery(q, count)
	if err != nil {
		return rheo.Page{}, err
	}
	fingerprint, err := driverutil.QueryFingerprint(stream, q)
	if err != nil {
		return rheo.Page{}, err
	}
	hwm := make([]int64, len(eq.Scope))
	for i, part := range eq.Scope {
		hwm[i], _ = strconv.ParseInt(hwmCmd.Val()[strconv.Itoa(part)], 10, 64)
	}

	pos, err := eq.Start(fingerprint, hwm)
	if err != nil {
		return rheo.Page{}, err
	}
	if eq.MaxCount == 0 {
		return rheo.Page{Events: []rheo.Event{}, Cursor: driverutil.EncodeQueryCursor(fingerprint, pos)}, nil
	}

	events := []rheo.Event{}
	for i, p := range eq.Scope {
		found, err := d.queryPartition(ctx, stream, p, pos[i], hwm[i], eq)
		if err != nil {
			return rheo.Page{}, err
		}
		events = append(events, found...)
	}
	events = eq.Cut(events)
	eq.Advance(pos, hwm, events)
	return rheo.Page{Events: events, Cursor: driverutil.EncodeQueryCursor(fingerprint, pos)}, nil
}

// queryChunk is how many entries one XRANGE of a query reads.
const queryChunk = 500

// queryPartition returns up to eq.MaxCount events of one partition past
// position pos (below it, descending) that match eq, in the query's
// order, reading the partition in chunks up to its high watermark hwm.
func (d *Driver) queryPartition(ctx context.Context, stream string, partition int, pos, hwm int64, eq driverutil.QueryScan) ([]rheo.Event, error) {
	key := prefix(stream) + "e:" + strconv.Itoa(partition)
	found := []rheo.Event{}
	// from is where the next chunk starts (exclusive); read reads a chunk
	// from it in the query's direction, up to the bound.
	var from string
	var read func(from string) ([]goredis.XMessage, error)
	if eq.Descending {
		if pos <= eq.AfterSequence+1 || pos <= 1 {
			return found, nil
		}
		from = fmt.Sprintf("(%d-0", pos)
		bound := fmt.Sprintf("(%d-0", eq.AfterSequence)
		read = func(from string) ([]goredis.XMessage, error) {
			return d.client.XRevRangeN(ctx, key, from, bound, queryChunk).Result()
		}
	} else {
		limit := hwm
		if eq.UntilSequence != nil {
			limit = min(limit, *eq.UntilSequence)
		}
		if pos >= limit {
			return found, nil
		}
		from = fmt.Sprintf("(%d-0", pos)
		bound := fmt.Sprintf("%d-0", limit)
		read = func(from string) ([]goredis.XMessage, error) {
			return d.client.XRangeN(ctx, key, from, bound, queryChunk).Result()
		}
	}
	for len(found) < eq.MaxCount {
		entries, err := read(from)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ev, err := messageEvent(stream, partition, e)
			if err != nil {
				return nil, err
			}
			if eq.Matches(ev) {
				found = append(found, ev)
				if len(found) == eq.MaxCount {
					break
				}
			}
		}
		if len(entries) < queryChunk {
			break
		}
		from = "(" + entries[len(entries)-1].ID
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
