package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

const eventColumns = `e.stream, e."partition", e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts`

// appendedColumns are eventColumns but the stream, for scanAppended.
const appendedColumns = `e."partition", e.sequence, e.id, e.key, e.type, e.payload, e.metadata, e.ts`

// scanAppended reads a row of appendedColumns as an event of stream.
// Like scanEvent, but the nullable text columns go through pgtype.Text,
// which pgx fills without allocating a pointer per row (a batch of 1000
// returns 1000 rows).
func scanAppended(row pgx.CollectableRow, stream string) (rheo.Event, error) {
	ev := rheo.Event{Stream: stream}
	var key, typ pgtype.Text
	err := row.Scan(&ev.Partition, &ev.Sequence, &ev.ID, &key, &typ,
		(*[]byte)(&ev.Payload), (*[]byte)(&ev.Metadata), &ev.TS)
	ev.Key, ev.Type = key.String, typ.String
	return ev, err
}

// Append adds one event. opts may be nil.
func (o *ops) Append(ctx context.Context, stream string, payload json.RawMessage, opts *rheo.AppendOptions) (rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendOptions{}
	}
	if err := checkJSON("payload", payload); err != nil {
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
	clock, err := o.clockArg()
	if err != nil {
		return rheo.Event{}, err
	}
	var partition *int32
	if opts.Partition != nil {
		p := clampInt32(*opts.Partition)
		partition = &p
	}
	var ev rheo.Event
	err = o.run(ctx, "append", true, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM rheo.append(stream => $1, payload => $2,
			key => $3, "partition" => $4, id => $5, metadata => $6, ts => $7, clock => $8) AS e`,
			stream, payload, textArg(opts.Key), partition, textArg(opts.ID), metadata, opts.TS, clock)
		if err != nil {
			return err
		}
		ev, err = pgx.CollectExactlyOneRow(rows, scanEvent)
		return err
	})
	return ev, err
}

// AppendBatch adds events atomically; the result keeps input order.
// opts may be nil.
func (o *ops) AppendBatch(ctx context.Context, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error) {
	if opts == nil {
		opts = &rheo.AppendBatchOptions{}
	}
	metadata, err := metadataArg(opts.Metadata)
	if err != nil {
		return nil, err
	}
	payloads := []byte{'['}
	var keys, ids []pgtype.Text
	for i, item := range items {
		if err := checkJSON("payload", item.Payload); err != nil {
			return nil, err
		}
		if i > 0 {
			payloads = append(payloads, ',')
		}
		payloads = append(payloads, item.Payload...)
		if item.Key != "" && keys == nil {
			keys = make([]pgtype.Text, len(items))
		}
		if item.ID != "" && ids == nil {
			ids = make([]pgtype.Text, len(items))
		}
	}
	payloads = append(payloads, ']')
	// keys and ids stay NULL unless some item has one; empty ones are
	// NULL elements.
	for i, item := range items {
		if keys != nil {
			keys[i] = textArg(item.Key)
		}
		if ids != nil {
			ids[i] = textArg(item.ID)
		}
	}
	var partition *int32
	if opts.Partition != nil {
		p := clampInt32(*opts.Partition)
		partition = &p
	}
	clock, err := o.clockArg()
	if err != nil {
		return nil, err
	}
	var events []rheo.Event
	err = o.run(ctx, "append_batch", true, func(q querier) error {
		// rheo.append_batch returns the events in input order, and a scan of
		// a function's result keeps the order the function returned its rows
		// in; an ORDER BY on WITH ORDINALITY would sort them again.
		// The stream column is left out: every row holds the stream named.
		rows, err := q.Query(ctx, `SELECT `+appendedColumns+` FROM rheo.append_batch(stream => $1, payloads => $2,
			keys => $3, ids => $4, "partition" => $5, metadata => $6, clock => $7) AS e`,
			stream, json.RawMessage(payloads), keys, ids, partition, metadata, clock)
		if err != nil {
			return err
		}
		events, err = pgx.AppendRows(make([]rheo.Event, 0, len(items)), rows, func(row pgx.CollectableRow) (rheo.Event, error) {
			return scanAppended(row, stream)
		})
		return err
	})
	return events, err
}

// Read returns a page of one partition in sequence order. opts may be nil.
func (o *ops) Read(ctx context.Context, stream string, opts *rheo.ReadOptions) ([]rheo.Event, error) {
	opts = driverutil.WithDefaults(opts)
	maxCount := opts.MaxCount
	var events []rheo.Event
	err := o.run(ctx, "read", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM rheo.read(stream => $1, after => $2,
			max_count => $3, "partition" => $4) AS e`,
			stream, opts.After, clampInt32(maxCount), clampInt32(opts.Partition))
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, scanEvent)
		return err
	})
	return events, err
}
