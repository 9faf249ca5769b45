// Package migrate installs Rheo's storage: the schema migrations and
// functions of package rheosql on PostgreSQL, or its SQLite migrations.
//
// Both are idempotent: running them again, or from several processes at
// once, changes nothing once the database is current. Hosts that manage
// migrations with their own tool can take the SQL from PostgresSQL or
// SQLiteSQL instead.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/pgerr"
)

// Options are the optional settings of Postgres. A nil *Options means the
// defaults.
type Options struct {
	// Logger receives one Info record per schema migration applied and one
	// when the functions are installed, and a Debug record when they were
	// already current. Defaults to no logging.
	Logger *slog.Logger

	// LockTimeout bounds each wait of a step for a lock that stops the
	// application while it is held or queued for (PostgreSQL's
	// lock_timeout): a step that cannot take its locks in time gives up,
	// so that it never holds the application up for longer, and is tried
	// again. Keep it well under the server's deadlock_timeout (1 s by
	// default), so that a step waiting in a cycle with the application
	// gives up before the server picks a victim. Defaults to 25 ms.
	LockTimeout time.Duration

	// Attempts is how many times a step is tried before Postgres fails
	// with the step's last error; between tries it waits a growing,
	// random pause (up to a second). Defaults to 60, about half a minute
	// of tries.
	Attempts int

	// Wait bounds how long Postgres waits, after the switch, for the
	// transactions that began before it to end before it runs the
	// follow-ups (which drop what the previous release's calls in flight
	// may still use), and how long steps that let the application through
	// (index builds, VALIDATE) wait for their locks; those are tried 3
	// times at most. Follow-ups that could not run are left for the next
	// run, which says so at Info. Defaults to 30 s.
	Wait time.Duration

	// RolePrefix is put before the name of each of Rheo's roles in this
	// install, so that installs in several databases of one server, whose
	// roles are server-wide, do not share them: with "acme_" the roles are
	// acme_rheo_owner, acme_rheo_reader, acme_rheo_producer,
	// acme_rheo_consumer and acme_rheo_admin (RoleNamesFor says which
	// prefixes are valid). Defaults to "": the names of Roles. The first
	// run records the prefix in the database, and a run with another one
	// is refused: an install keeps its role names.
	RolePrefix string
}

func (o *Options) roleNames() (RoleNames, error) {
	if o == nil {
		return RoleNamesFor("")
	}
	return RoleNamesFor(o.RolePrefix)
}

func (o *Options) rolePrefix() string {
	if o == nil {
		return ""
	}
	return o.RolePrefix
}

func (o *Options) logger() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

func (o *Options) lockTimeout() time.Duration {
	if o == nil || o.LockTimeout <= 0 {
		return 25 * time.Millisecond
	}
	return o.LockTimeout
}

func (o *Options) attempts() int {
	if o == nil || o.Attempts <= 0 {
		return 60
	}
	return o.Attempts
}

func (o *Options) wait() time.Duration {
	if o == nil || o.Wait <= 0 {
		return 30 * time.Second
	}
	return o.Wait
}

// Attribute keys of the log records.
const (
	logKeyVersion = "version"
	logKeyName    = "name"
	logKeySHA256  = "sha256"
)

// wrapErr puts a failed step in the error vocabulary: a connection that
// broke is backend_unavailable, anything else is failed, with the kind
// of a server's error (as driver/postgres classifies it). A run is one
// transaction, so running the migration again is always safe.
func wrapErr(ctx context.Context, step string, err error, connBroken bool) error {
	kind, msg := rheo.KindUnknown, ""
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		kind, msg = pgerr.Kind(pgErr), pgerr.Message(pgErr)
	}
	var netErr net.Error
	if ctx.Err() == nil && (connBroken || errors.As(err, &netErr)) {
		if kind == rheo.KindUnknown {
			kind = rheo.KindConnectionLost
		}
		return &rheo.UnavailableError{Op: "migrate", Kind: kind, Message: msg, Err: &stepError{step: step, err: err}}
	}
	return &rheo.FailedError{Op: "migrate", Kind: kind, Message: msg, Err: &stepError{step: step, err: err}}
}

// stepError is a failed step. A server's error reads as its message (and
// detail), without the driver's decoration.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string {
	var giveUp *giveUpError
	if errors.As(e.err, &giveUp) {
		return e.step + ": " + giveUp.Error()
	}
	var pgErr *pgconn.PgError
	if errors.As(e.err, &pgErr) {
		return e.step + ": " + pgerr.Message(pgErr)
	}
	return e.step + ": " + e.err.Error()
}

func (e *stepError) Unwrap() error { return e.err }

// newerSchemaError refuses to touch a database migrated by a newer build:
// installing this build's functions over a newer schema would break it.
func newerSchemaError(applied, latest int32) error {
	return fmt.Errorf("the database is at schema version %d, newer than this build's latest, %d; use a newer build", applied, latest)
}
