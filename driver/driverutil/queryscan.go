package driverutil

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/rheo-go/rheo"
)

// QueryScan is a rheo.Query checked against a stream (CheckQuery), for
// the drivers that page through a stream's events themselves, as
// rheo.query_page does: where each page starts (Start), which events it
// keeps (Matches), in which order and how many (Cut), and where the next
// page starts (Advance).
type QueryScan struct {
	rheo.Query
	// MaxCount is the page's size, the default filled in.
	MaxCount int
	// Scope is the partitions read, in order.
	Scope []int
	// Payload and Metadata are the decoded patterns, nil when not given.
	Payload, Metadata any
}

// CheckQuery checks q against a stream of count partitions, in the order
// rheo.query_page does.
func CheckQuery(q rheo.Query, count int) (QueryScan, error) {
	s := QueryScan{Query: q}
	if q.Partition != nil {
		if p := *q.Partition; p < 0 || p >= count {
			return s, OutOfRange(p, count)
		}
		s.Scope = []int{*q.Partition}
	} else {
		s.Scope = AllPartitions(count)
	}
	for _, f := range []struct {
		name    string
		pattern json.RawMessage
		dst     *any
	}{{"payload", q.Payload, &s.Payload}, {"metadata", q.Metadata, &s.Metadata}} {
		if f.pattern == nil {
			continue
		}
		if !IsObject(f.pattern) {
			return s, rheo.Errorf(rheo.ErrInvalidArgument, "filter %s must be a JSON object", f.name)
		}
		v, err := DecodeJSON(f.pattern)
		if err != nil {
			return s, rheo.Errorf(rheo.ErrInvalidArgument, "filter %s is not valid JSON", f.name)
		}
		*f.dst = v
	}
	if q.AfterSequence < 0 {
		return s, rheo.Errorf(rheo.ErrInvalidArgument, "filter after_sequence must be an integer >= 0, got %d", q.AfterSequence)
	}
	if q.UntilSequence != nil && *q.UntilSequence < 0 {
		return s, rheo.Errorf(rheo.ErrInvalidArgument, "filter until_sequence must be an integer >= 0, got %d", *q.UntilSequence)
	}
	s.MaxCount = WithDefaults(&q).MaxCount
	if s.MaxCount < 0 {
		return s, rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", s.MaxCount)
	}
	return s, nil
}

// Start is where the page begins in each partition of the scope, whose
// high watermarks are hwm: after the cursor's positions (issued for the
// query of this fingerprint), else, descending, above what is visible
// now, else after AfterSequence.
func (s QueryScan) Start(fingerprint string, hwm []int64) ([]int64, error) {
	switch {
	case s.After != "":
		return DecodeQueryCursor(s.After, fingerprint, len(s.Scope))
	case s.Descending:
		// Pin the walk to what is visible now.
		pos := make([]int64, len(hwm))
		for i, h := range hwm {
			if s.UntilSequence != nil {
				h = min(h, *s.UntilSequence)
			}
			pos[i] = h + 1
		}
		return pos, nil
	default:
		pos := make([]int64, len(s.Scope))
		for i := range pos {
			pos[i] = s.AfterSequence
		}
		return pos, nil
	}
}

// Matches applies every filter but the sequence bounds, which the reads
// of the partitions apply.
func (s QueryScan) Matches(ev rheo.Event) bool {
	if s.Type != "" && ev.Type != s.Type || s.Key != "" && ev.Key != s.Key {
		return false
	}
	if s.From != nil && ev.TS.Before(s.From.Truncate(time.Microsecond)) {
		return false
	}
	if s.To != nil && ev.TS.After(s.To.Truncate(time.Microsecond)) {
		return false
	}
	return s.Contains(ev)
}

// Contains applies the containment filters (Payload, Metadata) alone.
func (s QueryScan) Contains(ev rheo.Event) bool {
	for _, f := range []struct {
		pattern any
		doc     json.RawMessage
	}{{s.Payload, ev.Payload}, {s.Metadata, ev.Metadata}} {
		if f.pattern == nil {
			continue
		}
		doc, err := DecodeJSON(f.doc)
		if err != nil || !JSONContains(doc, f.pattern) {
			return false
		}
	}
	return true
}

// Cut orders the events read from every partition of the scope by
// (sequence, partition), descending when the query is, and keeps the
// first MaxCount.
func (s QueryScan) Cut(events []rheo.Event) []rheo.Event {
	slices.SortFunc(events, func(a, b rheo.Event) int {
		c := cmp.Or(cmp.Compare(a.Sequence, b.Sequence), cmp.Compare(a.Partition, b.Partition))
		if s.Descending {
			return -c
		}
		return c
	})
	return events[:min(len(events), s.MaxCount)]
}

// Advance moves each position over what the page examined, as
// rheo.query_page does: a short page examined everything visible within
// the bounds; a full page ending at (s, p) examined, ascending, every
// event up to (s, p) in the merge order but never past the high
// watermark, and descending every event from (s, p) down.
func (s QueryScan) Advance(pos, hwm []int64, page []rheo.Event) {
	if len(page) < s.MaxCount {
		for i := range pos {
			if s.Descending {
				// Below AfterSequence + 1 nothing is left to match; at
				// the largest int64, a position at it leaves nothing
				// either, and adding 1 would overflow.
				pos[i] = min(s.AfterSequence, math.MaxInt64-1) + 1
				continue
			}
			limit := hwm[i]
			if s.UntilSequence != nil {
				limit = min(limit, *s.UntilSequence)
			}
			pos[i] = max(pos[i], limit)
		}
		return
	}
	last := page[len(page)-1]
	for i, p := range s.Scope {
		if s.Descending {
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
