package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/migrate"
)

// interpretError reads the result codes of both SQLite drivers: mattn's
// sqlite3.Error (primary code in a field) and modernc's *sqlite.Error
// (extended code from a method, message "errstr: errmsg (code)"). The
// modernc driver is registered by drivers_test.go.
func TestInterpretError(t *testing.T) {
	for _, drv := range []struct{ label, name, noWait string }{
		{"mattn", DriverMattn, "?_busy_timeout=0"},
		{"modernc", DriverModernc, "?_pragma=busy_timeout(0)"},
	} {
		name := drv.name
		t.Run(drv.label, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "rheo.db")
			b, err := registered(name)
			require.NoError(t, err)
			db, err := sql.Open(name, b.dsn(path))
			require.NoError(t, err)
			defer db.Close()
			require.NoError(t, migrate.SQLite(ctx, db))

			t.Run("a write to an event is immutable_event", func(t *testing.T) {
				_, err := db.ExecContext(ctx, `INSERT INTO rheo_streams (stream, partition_count, created_at) VALUES ('s', 1, 0)`)
				require.NoError(t, err)
				_, err = db.ExecContext(ctx, `INSERT INTO rheo_events (stream, "partition", sequence, id, payload, metadata, ts)
					VALUES ('s', 0, 1, 'e1', '{}', '{}', 0)`)
				require.NoError(t, err)
				_, err = db.ExecContext(ctx, `UPDATE rheo_events SET payload = '{"x": 1}'`)
				require.ErrorIs(t, interpretError("op", err), rheo.ErrImmutableEvent)
			})

			t.Run("another constraint is a definite failure", func(t *testing.T) {
				_, err := db.ExecContext(ctx, `INSERT INTO rheo_streams (stream, partition_count, created_at) VALUES ('s', 1, 0)`)
				got := interpretError("op", err)
				require.ErrorIs(t, got, rheo.ErrFailed)
				require.NotErrorIs(t, got, rheo.ErrImmutableEvent)
			})

			t.Run("a busy database is backend_unavailable and a lost write lock", func(t *testing.T) {
				holder, err := db.Conn(ctx)
				require.NoError(t, err)
				defer holder.Close()
				_, err = holder.ExecContext(ctx, `BEGIN IMMEDIATE`)
				require.NoError(t, err)
				defer holder.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)

				other, err := sql.Open(name, path+drv.noWait)
				require.NoError(t, err)
				defer other.Close()
				_, err = other.ExecContext(ctx, `CREATE TABLE t (x)`)
				got := interpretError("op", err)
				require.ErrorIs(t, got, rheo.ErrBackendUnavailable)
				require.Equal(t, rheo.KindLockTimeout, rheo.KindOf(got))
				require.Equal(t, "database is locked", rheo.MessageOf(got), "SQLite's words, without modernc's codes")
				require.True(t, lostWriteLock(err))
			})

			t.Run("a missing table is schema_missing", func(t *testing.T) {
				_, err := db.ExecContext(ctx, `SELECT * FROM rheo_no_such_table`)
				got := interpretError("op", err)
				require.ErrorIs(t, got, rheo.ErrFailed)
				require.Equal(t, rheo.KindSchemaMissing, rheo.KindOf(got))
				require.Equal(t, "no such table: rheo_no_such_table", rheo.MessageOf(got))
			})

			t.Run("a write to a read-only database is read_only", func(t *testing.T) {
				ro, err := sql.Open(name, "file:"+path+"?mode=ro")
				require.NoError(t, err)
				defer ro.Close()
				_, err = ro.ExecContext(ctx, `INSERT INTO rheo_streams (stream, partition_count, created_at) VALUES ('r', 1, 0)`)
				got := interpretError("op", err)
				require.ErrorIs(t, got, rheo.ErrFailed)
				require.Equal(t, rheo.KindReadOnly, rheo.KindOf(got))
			})

			t.Run("a cancelled context is canceled", func(t *testing.T) {
				cancelled, cancel := context.WithCancel(ctx)
				cancel()
				_, err := db.ExecContext(cancelled, `SELECT 1`)
				got := interpretError("op", err)
				require.ErrorIs(t, got, rheo.ErrFailed)
				require.Equal(t, rheo.KindCanceled, rheo.KindOf(got))
			})
		})
	}
}
