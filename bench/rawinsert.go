package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// rawTable is the table of the raw insert ceiling: the columns, indexes
// and constraints of rheo.events (a generated column included), without
// Rheo's functions, triggers or notifications.
const rawTable = "public.raw_events"

// rawInsert creates rawTable in the database and inserts into it the rows
// that appendEvents stores: n events from producers goroutines, each
// writing its own partition of one stream in statements of batch rows,
// with the same payloads, generated time-ordered ids (UUIDv7 text, made
// here as a client would), no key, empty metadata and the server's time.
// Each statement is one INSERT … SELECT over arrays sent as parameters; the
// sequences are counted by the producer that owns the partition. It
// returns the time from the first statement to the last.
func (s *rheoSystem) rawInsert(ctx context.Context, n, batch, producers int) (time.Duration, error) {
	if _, err := s.db.pool.Exec(ctx, "CREATE TABLE "+rawTable+" (LIKE rheo.events INCLUDING ALL)"); err != nil {
		return 0, err
	}
	stream := randomName("bench")
	next := make([]int64, producers) // per partition, the last sequence inserted
	start := time.Now()
	err := runProducers(ctx, n, producers, batch, func(ctx context.Context, producer int, first, count int) error {
		ids := make([]string, count)
		payloads := make([]string, count)
		for i := range count {
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			ids[i], payloads[i] = id.String(), string(benchPayload(first+i))
		}
		tag, err := s.db.pool.Exec(ctx, `INSERT INTO `+rawTable+` (stream, "partition", sequence, id, key, payload, metadata, ts)
			SELECT $1, $2, $3::bigint + u.ord, u.id, NULL, u.payload, '{}', now()
			  FROM unnest($4::text[], $5::jsonb[]) WITH ORDINALITY AS u(id, payload, ord)`,
			stream, producer, next[producer], ids, payloads)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != int64(count) {
			return fmt.Errorf("raw insert of %d rows stored %d", count, tag.RowsAffected())
		}
		next[producer] += int64(count)
		return nil
	})
	return time.Since(start), err
}
