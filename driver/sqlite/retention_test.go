package sqlite_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// count returns the result of a count(*) query.
func count(t *testing.T, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.QueryRow(query, args...).Scan(&n))
	return n
}

// appendBatch appends n events at the clock to partition 0.
func appendBatch(t *testing.T, b *testBundle, d driver.Ops, stream string, n int) {
	t.Helper()
	items := make([]rheo.BatchItem, n)
	for i := range items {
		items[i] = rheo.BatchItem{Payload: payload(i)}
	}
	_, err := d.AppendBatch(b.ctx, stream, items, nil)
	require.NoError(t, err)
}

// isImmutable reports whether err is the delete guard's refusal.
func isImmutable(err error) bool {
	return err != nil && strings.Contains(err.Error(), rheo.ErrImmutableEvent.Reason)
}

func TestDeleteGuard(t *testing.T) {
	t.Run("prune and drop_stream leave no permit behind, and a plain delete still fails", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, b.path)
		require.NoError(t, d.CreateStream(b.ctx, "s", 1))
		require.NoError(t, d.CreateStream(b.ctx, "t", 1))
		require.NoError(t, d.SetRetention(b.ctx, "s", time.Hour))
		appendBatch(t, b, d, "s", 3)
		appendBatch(t, b, d, "t", 2)
		b.clock.Advance(2 * time.Hour)
		appendBatch(t, b, d, "s", 2)

		n, err := d.Prune(b.ctx, "s", nil)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		require.Zero(t, count(t, d.DB(), `SELECT count(*) FROM rheo_event_deletions`))
		_, err = d.DB().Exec(`DELETE FROM rheo_events WHERE stream = 's'`)
		require.True(t, isImmutable(err), "delete after a prune: %v", err)

		_, err = d.DropStream(b.ctx, "t", &rheo.DropOptions{Confirm: true})
		require.NoError(t, err)
		require.Zero(t, count(t, d.DB(), `SELECT count(*) FROM rheo_event_deletions`))
		_, err = d.DB().Exec(`DELETE FROM rheo_events WHERE stream = 's' AND sequence = 5`)
		require.True(t, isImmutable(err), "delete after a drop: %v", err)
		require.Equal(t, int64(2), count(t, d.DB(), `SELECT count(*) FROM rheo_events WHERE stream = 's'`))
	})

	t.Run("a prune in a host transaction leaves the transaction unable to delete", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, b.path)
		require.NoError(t, d.CreateStream(b.ctx, "s", 1))
		require.NoError(t, d.SetRetention(b.ctx, "s", time.Hour))
		appendBatch(t, b, d, "s", 4)
		b.clock.Advance(2 * time.Hour)
		appendBatch(t, b, d, "s", 1)

		tx, err := d.DB().BeginTx(b.ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		n, err := d.WithTx(tx).Prune(b.ctx, "s", &rheo.PruneOptions{MaxCount: 2})
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		_, err = tx.Exec(`DELETE FROM rheo_events WHERE stream = 's'`)
		require.True(t, isImmutable(err), "a delete after the prune, in its transaction: %v", err)
		require.NoError(t, tx.Commit())
		require.Equal(t, int64(3), count(t, d.DB(), `SELECT count(*) FROM rheo_events WHERE stream = 's'`))
	})

	t.Run("a failed prune rolls its permit back", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, b.path)
		require.NoError(t, d.CreateStream(b.ctx, "s", 1))
		require.NoError(t, d.SetRetention(b.ctx, "s", time.Hour))
		appendBatch(t, b, d, "s", 2)
		b.clock.Advance(2 * time.Hour)
		// A trigger of the host's that fails the prune while its permit is
		// written.
		_, err := d.DB().Exec(`CREATE TRIGGER fail_delete AFTER DELETE ON rheo_events
			BEGIN SELECT RAISE(ABORT, 'no'); END`)
		require.NoError(t, err)
		_, err = d.Prune(b.ctx, "s", nil)
		require.Error(t, err)
		require.Zero(t, count(t, d.DB(), `SELECT count(*) FROM rheo_event_deletions`))
		require.Equal(t, int64(2), count(t, d.DB(), `SELECT count(*) FROM rheo_events WHERE stream = 's'`))
	})
}

