package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// sqlQuerier runs the operations in a database/sql transaction of the
// caller's, on any PostgreSQL driver of database/sql (pgx's stdlib,
// lib/pq): the arguments become values every such driver sends (JSON and
// arrays as their text), and each statement runs under a savepoint, which
// database/sql sends in a round trip of its own, since it cannot send two
// statements with arguments in one.
type sqlQuerier struct {
	tx *sql.Tx
	// open is set while a savepoint is neither released nor rolled back.
	open bool
}

func (s *sqlQuerier) begin(ctx context.Context) error {
	if _, err := s.tx.ExecContext(ctx, savepointSQL); err != nil {
		return sqlError(err)
	}
	s.open = true
	return nil
}

func (s *sqlQuerier) release(ctx context.Context) error {
	if _, err := s.tx.ExecContext(ctx, releaseSQL); err != nil {
		return sqlError(err)
	}
	s.open = false
	return nil
}

// restore rolls back to the savepoint of a statement that failed, so that
// the caller's transaction stays usable.
func (s *sqlQuerier) restore(ctx context.Context) {
	if !s.open {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if _, err := s.tx.ExecContext(ctx, rollbackSavepointSQL); err == nil {
		_, _ = s.tx.ExecContext(ctx, releaseSQL)
	}
	s.open = false
}

func (s *sqlQuerier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := s.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	if _, err := s.tx.ExecContext(ctx, sql, sqlArgs(args)...); err != nil {
		return pgconn.CommandTag{}, sqlError(err)
	}
	return pgconn.CommandTag{}, s.release(ctx)
}

func (s *sqlQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	rows, err := s.tx.QueryContext(ctx, sql, sqlArgs(args)...)
	if err != nil {
		return nil, sqlError(err)
	}
	return &sqlRows{rows: rows, q: s, ctx: ctx}, nil
}

func (s *sqlQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return sqlRow{q: s, ctx: ctx, sql: sql, args: args}
}

// SendBatch runs b's statements one after the other, as its results are
// read.
func (s *sqlQuerier) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return &sqlBatch{q: s, ctx: ctx, queued: b.QueuedQueries}
}

// sqlRow is the row of a QueryRow, run when it is scanned.
type sqlRow struct {
	q    *sqlQuerier
	ctx  context.Context
	sql  string
	args []any
}

