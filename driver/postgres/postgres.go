// Package postgres is the Rheo driver for PostgreSQL, built on pgx/v5.
//
// Every operation is one call of a rheo.* SQL function (installed by
// package migrate); nothing of the semantics is re-implemented in Go. The
// driver runs each operation as its own statement on a pool, or inside a
// transaction of the host's (WithTx, WithSQLTx, InTx), so that an append or an ack
// commits or rolls back with the host's own writes.
//
// Go zero values of the option structs stand for the SQL defaults
// (driverutil.WithDefaults); other values, negative ones included, are passed to SQL
// as they are, so the functions report invalid_argument in their order of
// checks. Counts beyond int32 are clamped (still out of range), and
// durations are whole milliseconds, rounded down.
//
// # Durability
//
// Every write commits durably (synchronous_commit as the server sets it)
// except a Fetch that runs in a transaction of its own, which commits
// asynchronously: a claim that a server crash loses leaves its events
// claimable again, as at-least-once delivery allows, and the ack of any
// of its leases flushes the claim to disk first. A Fetch in a host's
// transaction (WithTx, InTx) leaves the transaction's durability alone.
//
// # Errors
//
// Errors raised by the SQL functions come back as the rheo sentinels
// (errors.Is(err, rheo.ErrStaleLease)) wrapped with the SQL DETAIL.
// Besides:
//
//   - input PostgreSQL cannot store (a data exception, SQLSTATE class 22,
//     such as a NUL character in text) is invalid_argument, and so are,
//     found before the database is asked and so before stream_not_found:
//     payload, metadata or query patterns that are not JSON, or that
//     either database cannot take (driverutil.CheckJSON), durations beyond int32
//     milliseconds, a max_attempts beyond int32, and an Options.Clock
//     reading or an AppendOptions.TS outside the years 0001 to 9999
//     (driverutil.CheckTime);
//   - a StartAt, FromTS, or query From or To outside those years is sent
//     as -infinity or infinity, which compares the same with every
//     event's ts;
//   - a lease id that is not a UUID was never issued: settling it is
//     stale_lease, and AckBatch reports it with OK=false;
//   - anything else the server answered with (an ERROR) is
//     *rheo.FailedError: the statement failed and nothing of it committed.
//
// When no answer came, what the word says depends on whether the request
// may have reached the server, and on what the operation does:
//
//   - rheo.ErrBackendUnavailable: a database that cannot be reached, a
//     closed pool, a transaction whose connection an earlier failure
//     closed, or a connection that failed before any byte of the request
//     was sent: nothing happened, and the same call may be retried. A
//     read (Read, Lag, Query, the ops lookups, Ping) or a begin whose
//     connection or session was lost says so too: retrying them is
//     always safe.
//   - *rheo.AmbiguousError: a write that commits on its own (every write
//     on the pool: CreateStream, CreateGroup, Append, AppendBatch, Fetch,
//     Renew, Ack, AckBatch, Retry, Reject, Replay, ResetGroup) and the
//     commit of InTx, once the request may have been sent, when the
//     connection broke, the context ended before the answer came, the
//     server ended the session (a FATAL error: PostgreSQL sends them on an
//     immediate shutdown or a crash wherever a session is, after a commit
//     too) or the answer could not be read. It may have committed: an
//     Append retried with the same id is a repeat, a settle retried is
//     stale_lease at worst, and a Fetch's claims expire.
//   - *rheo.FailedError: a write in a transaction (WithTx, InTx) in that
//     case, since its transaction cannot commit any more; a read or begin
//     cut off by its context; any call whose context had ended before it
//     began.
//
// pgx's own mark of a safe retry (pgconn.SafeToRetry) is not taken as
// proof that nothing was sent: a COMMIT whose answer is lost comes back
// from pgx as "conn closed", marked safe.
package postgres

import (
	"context"
	"database/sql"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/retention"
)

