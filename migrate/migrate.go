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
}

func (o *Options) logger() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
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
