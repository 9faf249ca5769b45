// Package sqlite is the Rheo driver for embedded SQLite, built on
// database/sql. It runs on either of two SQLite drivers:
// github.com/mattn/go-sqlite3 ("sqlite3", SQLite's C code through cgo),
// which it links when cgo is on, and modernc.org/sqlite ("sqlite",
// SQLite translated to Go), which it links with the build tag
// rheo_modernc, for programs built with CGO_ENABLED=0. A program built
// without cgo and without the tag has no SQLite: Open then fails with
// ErrNoDriver, and the rest of Rheo (PostgreSQL) works as usual.
//
// The tables are the twin of the PostgreSQL ones (sql/sqlite, applied by
// package migrate), and the semantics are the same: every operation runs
// as SQL statements inside one BEGIN IMMEDIATE transaction, validated in
// the same order and failing with the same rheo sentinels. SQLite has one
// writer at a time, so operations on one database serialize; a Driver
// opened by Open uses a single connection, which hands the database from
// one goroutine to the next without the sleeps of SQLite's busy handler.
//
// The database is local: appends made through a Driver (or its
// transactions) wake that Driver's subscribers, but appends by other
// processes are not seen (Capabilities.Notifications is false).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
	"github.com/rheo-go/rheo/migrate"
)

// Options configure a Driver. A nil *Options means all defaults.
type Options struct {
	// Clock is read once per operation for every timestamp it writes or
	// compares. Defaults to driver.SystemClock.
	Clock driver.Clock
	// Migrate applies the SQLite migrations (migrate.SQLite) before the
	// Driver is returned. Defaults to false: nothing runs implicitly.
	Migrate bool
	// DriverName is the database/sql driver Open opens the database with:
	// DriverMattn or DriverModernc, or another name either registered
	// itself under. New ignores it. Defaults to DefaultDriverName():
	// mattn's where this package links it, else modernc's.
	DriverName string
}

// Driver runs Rheo operations against a SQLite database. It implements
// driver.Driver and driver.Transactor. It is safe for concurrent use.
type Driver struct {
	ops
	db       *sql.DB
	ownsDB   bool
	memory   bool
	clock    driver.Clock
	rotation atomic.Uint64 // rotates the first partition fetch serves
	wakeups  *hub
	closing  sync.Once
}

var (
	_ driver.Driver     = (*Driver)(nil)
	_ driver.Transactor = (*Driver)(nil)
	_ driver.Tx         = (*txOps)(nil)
)

// Open opens the SQLite database at dsn: a file path, or a file: URI, or
// ":memory:", with the driver named by opts.DriverName. The Driver owns
// the *sql.DB and closes it in Close.
//
// A file is opened in WAL mode (synchronous=NORMAL) with a 5 s busy
// timeout, and every transaction begins IMMEDIATE. Open adds these
// settings to dsn as the driver reads them (mattn's _busy_timeout=5000,
// …; modernc's _pragma=busy_timeout(5000), …); those that dsn sets
// itself, in the driver's own form, take precedence. ":memory:" is one private database shared
// by all the goroutines using this Driver and gone when it closes.
// Either way the Driver keeps a single connection: SQLite has one writer
// at a time and every operation writes, so a second connection would only
// wait for the first. A transaction of InTx holds that connection until it
// ends; inside it, use only the Tx it was given.
//
// opts may be nil. With opts.Migrate the migrations are applied first.
// In a program that links no SQLite driver, Open fails with a
// *rheo.FailedError wrapping ErrNoDriver.
func Open(ctx context.Context, dsn string, opts *Options) (*Driver, error) {
	name := ""
	if opts != nil {
		name = opts.DriverName
	}
	if name == "" {
		if name = DefaultDriverName(); name == "" {
			return nil, &rheo.FailedError{Op: "open", Err: ErrNoDriver}
		}
	}
	b, err := registered(name)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	db, err := sql.Open(name, b.dsn(dsn))
	if err != nil {
		return nil, interpretError("open", err)
	}
	db.SetMaxOpenConns(1)
	// The connection is kept for the Driver's lifetime: for ":memory:" it
	// is the database.
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, interpretError("open", err)
	}
	d, err := newDriver(ctx, db, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	d.ownsDB = true
	return d, nil
}