// Options configure a Driver. A nil *Options means all defaults.
type Options struct {
	// Clock, when set, is passed as the clock argument of every SQL
	// function that reads time, so tests can pin time. Defaults to nil:
	// the database's now().
	Clock driver.Clock
	// Logger receives the wakeup listener's connection problems, its
	// warning that notifications are lost (WakeupCheckInterval) and failed
	// vacuums. Defaults to slog.Default().
	Logger *slog.Logger
	// VacuumEvery is how many settles (acks, retries, rejects) made through
	// the driver start a VACUUM of rheo.deliveries, run in the background
	// on a connection of the pool, one at a time. Settles leave dead rows
	// there that only a VACUUM makes reusable, and autovacuum comes at most
	// once per autovacuum_naptime: between two visits a busy group would
	// grow the table and its lease_id index by hundreds of megabytes.
	// Only the table's owner, the database's owner or a superuser may
	// VACUUM it (and on PostgreSQL 17, rheo_consumer, which holds MAINTAIN
	// on it): for any other role the driver logs that once at Info and
	// leaves the table to autovacuum, which the schema sets to visit it
	// often. Defaults to DefaultVacuumEvery; a negative value leaves the
	// table to autovacuum alone.
	VacuumEvery int

	// ListenConfig is the connection that the wakeup listener opens for
	// LISTEN rheo_events, made with pgx.ParseConfig. Behind a pooler in
	// transaction mode (PgBouncer's pool_mode = transaction) LISTEN does
	// not work, since the server connection that ran it goes back to the
	// pooler's pool: point this at the server directly, or set PollOnly.
	// On a Citus cluster the connections to the workers use it too, with
	// each worker's host and port. Open reads it from the URL parameter
	// rheo_listen_url too. Defaults
	// to nil: the pool's connection settings.
	ListenConfig *pgx.ConnConfig
	// PollOnly turns wakeups off: the driver never LISTENs, Wakeups
	// channels receive nothing until they are closed, and
	// Capabilities.Notifications is false, so consumers find new events
	// by polling alone (worker.Config.PollInterval). It is for poolers in
	// transaction mode where the server cannot be reached directly. It
	// takes precedence over ListenConfig. Open reads it from the URL
	// parameter rheo_poll_only=true too. Defaults to false.
	PollOnly bool
	// WakeupCheckInterval is how often the wakeup listener checks that
	// notifications reach it: while it listens, it sends a notification
	// of its own through the pool (a payload with no stream, which every
	// listener ignores as a wakeup) and expects it back on its LISTEN
	// connection. A check that has not come back when the next one is due
	// means notifications are lost, as behind a pooler in transaction
	// mode: the driver logs one warning, saying what to do, and nothing
	// more until checks come back and are lost again. Defaults to
	// DefaultWakeupCheckInterval; a negative value turns the check off.
	WakeupCheckInterval time.Duration
}

// DefaultWakeupCheckInterval is the default of
// Options.WakeupCheckInterval.
const DefaultWakeupCheckInterval = 30 * time.Second

// The URL parameters that Open reads and removes before the URL reaches
// pgx (which would send them to the server as settings).
const (
	// ParamListenURL is the URL (percent-encoded) or keyword/value
	// string of the wakeup listener's own connection:
	// Options.ListenConfig.
	ParamListenURL = "rheo_listen_url"
	// ParamPollOnly, set to true, is Options.PollOnly.
	ParamPollOnly = "rheo_poll_only"
)

// Driver runs Rheo operations against PostgreSQL. It implements
// driver.Driver and driver.Transactor. It is safe for concurrent use.
type Driver struct {
	*ops
	pool      *pgxpool.Pool
	ownsPool  bool
	wakeups   *listener
	pollOnly  bool
	closeOnce sync.Once
}

var (
	_ driver.Driver     = (*Driver)(nil)
	_ driver.Transactor = (*Driver)(nil)
	_ driver.Tx         = (*Tx)(nil)
	_ driver.Tx         = (*SQLTx)(nil)
)

