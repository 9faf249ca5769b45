package tests

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

// TestQueryPageLimit asks rheo.query_page and rheo.query for pages of
// events that add up to more than the 64 MB a page may hold: each is
// invalid_argument with the page's count and size, rather than the raw
// 54000 PostgreSQL gives for a value over 1 GB once the events add up to
// that; smaller pages of the same events are returned, and so is a page
// of one event, whatever its size.
func TestQueryPageLimit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes and reads some 80 MB of events")
	}
	ctx, cancel := context.WithTimeout(context.Background(), concTimeout)
	defer cancel()
	pool := concPool(t, 2)
	defer pool.Close()
	concExec(ctx, t, pool, `SELECT rheo.create_stream('big')`)
	concExec(ctx, t, pool, `SELECT rheo.append('big', '{"small": true}')`)
	// Random hex, which compresses little, repeated at a distance beyond
	// the compressor's window: some 77 MB as stored.
	concExec(ctx, t, pool, `SELECT rheo.append('big', jsonb_build_object('x', repeat(
		(SELECT string_agg(md5(random()::text || i), '') FROM generate_series(1, 400000) i), 6)))`)
	stored := concCount(ctx, t, pool, `SELECT sum(pg_column_size(e.*)) FROM rheo.events e WHERE stream = 'big'`)
	require.Greater(t, stored, int64(64<<20), "the events hold %d bytes, not more than 64 MB", stored)

	for _, sql := range []string{
		`SELECT cardinality(events) FROM rheo.query_page('big', max_count => 100)`,
		`SELECT count(*) FROM rheo.query('big', max_count => 2)`,
		`SELECT cardinality(events) FROM rheo.query_page('big', max_count => 2, descending => true)`,
	} {
		_, err := pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		assert.True(t, errors.As(err, &pgErr) && pgErr.Code == rheo.ErrInvalidArgument.Code &&
			strings.Contains(pgErr.Detail, "a page of 2 events would hold") &&
			strings.Contains(pgErr.Detail, "more than the 67108864 (64 MB) a page may"),
			"%s over events of %d bytes: %v, want invalid_argument", sql, stored, err)
	}
	for _, descending := range []bool{false, true} {
		n := concCount(ctx, t, pool, `SELECT cardinality(events) FROM rheo.query_page('big', max_count => 1, descending => $1)`,
			descending)
		assert.Equal(t, int64(1), n, "a page of one event (descending: %v) returned %d events", descending, n)
	}
}
