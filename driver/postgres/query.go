package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
)

var (
	_ driver.Querier = (*Driver)(nil)
	_ driver.Querier = (*Tx)(nil)
)

// Query returns one page of the events of stream that q selects, with the
// cursor of the next page: one call of rheo.query_page, so the events and
// the cursor come from one snapshot.
func (o *ops) Query(ctx context.Context, stream string, q rheo.Query) (rheo.Page, error) {
	for _, f := range []struct {
		name    string
		pattern json.RawMessage
	}{{"payload filter", q.Payload}, {"metadata filter", q.Metadata}} {
		if f.pattern == nil {
			continue
		}
		if err := checkJSON(f.name, f.pattern); err != nil {
			return rheo.Page{}, err
		}
	}
	filter, err := q.Filter()
	if err != nil {
		return rheo.Page{}, err
	}
	maxCount := driverutil.WithDefaults(&q).MaxCount
	page := rheo.Page{Events: []rheo.Event{}}
	err = o.run(ctx, "query", false, func(qr querier) error {
		// The LEFT JOIN keeps one row, without an event, for an empty page.
		rows, err := qr.Query(ctx, `SELECT p.next_cursor, `+eventColumns+`
			FROM rheo.query_page(stream => $1, filter => $2, max_count => $3, after => $4, descending => $5) AS p
			LEFT JOIN LATERAL unnest(p.events) WITH ORDINALITY AS e ON true
			ORDER BY e.ordinality`,
			stream, filter, clampInt32(maxCount), textArg(q.After), q.Descending)
		if err != nil {
			return err
		}
		var (
			cursor, evStream, id, key, typ *string
			partition                      *int
			sequence                       *int64
			payload, metadata              []byte
			ts                             *time.Time
		)
		_, err = pgx.ForEachRow(rows, []any{&cursor, &evStream, &partition, &sequence, &id, &key, &typ, &payload, &metadata, &ts},
			func() error {
				page.Cursor = deref(cursor)
				if evStream == nil {
					return nil
				}
				page.Events = append(page.Events, rheo.Event{
					Stream: *evStream, Partition: *partition, Sequence: *sequence, ID: *id,
					Key: deref(key), Type: deref(typ), Payload: payload, Metadata: metadata, TS: *ts,
				})
				return nil
			})
		return err
	})
	if err != nil {
		return rheo.Page{}, err
	}
	return page, nil
}
