package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// nulGuard refuses statements that pass a NUL character in a text
// argument, before they are sent, with the error the server gives for
// one in the extended protocol: SQLSTATE 22021, which interpretError
// reports as invalid_argument. PostgreSQL text cannot hold NUL. With the
// extended protocol (pgx's default, and the exec mode used behind
// PgBouncer) the server rejects the parameter; with the simple protocol
// (default_query_exec_mode=simple_protocol) pgx writes the value into
// the statement's text, which then ends at the NUL, and the server
// answers with a protocol violation (08P01) that reads like a lost
// connection. Checking here gives every exec mode the same answer.
type nulGuard struct {
	q querier
}

var errNUL = &pgconn.PgError{
	Severity: "ERROR",
	Code:     "22021", // character_not_in_repertoire, as the server reports it
	Message:  "a text argument contains a NUL character (0x00), which PostgreSQL text cannot hold",
}

func (g nulGuard) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if hasNUL(args) {
		return pgconn.CommandTag{}, errNUL
	}
	return g.q.Exec(ctx, sql, args...)
}

func (g nulGuard) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if hasNUL(args) {
		return nil, errNUL
	}
	return g.q.Query(ctx, sql, args...)
}

func (g nulGuard) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if hasNUL(args) {
		return errRow{}
	}
	return g.q.QueryRow(ctx, sql, args...)
}

func (g nulGuard) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	for _, qq := range b.QueuedQueries {
		if hasNUL(qq.Arguments) {
			return errBatch{}
		}
	}
	return g.q.SendBatch(ctx, b)
}

// hasNUL reports whether a text argument of the kinds the driver passes
// holds a NUL character. JSON arguments need no check: checkJSON refuses
// raw control characters, and an escaped \u0000 is the server's to
// refuse.
func hasNUL(args []any) bool {
	for _, arg := range args {
		switch v := arg.(type) {
		case string:
			if strings.IndexByte(v, 0) >= 0 {
				return true
			}
		case pgtype.Text:
			if v.Valid && strings.IndexByte(v.String, 0) >= 0 {
				return true
			}
		case []string:
			for _, s := range v {
				if strings.IndexByte(s, 0) >= 0 {
					return true
				}
			}
		case []pgtype.Text:
			for _, t := range v {
				if t.Valid && strings.IndexByte(t.String, 0) >= 0 {
					return true
				}
			}
		}
	}
	return false
}

type errRow struct{}

func (errRow) Scan(...any) error { return errNUL }

type errBatch struct{}

func (errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errNUL }
func (errBatch) Query() (pgx.Rows, error)         { return nil, errNUL }
func (errBatch) QueryRow() pgx.Row                { return errRow{} }
func (errBatch) Close() error                     { return nil }
func (errBatch) Tx() pgx.Tx                       { return nil }
