package driver

import (
	"context"
	"iter"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// Querier searches a stream's history; it is part of Ops.
type Querier interface {
	// Query returns one page of the events of stream that q selects, in
	// q's order, with the cursor of the next page. Errors: stream_not_found;
	// invalid_argument for a negative MaxCount or a malformed filter or
	// cursor; invalid_partition for a partition out of range;
	// cursor_not_found for a cursor issued for another stream, filter or
	// direction.
	Query(ctx context.Context, stream string, q rheo.Query) (rheo.Page, error)
}

// QueryAll returns every event of stream that query selects, starting
// after query.After, reading pages of query.MaxCount events (defaults to
// 100) only as the loop asks for more. It stops after the first page
// shorter than that: ascending, the events matching when that page was
// read; descending, the events present at the first page. An error is
// yielded once, as the last element.
func QueryAll(ctx context.Context, q Querier, stream string, query rheo.Query) iter.Seq2[rheo.Event, error] {
	size := pageSize(query)
	query.MaxCount = size
	return func(yield func(rheo.Event, error) bool) {
		for {
			page, err := q.Query(ctx, stream, query)
			if err != nil {
				yield(rheo.Event{}, err)
				return
			}
			for _, ev := range page.Events {
				if !yield(ev, nil) {
					return
				}
			}
			if len(page.Events) < size {
				return
			}
			query.After = page.Cursor
		}
	}
}

// ReplayQuery makes every event that query selects claimable again for
// group, as Replay with EventIDs does: events the group acked or
// dead-lettered are reopened at attempt 1, while events not offered yet,
// leased or waiting for a retry are left as they are. It walks the query
// in pages of query.MaxCount (defaults to 100), one Replay per page, and
// returns how many events were reopened.
//
// Each page is its own replay: run it in a transaction (Transactor.InTx)
// for all or nothing. The stream and group are checked before the query,
// so a missing group is group_not_found whatever the query.
func ReplayQuery(ctx context.Context, d Ops, stream, group string, query rheo.Query) (int64, error) {
	if _, err := d.Replay(ctx, stream, group, &rheo.ReplayOptions{EventIDs: []string{}}); err != nil {
		return 0, err
	}
	query.MaxCount = pageSize(query)
	var total int64
	ids := make([]string, 0, query.MaxCount)
	reopen := func() error {
		n, err := d.Replay(ctx, stream, group, &rheo.ReplayOptions{EventIDs: ids})
		total += n
		ids = ids[:0]
		return err
	}
	for ev, err := range QueryAll(ctx, d, stream, query) {
		if err != nil {
			return total, err
		}
		ids = append(ids, ev.ID)
		if len(ids) == query.MaxCount {
			if err := reopen(); err != nil {
				return total, err
			}
		}
	}
	if len(ids) > 0 {
		if err := reopen(); err != nil {
			return total, err
		}
	}
	return total, nil
}

// pageSize is the page size of query: its MaxCount, DefaultQueryCount
// when 0.
func pageSize(query rheo.Query) int { return driverutil.WithDefaults(&query).MaxCount }