func TestPruneTimeMarks(t *testing.T) {
	t.Run("prune and drop_stream delete the time marks of the events they delete", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		require.NoError(t, d.CreateStream(b.ctx, "s", 1))
		require.NoError(t, d.SetRetention(b.ctx, "s", time.Hour))
		appendBatch(t, b, d, "s", 3000) // marks at 1024 and 2048
		b.clock.Advance(2 * time.Hour)
		appendBatch(t, b, d, "s", 100)
		marks := func() int64 {
			return count(t, d.DB(), `SELECT count(*) FROM rheo_time_marks WHERE stream = 's'`)
		}
		require.Equal(t, int64(3), marks(), "1024, 2048 and 3072")

		n, err := d.Prune(b.ctx, "s", &rheo.PruneOptions{MaxCount: 2048})
		require.NoError(t, err)
		require.Equal(t, int64(2048), n)
		require.Equal(t, int64(1), marks(), "the marks up to the last pruned sequence are gone")
		n, err = d.Prune(b.ctx, "s", &rheo.PruneOptions{MaxCount: 2048})
		require.NoError(t, err)
		require.Equal(t, int64(952), n)
		require.Equal(t, int64(1), marks(), "3072 summarises events still retained")

		_, err = d.DropStream(b.ctx, "s", &rheo.DropOptions{Confirm: true})
		require.NoError(t, err)
		require.Zero(t, marks())
		require.Zero(t, count(t, d.DB(), `SELECT count(*) FROM rheo_partitions WHERE stream = 's'`))
	})
}

func TestRetentionStorage(t *testing.T) {
	t.Run("the retention is stored in microseconds and NULL without one", func(t *testing.T) {
		b := setup(t)
		d := b.open(t, ":memory:")
		require.NoError(t, d.CreateStream(b.ctx, "s", 1))
		maxAge := func() sql.NullInt64 {
			var v sql.NullInt64
			require.NoError(t, d.DB().QueryRow(`SELECT max_age FROM rheo_streams WHERE stream = 's'`).Scan(&v))
			return v
		}
		require.False(t, maxAge().Valid)
		require.NoError(t, d.SetRetention(b.ctx, "s", 90*time.Minute))
		require.Equal(t, sql.NullInt64{Int64: (90 * time.Minute).Microseconds(), Valid: true}, maxAge())
		require.NoError(t, d.SetRetention(b.ctx, "s", 0))
		require.False(t, maxAge().Valid)
		_, err := d.DB().Exec(`UPDATE rheo_streams SET max_age = 0 WHERE stream = 's'`)
		require.Error(t, err, "the column refuses an age that is not positive")
	})
}

// TestFetchCursorBelowLowWatermark fetches a group whose cursor lies
// below the low watermark (an edit by hand: SQLite's transactions leave
// no race that could place it there): the fetch reads from the low
// watermark, and the next one goes on from the first, as on PostgreSQL.
func TestFetchCursorBelowLowWatermark(t *testing.T) {
	b := setup(t)
	d := b.open(t, b.path)
	require.NoError(t, d.CreateStream(b.ctx, "s", 1))
	require.NoError(t, d.SetRetention(b.ctx, "s", time.Hour))
	appendBatch(t, b, d, "s", 10)
	b.clock.Advance(2 * time.Hour)
	appendBatch(t, b, d, "s", 10)
	n, err := d.Prune(b.ctx, "s", nil)
	require.NoError(t, err)
	require.Equal(t, int64(10), n)
	require.NoError(t, d.CreateGroup(b.ctx, "s", "g", nil))
	_, err = d.DB().Exec(`UPDATE rheo_cursors SET next_sequence = 4`)
	require.NoError(t, err)

	var got []int64
	for range 2 {
		leases, err := d.Fetch(b.ctx, "s", "g", &rheo.FetchOptions{MaxCount: 5})
		require.NoError(t, err, "fetch after %v", got)
		for _, l := range leases {
			got = append(got, l.Event.Sequence)
		}
	}
	require.Equal(t, []int64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, got)
}
