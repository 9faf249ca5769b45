package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The savepoint every operation in a caller's transaction runs under.
const (
	savepointSQL         = `SAVEPOINT rheo_call`
	releaseSQL           = `RELEASE SAVEPOINT rheo_call`
	rollbackSavepointSQL = `ROLLBACK TO SAVEPOINT rheo_call`
)

// savepointQuerier runs each statement in the caller's transaction tx
// under a savepoint, sent with it in one round trip: SAVEPOINT, the
// statement, RELEASE. A statement that fails aborts the subtransaction
// only (the server skips the RELEASE), and restore then rolls back to the
// savepoint, so that the caller's transaction stays usable, with its own
// writes, as on SQLite: one failed idempotent append does not cost the
// caller the order it inserted before it.
type savepointQuerier struct {
	tx pgx.Tx
	// sent is set once a savepoint was sent.
	sent bool
}

func (s *savepointQuerier) batch(sql string, args []any) *pgx.Batch {
	s.sent = true
	b := &pgx.Batch{}
	b.Queue(savepointSQL)
	b.Queue(sql, args...)
	b.Queue(releaseSQL)
	return b
}

func (s *savepointQuerier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br := s.tx.SendBatch(ctx, s.batch(sql, args))
	tag, err := br.Exec()
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (s *savepointQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br := s.tx.SendBatch(ctx, s.batch(sql, args))
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &savepointRows{Rows: rows, br: br}, nil
}

func (s *savepointQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return savepointRow{br: s.tx.SendBatch(ctx, s.batch(sql, args))}
}

// SendBatch sends b's statements between SAVEPOINT and RELEASE, in one
// round trip; the results are b's.
func (s *savepointQuerier) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	s.sent = true
	wrapped := &pgx.Batch{}
	wrapped.Queue(savepointSQL)
	wrapped.QueuedQueries = append(wrapped.QueuedQueries, b.QueuedQueries...)
	wrapped.Queue(releaseSQL)
	br := s.tx.SendBatch(ctx, wrapped)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return failedBatch{err: err}
	}
	return br
}

// restore rolls the caller's transaction back to the savepoint after a
// statement failed in it, when the transaction is aborted and its
// connection still open. A restore that fails leaves the transaction
// aborted, as the statement alone would have.
func (s *savepointQuerier) restore(ctx context.Context) {
	conn := s.tx.Conn()
	if !s.sent || conn == nil || conn.IsClosed() || conn.PgConn().TxStatus() != 'E' {
		return
	}
	// In the simple protocol, which an aborted transaction takes: pgx
	// would prepare the statements of a batch first, which it refuses.
	_, _ = conn.PgConn().Exec(context.WithoutCancel(ctx), rollbackSavepointSQL+"; "+releaseSQL).ReadAll()
}

// savepointRows reads the RELEASE that follows the rows when they are
// closed.
type savepointRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r *savepointRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		_ = r.br.Close()
		r.br = nil
	}
}

// savepointRow scans the statement's row, between the results of the
// SAVEPOINT and the RELEASE.
type savepointRow struct {
	br pgx.BatchResults
}

func (r savepointRow) Scan(dest ...any) error {
	_, err := r.br.Exec()
	if err == nil {
		err = r.br.QueryRow().Scan(dest...)
	}
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// failedBatch is the results of a batch whose SAVEPOINT failed: every
// result is that error.
type failedBatch struct{ err error }

func (b failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b failedBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b failedBatch) QueryRow() pgx.Row                { return failedRow(b) }
func (b failedBatch) Close() error                     { return b.err }
func (b failedBatch) Tx() pgx.Tx                       { return nil }

// failedRow is a row whose scan fails with err.
type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }
