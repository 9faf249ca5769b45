package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
	"github.com/rheo-go/rheo/retention"
)

// querier is what a pooled connection and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ops runs each operation as one call of its SQL function, on a
// connection of pool or, when tx is set, in tx.
type ops struct {
	pool   *pgxpool.Pool
	tx     pgx.Tx
	sqlTx  *sql.Tx // a database/sql transaction of the caller's (WithSQLTx)
	clock  driver.Clock
	vacuum *retention.Vacuumer // nil when turned off
}

// run calls fn with a querier and translates its error. write marks
// operations that change state: on the pool each commits on its own, and
// an answer lost after it was sent leaves it ambiguous; in a transaction
// it cannot commit once it failed.
func (o *ops) run(ctx context.Context, op string, write bool, fn func(q querier) error) error {
	if o.sqlTx != nil {
		e := reads
		if write {
			e = writesInTx
		}
		sq := &sqlQuerier{tx: o.sqlTx}
		err := fn(nulGuard{sq})
		if err != nil {
			sq.restore(ctx)
		}
		return interpretError(op, e, sqlError(err))
	}
	if o.tx != nil {
		if conn := o.tx.Conn(); conn != nil && conn.IsClosed() {
			// An earlier failure closed the transaction's connection;
			// pgx would report it as ErrConnClosed, which proves nothing.
			return unavailable(op, errConnLost)
		}
		e := reads
		if write {
			e = writesInTx
		}
		sq := &savepointQuerier{tx: o.tx}
		err := fn(nulGuard{sq})
		if err != nil {
			sq.restore(ctx)
		}
		return interpretError(op, e, err)
	}
	// Acquiring first keeps a wait for a free connection apart from a
	// statement in flight: only the latter can be ambiguous.
	conn, err := o.pool.Acquire(ctx)
	if err != nil {
		return interpretError(op, reads, err)
	}
	defer conn.Release()
	e := reads
	if write {
		e = commits
	}
	return interpretError(op, e, fn(nulGuard{conn}))
}

// runReadCommitted runs one statement of the functions that refuse any
// isolation level but READ COMMITTED (reference §1.6), scanning its row
// into dest when dest is given. Outside the caller's transaction it sends
// BEGIN ISOLATION LEVEL READ COMMITTED, the statement and COMMIT in one
// round trip, so that a connection whose default_transaction_isolation
// is another level still runs them, and a lost answer is ambiguous as
// for any statement that commits on its own. In the caller's
// transaction, the caller's level stands.
func (o *ops) runReadCommitted(ctx context.Context, op, sql string, args []any, dest ...any) error {
	if o.inTx() {
		return o.run(ctx, op, true, func(q querier) error {
			if len(dest) > 0 {
				return q.QueryRow(ctx, sql, args...).Scan(dest...)
			}
			_, err := q.Exec(ctx, sql, args...)
			return err
		})
	}
	conn, err := o.pool.Acquire(ctx)
	if err != nil {
		return interpretError(op, reads, err)
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := nulGuard{conn}.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		if len(dest) > 0 {
			err = br.QueryRow().Scan(dest...)
		} else {
			_, err = br.Exec()
		}
	}
	if err == nil {
		_, err = br.Exec()
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err != nil && !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
		// The statement failed and the server skipped the COMMIT: end the
		// transaction, so the connection goes back to the pool idle.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return interpretError(op, commits, err)
}

// inTx reports whether the operations run in a transaction of the
// caller's.
func (o *ops) inTx() bool { return o.tx != nil || o.sqlTx != nil }

// clockArg is the clock argument: NULL for the database's now(). A clock
// outside driverutil.CheckTime's range is invalid_argument before the
// database is asked, since pgx cannot send every time.Time.
func (o *ops) clockArg() (any, error) {
	if o.clock == nil {
		return nil, nil
	}
	now := o.clock.Now()
	if err := driverutil.CheckTime("clock", now); err != nil {
		return nil, err
	}
	return now, nil
}

// boundArg is a time argument that is only compared with the events' ts
// (start_at, from_ts): NULL for nil, and -infinity or infinity for a time
// outside the clock range (driverutil.Infinite), which compares the same and
// which pgx, unlike some such times, can always encode.
func boundArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	switch driverutil.Infinite(*t) {
	case -1:
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	case 1:
		return pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	return *t
}

// scanEvent reads a row of rheo.events. JSON columns, here and in the
// other scans, are read through *[]byte, which pgx copies as they are; a
// *json.RawMessage would go through json.Unmarshal, which parses every
// document again only to copy it.
func scanEvent(row pgx.CollectableRow) (rheo.Event, error) {
	var ev rheo.Event
	var key, typ *string
	err := row.Scan(&ev.Stream, &ev.Partition, &ev.Sequence, &ev.ID, &key, &typ,
		(*[]byte)(&ev.Payload), (*[]byte)(&ev.Metadata), &ev.TS)
	ev.Key, ev.Type = deref(key), deref(typ)
	return ev, err
}

func scanLease(row pgx.CollectableRow) (rheo.Lease, error) {
	var l rheo.Lease
	var key, typ *string
	err := row.Scan(&l.LeaseID, &l.Receipt, &l.Event.Stream, &l.Group, &l.ConsumerID, &l.Attempt,
		&l.LeasedAt, &l.ExpiresAt, &l.Event.ID, &l.Event.Partition, &l.Event.Sequence, &key, &typ,
		(*[]byte)(&l.Event.Payload), (*[]byte)(&l.Event.Metadata), &l.Event.TS)
	l.Event.Key, l.Event.Type = deref(key), deref(typ)
	return l, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// textArg maps "" to NULL, the SQL default of the optional text
// arguments (key, id, consumer_id, reason, after).
func textArg(s string) pgtype.Text {
	return pgtype.Text{String: s, Valid: s != ""}
}

// partitionArray maps nil to NULL (all partitions) and keeps a non-nil
// empty slice as '{}' (none).
func partitionArray(partitions []int) []int32 {
	if partitions == nil {
		return nil
	}
	out := make([]int32, len(partitions))
	for i, p := range partitions {
		out[i] = clampInt32(p)
	}
	return out
}

// clampInt32 fits v into an int argument. Values beyond int32 are out of
// range either way, and clamping lets the SQL function report them in the
// order of checks of reference §1.4.
func clampInt32(v int) int32 {
	return int32(max(math.MinInt32, min(math.MaxInt32, v)))
}

// leaseIDArg parses a lease id. A string that is not a UUID cannot have
// been issued, so it is stale.
func leaseIDArg(s string) (pgtype.UUID, error) {
	var id pgtype.UUID
	if err := id.Scan(s); err != nil || !id.Valid {
		return id, rheo.Errorf(rheo.ErrStaleLease, "lease %q was never issued", s)
	}
	return id, nil
}

// checkJSON rejects bytes that are not JSON at all, or JSON that either
// database cannot take (driverutil.CheckJSON), naming the argument; whether
// the value is an object is for the SQL function to say, after its other
// checks.
func checkJSON(what string, v json.RawMessage) error {
	return driverutil.CheckJSON(what, v)
}

// metadataArg defaults nil metadata to {}.
func metadataArg(m json.RawMessage) (json.RawMessage, error) {
	if m == nil {
		return json.RawMessage(`{}`), nil
	}
	if err := checkJSON("metadata", m); err != nil {
		return nil, err
	}
	return m, nil
}