func (r sqlRow) Scan(dest ...any) error {
	rows, err := r.q.Query(r.ctx, r.sql, r.args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// sqlRows is a *sql.Rows as the pgx.Rows the operations read; closing it
// releases the savepoint.
type sqlRows struct {
	rows *sql.Rows
	q    *sqlQuerier
	ctx  context.Context
	err  error
	done bool
}

func (r *sqlRows) Close() {
	if r.done {
		return
	}
	r.done = true
	if err := r.rows.Close(); err != nil && r.err == nil {
		r.err = sqlError(err)
	}
	if err := r.rows.Err(); err != nil && r.err == nil {
		r.err = sqlError(err)
	}
	if r.err == nil {
		r.err = r.q.release(r.ctx)
	}
}

func (r *sqlRows) Err() error {
	if r.err != nil {
		return r.err
	}
	if err := r.rows.Err(); err != nil {
		return sqlError(err)
	}
	return nil
}

func (r *sqlRows) Next() bool {
	if r.done || r.err != nil {
		return false
	}
	if r.rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *sqlRows) Scan(dest ...any) error {
	wrapped := make([]any, len(dest))
	for i, d := range dest {
		wrapped[i] = d
		if sc, ok := d.(sql.Scanner); ok {
			wrapped[i] = textScanner{sc}
		}
	}
	if err := r.rows.Scan(wrapped...); err != nil {
		r.err = err
		return err
	}
	return nil
}

func (r *sqlRows) Values() ([]any, error) {
	cols, err := r.rows.Columns()
	if err != nil {
		return nil, err
	}
	values := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range values {
		ptrs[i] = &values[i]
	}
	return values, r.rows.Scan(ptrs...)
}

func (r *sqlRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r *sqlRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r *sqlRows) RawValues() [][]byte                          { return nil }
func (r *sqlRows) Conn() *pgx.Conn                              { return nil }
func (r *sqlRows) TypeMap() *pgtype.Map                         { return nil }

// textScanner hands a value's text to a pgtype scanner (pgtype.UUID,
// pgtype.Interval) as a string, which it reads, where lib/pq gives bytes.
type textScanner struct{ sql.Scanner }

func (t textScanner) Scan(src any) error {
	if b, ok := src.([]byte); ok {
		return t.Scanner.Scan(string(b))
	}
	return t.Scanner.Scan(src)
}

// sqlBatch runs a batch's statements in turn.
type sqlBatch struct {
	q      *sqlQuerier
	ctx    context.Context
	queued []*pgx.QueuedQuery
}

func (b *sqlBatch) next() (*pgx.QueuedQuery, error) {
	if len(b.queued) == 0 {
		return nil, errors.New("batch: no more results")
	}
	qq := b.queued[0]
	b.queued = b.queued[1:]
	return qq, nil
}

func (b *sqlBatch) Exec() (pgconn.CommandTag, error) {
	qq, err := b.next()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return b.q.Exec(b.ctx, qq.SQL, qq.Arguments...)
}

func (b *sqlBatch) Query() (pgx.Rows, error) {
	qq, err := b.next()
	if err != nil {
		return nil, err
	}
	return b.q.Query(b.ctx, qq.SQL, qq.Arguments...)
}

func (b *sqlBatch) QueryRow() pgx.Row {
	qq, err := b.next()
	if err != nil {
		return failedRow{err: err}
	}
	return b.q.QueryRow(b.ctx, qq.SQL, qq.Arguments...)
}

func (b *sqlBatch) Close() error {
	for len(b.queued) > 0 {
		if _, err := b.Exec(); err != nil {
			return err
		}
	}
	return nil
}

func (b *sqlBatch) Tx() pgx.Tx { return nil }

// sqlArgs converts the arguments the operations pass pgx into values any
// database/sql driver of PostgreSQL sends: JSON as text (a []byte would
// go as bytea), and arrays as PostgreSQL array literals, which the server
// reads as the function's array type.
func sqlArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = sqlArg(a)
	}
	return out
}

func sqlArg(a any) any {
	switch v := a.(type) {
	case nil:
		return nil
	case json.RawMessage:
		if v == nil {
			return nil
		}
		return string(v)
	case driver.Valuer:
		return v
	}
	rv := reflect.ValueOf(a)
	if rv.Kind() != reflect.Slice || rv.Type().Elem().Kind() == reflect.Uint8 {
		return a
	}
	if rv.IsNil() {
		return nil
	}
	elems := make([]string, rv.Len())
	for i := range elems {
		elems[i] = arrayElem(rv.Index(i).Interface())
	}
	return "{" + strings.Join(elems, ",") + "}"
}

// arrayElem is one element of an array literal: a number as it is, text
// (and a value's text, such as a UUID's) quoted.
func arrayElem(e any) string {
	switch v := e.(type) {
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case driver.Valuer:
		val, err := v.Value()
		if err != nil || val == nil {
			return "NULL"
		}
		e = val
	}
	s, _ := e.(string)
	if s == "" {
		if str, ok := e.(interface{ String() string }); ok {
			s = str.String()
		}
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// sqlError makes a database/sql driver's server error a *pgconn.PgError,
// which the driver's classification reads: pgx's stdlib returns one
// already; lib/pq's *pq.Error carries the same fields (Code, Message,
// Detail, …), read here by name so that this package does not depend on
// lib/pq. database/sql's own errors go through as they are.
func sqlError(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return err
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := e.(interface{ SQLState() string }); !ok {
			continue
		}
		v := reflect.Indirect(reflect.ValueOf(e))
		if v.Kind() != reflect.Struct {
			continue
		}
		field := func(name string) string {
			f := v.FieldByName(name)
			if !f.IsValid() || f.Kind() != reflect.String {
				return ""
			}
			return f.String()
		}
		return &pgconn.PgError{Severity: field("Severity"), Code: e.(interface{ SQLState() string }).SQLState(),
			Message: field("Message"), Detail: field("Detail"), Hint: field("Hint"),
			SchemaName: field("Schema"), TableName: field("Table"), ColumnName: field("Column"),
			ConstraintName: field("Constraint"), Where: field("Where"), Routine: field("Routine")}
	}
	if errors.Is(err, sql.ErrTxDone) {
		return pgx.ErrTxClosed
	}
	return err
}
