package cli

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// timeCursorPrefix starts the cursors of rheo query --order time; the
// database's cursors are base64url, which has no colon.
const timeCursorPrefix = "time:"

// timeBuffered is how many events query --order time reads ahead over
// all partitions at first, at least one per partition: what it holds in
// memory is about max(timeBuffered, partitions) events, plus a refill.
const timeBuffered = 1000

// maxRefill is the most events one refill of a partition reads.
const maxRefill = 500

// timeSource is one partition of a query by time: the events read ahead,
// and where its reading and its output stand.
type timeSource struct {
	partition int
	query     rheo.Query
	buf       []rheo.Event
	size      int  // the next page size
	exhausted bool // the last page was short: nothing more matched
	// bound is the partition's position for the next page's cursor, set
	// once known: ascending, the last sequence shown; descending, the
	// highest sequence not shown yet (0: none left).
	bound *int64
}

// queryByTime prints one page of q in time order: the partitions' pages,
// each in sequence order, merged by ts (then partition, then sequence),
// reading at most about max(timeBuffered, partitions) events ahead. Its
// cursor holds one sequence bound per partition.
func (c *call) queryByTime(drv driver.Driver, q rheo.Query) error {
	var partitions []int
	if q.Partition != nil {
		partitions = []int{*q.Partition}
	} else {
		n, err := c.partitionCount(drv)
		if err != nil {
			return err
		}
		for p := range n {
			partitions = append(partitions, p)
		}
	}
	bounds, err := parseTimeCursor(q.After, q.Descending, partitions)
	if err != nil {
		return err
	}
	first := max(1, min(q.MaxCount, timeBuffered/max(1, len(partitions))))
	sources := make([]*timeSource, len(partitions))
	for i, p := range partitions {
		sq := q
		sq.Partition, sq.After, sq.MaxCount = &p, "", first
		if b, ok := bounds[p]; ok {
			if q.Descending {
				until := b
				if q.UntilSequence != nil {
					until = min(b, *q.UntilSequence)
				}
				sq.UntilSequence = &until
			} else {
				sq.AfterSequence = max(b, q.AfterSequence)
			}
			sources[i] = &timeSource{partition: p, query: sq, size: first, bound: &b}
			continue
		}
		sources[i] = &timeSource{partition: p, query: sq, size: first}
	}

	less := func(a, b rheo.Event) bool {
		order := cmp.Or(a.TS.Compare(b.TS), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Sequence, b.Sequence))
		if q.Descending {
			return order > 0
		}
		return order < 0
	}
	h := &sourceHeap{less: less}
	for _, s := range sources {
		if err := c.refill(drv, s); err != nil {
			return err
		}
		if len(s.buf) > 0 {
			h.sources = append(h.sources, s)
		}
	}
	heap.Init(h)

	var events []rheo.Event
	for len(events) < q.MaxCount && h.Len() > 0 {
		s := h.sources[0]
		ev := s.buf[0]
		s.buf = s.buf[1:]
		events = append(events, ev)
		shown := ev.Sequence
		if q.Descending {
			shown--
		}
		s.bound = &shown
		if len(s.buf) == 0 {
			if err := c.refill(drv, s); err != nil {
				return err
			}
		}
		if len(s.buf) == 0 {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return c.printPage(rheo.Page{Events: events, Cursor: timeCursor(sources, q.Descending)}, q.MaxCount)
}

// refill reads the partition's next page when it has nothing read ahead
// and may have more, doubling the page size up to maxRefill.
func (c *call) refill(drv driver.Driver, s *timeSource) error {
	if len(s.buf) > 0 || s.exhausted {
		return nil
	}
	s.query.MaxCount = s.size
	page, err := drv.Query(c.ctx, c.stream, s.query)
	if err != nil {
		return err
	}
	s.buf, s.query.After = page.Events, page.Cursor
	s.exhausted = len(page.Events) < s.size
	s.size = min(2*s.size, maxRefill)
	if s.query.Descending && s.bound == nil {
		// The walk covers the events present now: a partition's later
		// pages stay at or below its newest match, or empty.
		var top int64
		if len(page.Events) > 0 {
			top = page.Events[0].Sequence
		}
		s.bound = &top
	}
	return nil
}

// timeCursor encodes each partition's bound:
// "time:asc:0=12,3=5" (after sequence 12 in partition 0, after 5 in
// partition 3, from the start in the others) or "time:desc:0=11,1=0"
// (sequence 11 and below in partition 0, nothing in partition 1).
func timeCursor(sources []*timeSource, descending bool) string {
	dir := "asc"
	if descending {
		dir = "desc"
	}
	var parts []string
	for _, s := range sources {
		if s.bound != nil {
			parts = append(parts, fmt.Sprintf("%d=%d", s.partition, *s.bound))
		}
	}
	return timeCursorPrefix + dir + ":" + strings.Join(parts, ",")
}

// parseTimeCursor decodes a cursor of timeCursor for a query in the given
// direction over partitions; "" is the first page.
func parseTimeCursor(cursor string, descending bool, partitions []int) (map[int]int64, error) {
	bounds := map[int]int64{}
	if cursor == "" {
		return bounds, nil
	}
	rest, ok := strings.CutPrefix(cursor, timeCursorPrefix)
	if !ok {
		return nil, usagef("--after %s is not a cursor of --order time (the default); give the cursor of a page of the same order, "+
			"or --order sequence for a cursor of that order", cursor)
	}
	dir, list, ok := strings.Cut(rest, ":")
	want := map[bool]string{false: "asc", true: "desc"}[descending]
	if !ok || (dir != "asc" && dir != "desc") {
		return nil, usagef("--after %s is not a cursor of rheo query", cursor)
	}
	if dir != want {
		return nil, usagef("--after %s is the cursor of a query in the other direction; %s --desc", cursor,
			map[bool]string{true: "leave out", false: "give"}[dir == "asc"])
	}
	if list == "" {
		return bounds, nil
	}
	for entry := range strings.SplitSeq(list, ",") {
		ps, bs, ok := strings.Cut(entry, "=")
		p, perr := strconv.Atoi(ps)
		b, berr := strconv.ParseInt(bs, 10, 64)
		if !ok || perr != nil || berr != nil || b < 0 || !slices.Contains(partitions, p) {
			return nil, usagef("--after %s is not a cursor of this query (%q does not fit its partitions)", cursor, entry)
		}
		bounds[p] = b
	}
	return bounds, nil
}

// sourceHeap orders the partitions by their next event.
type sourceHeap struct {
	sources []*timeSource
	less    func(a, b rheo.Event) bool
}

func (h *sourceHeap) Len() int           { return len(h.sources) }
func (h *sourceHeap) Less(i, j int) bool { return h.less(h.sources[i].buf[0], h.sources[j].buf[0]) }
func (h *sourceHeap) Swap(i, j int)      { h.sources[i], h.sources[j] = h.sources[j], h.sources[i] }
func (h *sourceHeap) Push(x any)         { h.sources = append(h.sources, x.(*timeSource)) }
func (h *sourceHeap) Pop() any {
	s := h.sources[len(h.sources)-1]
	h.sources = h.sources[:len(h.sources)-1]
	return s
}