// New returns a Driver on a database the host opened with
// github.com/mattn/go-sqlite3 (where this package links it) or
// modernc.org/sqlite; Close leaves it open. Give its DSN the settings
// Open adds: with mattn _txlock=immediate&_busy_timeout=5000, WAL for a
// file, _stmt_cache_size to keep statements prepared; with modernc
// _txlock=immediate&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL).
// Then every operation begins IMMEDIATE. With deferred transactions an
// operation that loses the race for the write lock is retried from the
// start, for up to five seconds. A db of any other driver is
// rheo.ErrInvalidArgument. opts may be nil; with opts.Migrate the
// migrations are applied first.
func New(db *sql.DB, opts *Options) (*Driver, error) {
	if _, err := backendOf(db.Driver()); err != nil {
		return nil, err
	}
	return newDriver(context.Background(), db, opts)
}

func newDriver(ctx context.Context, db *sql.DB, opts *Options) (*Driver, error) {
	if opts == nil {
		opts = &Options{}
	}
	if opts.Migrate {
		if err := migrate.SQLite(ctx, db); err != nil {
			return nil, err
		}
	}
	d := &Driver{db: db, clock: opts.Clock, wakeups: newHub()}
	// An in-memory database has no file.
	var file string
	if err := db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
		return nil, interpretError("open", err)
	}
	d.memory = file == ""
	if d.clock == nil {
		d.clock = driver.SystemClock
	}
	d.ops = ops{run: d.run}
	return d, nil
}

// DB returns the database the Driver runs on: for plain SQL over the
// rheo_ tables, and for host transactions to pass to WithTx.
func (d *Driver) DB() *sql.DB { return d.db }

// Ping checks that the database answers.
func (d *Driver) Ping(ctx context.Context) error {
	return interpretError("ping", d.db.PingContext(ctx))
}

// Capabilities declares what the SQLite driver guarantees. A file is
// durable, a ":memory:" database is not. One process owns the database:
// it is not distributed, and appends by other processes wake no one.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Durable:             !d.memory,
		Distributed:         false,
		Partitions:          true,
		ContiguousFrontier:  true,
		Replay:              true,
		Notifications:       false,
		TransactionalSettle: true,
	}
}

// Wakeups subscribes to appends to stream made through this Driver and
// its transactions. Each subscription has a small buffer; a hint that
// finds it full is dropped, since consumers still poll. The returned
// function ends the subscription and closes the channel; Close closes
// every channel.
func (d *Driver) Wakeups(stream string) (<-chan driver.Wakeup, func()) {
	return d.wakeups.subscribe(stream)
}

// Close ends every Wakeups subscription and, when the Driver opened the
// database itself (Open), closes it; a ":memory:" database is then gone.
// It is safe to call more than once.
func (d *Driver) Close() error {
	var err error
	d.closing.Do(func() {
		d.wakeups.close()
		if d.ownsDB {
			err = interpretError("close", d.db.Close())
		}
	})
	return err
}

// WithTx binds the operations to the host's transaction tx, begun on
// DB(): what they write commits or rolls back with it, and the host
// commits or rolls back tx. Each operation runs in a savepoint, so one
// that fails leaves the transaction as it was.
//
// Appends through it wake subscribers at once rather than at commit,
// which the Driver cannot observe. A consumer woken early waits for the
// database's write lock, which tx holds until it ends, so it still finds
// the events once they are committed; after a rollback it finds nothing.
func (d *Driver) WithTx(tx *sql.Tx) driver.Tx {
	return newTxOps(d, tx, false)
}

// InTx begins a transaction, calls fn with it, and commits when fn
// returns nil. When fn returns an error or panics, the transaction is
// rolled back and the error (or panic) is passed on unchanged. Appends
// made in it wake subscribers after the commit. The transaction holds
// the Driver's connection: inside fn, use only tx.
func (d *Driver) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Tx) error) error {
	sqlTx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return interpretError("begin", err)
	}
	// After a successful commit the rollback is a no-op.
	defer func() { _ = sqlTx.Rollback() }()
	t := newTxOps(d, sqlTx, true)
	if err := fn(ctx, t); err != nil {
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return interpretError("commit", err)
	}
	d.wakeups.notify(t.held)
	return nil
}

// How long an operation that lost the write lock to another transaction
// is retried; only transactions that begin DEFERRED (a host's database
// opened without _txlock=immediate) can lose it after they begin.
const (
	busyRetryFor   = 5 * time.Second
	busyBackoffMin = time.Millisecond
	busyBackoffMax = 50 * time.Millisecond
)