// New returns a driver on a pool the host owns: Close leaves the pool
// open. opts may be nil.
func New(pool *pgxpool.Pool, opts *Options) *Driver {
	if opts == nil {
		opts = &Options{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	listenConfig := opts.ListenConfig
	if listenConfig == nil {
		listenConfig = pool.Config().ConnConfig
	}
	checkEvery := opts.WakeupCheckInterval
	if checkEvery == 0 {
		checkEvery = DefaultWakeupCheckInterval
	}
	if opts.PollOnly {
		listenConfig = nil
	}
	wakeups := newListener(listenConfig, logger)
	if listenConfig != nil && checkEvery > 0 {
		wakeups.checkWith(checkEvery, func(ctx context.Context, payload string) error {
			// Through the pool: the path the appends' notifications take.
			_, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, payload)
			return err
		})
	}
	vacuum := retention.NewVacuumer(vacuumDeliveries(pool), &retention.VacuumerConfig{Every: opts.VacuumEvery, Logger: logger})
	return &Driver{
		ops:      &ops{pool: pool, clock: opts.Clock, vacuum: vacuum},
		pool:     pool,
		wakeups:  wakeups,
		pollOnly: opts.PollOnly,
	}
}

// Open connects a pool of its own to the database at url (a PostgreSQL
// URL or keyword/value string, as pgxpool.ParseConfig takes) and checks
// that the database answers. Close closes the pool. opts may be nil.
//
// Besides pgx's parameters, url may carry rheo_listen_url (ParamListenURL)
// and rheo_poll_only (ParamPollOnly), which set Options.ListenConfig and
// Options.PollOnly; giving one both ways, or both of them, is
// invalid_argument. Behind PgBouncer in transaction mode, add
// default_query_exec_mode=exec: pgx's default caches prepared
// statements on server connections that the pooler shares
// (docs/pgbouncer.md).
func Open(ctx context.Context, url string, opts *Options) (*Driver, error) {
	config, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "database url: %v", err)
	}
	return OpenConfig(ctx, config, opts)
}

// OpenConfig is Open with the pool's configuration already parsed (by
// pgxpool.ParseConfig, which OpenConfig's config must come from), for
// settings a URL cannot carry: config's pool sizes, lifetimes and
// hooks. Rheo's URL parameters are read from config's runtime
// parameters as Open reads them. Close closes the pool. opts may be nil.
func OpenConfig(ctx context.Context, config *pgxpool.Config, opts *Options) (*Driver, error) {
	opts, err := urlOptions(config.ConnConfig, opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, interpretError("open", reads, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, interpretError("open", reads, err)
	}
	d := New(pool, opts)
	d.ownsPool = true
	return d, nil
}

// urlOptions takes Rheo's parameters out of the parsed url and returns
// opts (which it does not modify) with them applied.
func urlOptions(config *pgx.ConnConfig, opts *Options) (*Options, error) {
	merged := Options{}
	if opts != nil {
		merged = *opts
	}
	params := config.RuntimeParams
	listenURL, hasListenURL := params[ParamListenURL]
	pollOnly, hasPollOnly := params[ParamPollOnly]
	delete(params, ParamListenURL)
	delete(params, ParamPollOnly)
	if hasPollOnly {
		on, err := strconv.ParseBool(pollOnly)
		if err != nil {
			return nil, rheo.Errorf(rheo.ErrInvalidArgument, "database url: %s must be true or false, not %q", ParamPollOnly, pollOnly)
		}
		merged.PollOnly = merged.PollOnly || on
		hasPollOnly = on
	}
	if hasListenURL {
		if merged.ListenConfig != nil {
			return nil, rheo.Errorf(rheo.ErrInvalidArgument, "database url: %s is set and so is Options.ListenConfig; give one", ParamListenURL)
		}
		listenConfig, err := pgx.ParseConfig(listenURL)
		if err != nil {
			return nil, rheo.Errorf(rheo.ErrInvalidArgument, "database url: %s: %v", ParamListenURL, err)
		}
		merged.ListenConfig = listenConfig
	}
	if merged.PollOnly && merged.ListenConfig != nil && (hasPollOnly || hasListenURL) {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument,
			"database url: poll-only mode (%s) and a listener connection (%s) exclude each other; give one", ParamPollOnly, ParamListenURL)
	}
	return &merged, nil
}

// Pool returns the pool the driver runs on.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Ping checks that the database answers.
func (d *Driver) Ping(ctx context.Context) error {
	return interpretError("ping", reads, d.pool.Ping(ctx))
}

// Capabilities declares what the PostgreSQL driver guarantees: all of it.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Durable:             true,
		Distributed:         true,
		Partitions:          true,
		ContiguousFrontier:  true,
		Replay:              true,
		Notifications:       !d.pollOnly,
		TransactionalSettle: true,
	}
}

// Wakeups subscribes to appends to stream, by any process, through
// LISTEN rheo_events on one dedicated connection per Driver (made with
// Options.ListenConfig, else like the pool's), and on a Citus cluster one
// more to each worker that holds a subscribed stream, with the same
// settings and that worker's address (docs/citus.md). The connection starts with
// the first subscription and stops with the last one or with Close; when
// it drops it is reconnected with a backoff from 100 ms doubling to 5 s.
// Notifications sent while it is not listening are lost, and a
// subscriber whose buffer is full misses hints: consumers still poll.
// While it listens it checks that notifications reach it
// (Options.WakeupCheckInterval). With Options.PollOnly the channel
// receives nothing. The returned function ends the subscription and
// closes the channel; Close closes every channel.
func (d *Driver) Wakeups(stream string) (<-chan driver.Wakeup, func()) {
	return d.wakeups.subscribe(stream)
}

// Close stops the wakeup listener and a VACUUM in progress and, when the
// driver opened the pool itself (Open), closes the pool. It is safe to
// call more than once.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		d.wakeups.close()
		d.vacuum.Close()
		if d.ownsPool {
			d.pool.Close()
		}
	})
	return nil
}

// WithTx binds the operations to the host's transaction tx: what they
// write commits or rolls back with it. The host commits or rolls back tx.
//
// Each operation runs under a savepoint, sent with its statement in one
// round trip (SAVEPOINT, the call, RELEASE): an operation that fails
// (stream_not_found, an append whose id exists with other content, …)
// rolls back to it, so that tx stays usable with the host's own writes,
// as a transaction on SQLite does, instead of being aborted. A failure
// that breaks the connection still ends tx.
func (d *Driver) WithTx(tx pgx.Tx) driver.Tx {
	return &Tx{ops: &ops{tx: tx, clock: d.clock, vacuum: d.vacuum}, tx: tx}
}

// WithSQLTx binds the operations to the host's database/sql transaction
// tx, on PostgreSQL through any database/sql driver (pgx's stdlib,
// lib/pq), for programs whose transactions are database/sql's (sqlx,
// GORM, Bun, ent): what the operations write commits or rolls back with
// tx, which the host commits or rolls back. The operations are WithTx's,
// with the same errors (errors.Is(err, rheo.ErrStreamNotFound)), and a
// failed one leaves tx usable, rolled back to a savepoint of its own. As
// database/sql cannot send two statements with arguments in one round
// trip, the savepoint and its release are round trips of their own.
// Native returns tx.
func (d *Driver) WithSQLTx(tx *sql.Tx) driver.Tx {
	return &SQLTx{ops: &ops{sqlTx: tx, clock: d.clock, vacuum: d.vacuum}, tx: tx}
}

// InTx begins a transaction on the driver's pool, calls fn with it, and
// commits when fn returns nil. When fn returns an error or panics, the
// transaction is rolled back and the error (or panic) is passed on
// unchanged. A begin that fails has done nothing (backend_unavailable, or
// failed); a commit whose answer was lost after it was sent reports
// *rheo.AmbiguousError.
func (d *Driver) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Tx) error) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return interpretError("begin", reads, err)
	}
	// After a successful commit the rollback is a no-op.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(ctx, d.WithTx(tx)); err != nil {
		return err
	}
	if tx.Conn().IsClosed() {
		// fn went on after a failure that closed the connection: the
		// transaction is gone, and COMMIT is never sent.
		return unavailable("commit", errConnLost)
	}
	return interpretError("commit", commits, tx.Commit(ctx))
}

// Tx is a host transaction with the Rheo operations bound to it.
type Tx struct {
	*ops
	tx pgx.Tx
}

// Native returns the pgx.Tx.
func (t *Tx) Native() any { return t.tx }

// SQLTx is a host's database/sql transaction with the Rheo operations
// bound to it (WithSQLTx).
type SQLTx struct {
	*ops
	tx *sql.Tx
}

// Native returns the *sql.Tx.
func (t *SQLTx) Native() any { return t.tx }