// run runs fn in a transaction of its own and commits it. Appends wake
// subscribers after the commit.
func (d *Driver) run(ctx context.Context, op string, fn func(s *session) error) error {
	deadline := time.Now().Add(busyRetryFor)
	backoff := busyBackoffMin
	for {
		s, err := d.runOnce(ctx, fn)
		if err == nil {
			d.wakeups.notify(s.wakeups)
			return nil
		}
		if !lostWriteLock(err) || ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			return interpretError(op, err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return interpretError(op, ctx.Err())
		}
		backoff = min(2*backoff, busyBackoffMax)
	}
}

// beginError marks a failure to begin: SQLite's busy handler has already
// waited out the busy timeout there, so it is not retried.
type beginError struct{ err error }

func (e *beginError) Error() string { return e.err.Error() }
func (e *beginError) Unwrap() error { return e.err }

func (d *Driver) runOnce(ctx context.Context, fn func(s *session) error) (*session, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, &beginError{err: err}
	}
	s := d.session(tx)
	if err := fn(s); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return s, nil
}

// lostWriteLock reports whether a transaction failed, after it began,
// because another connection held or had moved past the database's write
// lock: the whole operation can run again.
func lostWriteLock(err error) bool {
	var begin *beginError
	if errors.As(err, &begin) {
		return false
	}
	code, ok := resultCode(err)
	return ok && code == codeBusy
}

// session starts an operation in tx, reading the clock once.
func (d *Driver) session(tx *sql.Tx) *session {
	clock := d.clock.Now()
	return &session{tx: tx, clock: clock, now: clock.UnixMicro(), d: d}
}

// txOps runs the operations inside a host transaction.
type txOps struct {
	ops
	d  *Driver
	tx *sql.Tx
	// holdWakeups is set for InTx, which knows when the transaction
	// commits: wakeups wait in held until then.
	holdWakeups bool
	held        []driver.Wakeup
}

func newTxOps(d *Driver, tx *sql.Tx, holdWakeups bool) *txOps {
	t := &txOps{d: d, tx: tx, holdWakeups: holdWakeups}
	t.ops = ops{run: t.run}
	return t
}

// Native returns the *sql.Tx.
func (t *txOps) Native() any { return t.tx }

// run runs fn in a savepoint of the host's transaction.
func (t *txOps) run(ctx context.Context, op string, fn func(s *session) error) error {
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT rheo_op"); err != nil {
		return interpretError(op, err)
	}
	s := t.d.session(t.tx)
	if err := fn(s); err != nil {
		// ROLLBACK TO keeps the savepoint open; RELEASE ends it. When the
		// context is gone database/sql has rolled the whole transaction
		// back already and these fail harmlessly.
		_, _ = t.tx.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO rheo_op")
		_, _ = t.tx.ExecContext(context.WithoutCancel(ctx), "RELEASE rheo_op")
		return interpretError(op, err)
	}
	if _, err := t.tx.ExecContext(ctx, "RELEASE rheo_op"); err != nil {
		return interpretError(op, err)
	}
	if t.holdWakeups {
		t.held = append(t.held, s.wakeups...)
	} else {
		t.d.wakeups.notify(s.wakeups)
	}
	return nil
}

// session is one operation's transaction and the clock reading all its
// statements share.
type session struct {
	tx    *sql.Tx
	clock time.Time
	now   int64 // clock in microseconds since the Unix epoch
	d     *Driver
	// wakeups are the partitions the operation appended to.
	wakeups []driver.Wakeup
}

func (s *session) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return s.tx.ExecContext(ctx, query, args...)
}

func (s *session) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return s.tx.QueryContext(ctx, query, args...)
}

func (s *session) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return s.tx.QueryRowContext(ctx, query, args...)
}

// checkClock reports a clock reading outside driverutil.CheckTime's range as
// invalid_argument. The operations that take a clock argument on
// PostgreSQL check it first, as the PostgreSQL driver does before it
// asks the database; the others never read it.
func (s *session) checkClock() error {
	return driverutil.CheckTime("clock", s.clock)
}

// boundMicros is a time that is only compared with the events' ts
// (start_at, from_ts, a query's From and To) in stored microseconds.
// Outside the clock range it is the lowest or highest int64, which
// compares with every event's ts as the infinities do (driverutil.Infinite),
// where UnixMicro would overflow.
func boundMicros(t time.Time) int64 {
	switch driverutil.Infinite(t) {
	case -1:
		return math.MinInt64
	case 1:
		return math.MaxInt64
	}
	return t.UnixMicro()
}

// fromMicros converts a stored timestamp to a time.Time in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// scanAll calls scan for every row of rows and closes them.
func scanAll(rows *sql.Rows, err error, scan func(rows *sql.Rows) error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read rows: %w", err)
	}
	return rows.Close()
}
