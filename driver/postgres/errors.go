package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/pgerr"
)

// effect is what an operation does to the database, which decides what
// an error that left its outcome open means.
type effect int

const (
	// reads: the operation changes nothing (a begin included), so a lost
	// answer loses nothing and a retry is always safe.
	reads effect = iota
	// writesInTx: the operation writes inside a transaction, which cannot
	// commit once the operation has failed on its connection.
	writesInTx
	// commits: the operation commits on its own, a statement outside a
	// transaction or the COMMIT of one. Once it was sent, only the
	// server's answer can tell whether it committed.
	commits
)

// interpretError translates an error of operation op into Rheo's
// vocabulary; it is the only place where pgx errors are looked at.
//
//   - An error from before anything was sent (no connection, a closed
//     pool, a context already done, a write of which no byte went out)
//     is backend_unavailable, or failed for the context.
//   - An ERROR the server answered with is the statement's definite
//     failure: its sentinel, invalid_argument or failed.
//   - Anything else may have come after the request reached the server:
//     a broken connection, a context that ended while the answer was
//     awaited, a session the server ended (FATAL, which PostgreSQL can
//     send after a commit: an immediate shutdown or the crash of another
//     backend signals every session wherever it is), or an answer that
//     came and could not be read. Then an operation that commits is
//     ambiguous; a write in a transaction is failed (the transaction
//     cannot commit any more); a read is backend_unavailable when the
//     connection or the session was lost, and failed otherwise.
//
// pgconn.SafeToRetry alone cannot say that nothing was sent: when a
// connection breaks while pgx waits for an answer, pgx can report the
// ErrConnClosed of the connection it has just closed, marked safe to
// retry, instead of the read error (the simple protocol's result reader
// drops the read error and tries the closed connection again). A COMMIT
// whose answer was lost came back that way.
func interpretError(op string, e effect, err error) error {
	if err == nil {
		return nil
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, puddle.ErrClosedPool) {
		// No connection, so nothing was sent; a server's refusal to
		// connect (too_many_connections, cannot_connect_now, a failed
		// authentication) has its own word.
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return interpretServerError(op, pgErr)
		}
		return unavailable(op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !endsSession(pgErr) {
		return interpretServerError(op, pgErr)
	}
	if pgErr == nil && sentNothing(err) {
		if isContextError(err) {
			return failed(op, err)
		}
		return unavailable(op, err)
	}
	if errors.Is(err, pgx.ErrTxClosed) || errors.Is(err, pgx.ErrTxCommitRollback) {
		// The transaction had ended, or the server rolled it back at
		// COMMIT (a statement in it had failed): nothing committed.
		return failed(op, err)
	}
	switch e {
	case commits:
		return &rheo.AmbiguousError{Op: op, Err: err}
	case writesInTx:
		return failed(op, err)
	}
	if pgErr != nil || (lostConnection(err) && !isContextError(err)) {
		return unavailable(op, err)
	}
	return failed(op, err)
}

// interpretServerError translates an error the server answered with,
// before anything of the statement could commit.
func interpretServerError(op string, pgErr *pgconn.PgError) error {
	if sentinel := rheo.ErrorForSQLState(pgErr.Code); sentinel != nil {
		return rheo.Errorf(sentinel, "%s", pgErr.Detail)
	}
	switch {
	case strings.HasPrefix(pgErr.Code, "22"):
		// Data exceptions: input PostgreSQL cannot store, such as a NUL
		// character in text or \u0000 in jsonb.
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s", pgErr.Message)
	case endsSession(pgErr):
		return unavailable(op, pgErr)
	}
	return failed(op, pgErr)
}

// endsSession reports whether the server ended the session with pgErr: a
// FATAL or PANIC, or a code of a lost connection or a shutdown.
func endsSession(pgErr *pgconn.PgError) bool {
	severity := pgErr.SeverityUnlocalized
	if severity == "" {
		severity = pgErr.Severity
	}
	switch {
	case severity == "FATAL", severity == "PANIC",
		strings.HasPrefix(pgErr.Code, "08"), // connection exception
		pgErr.Code == "53300",               // too_many_connections
		pgErr.Code == "57P01",               // admin_shutdown
		pgErr.Code == "57P02",               // crash_shutdown
		pgErr.Code == "57P03":               // cannot_connect_now
		return true
	}
	return false
}

// failed is err as the definite failure of op, classified.
func failed(op string, err error) error {
	kind, msg := classify(err)
	return &rheo.FailedError{Op: op, Kind: kind, Message: msg, Err: err}
}

// unavailable is err as a database op could not reach, classified.
func unavailable(op string, err error) error {
	kind, msg := classify(err)
	var connectErr *pgconn.ConnectError
	if kind == rheo.KindUnknown && !errors.As(err, &connectErr) && lostConnection(err) {
		// A connection that broke, not one that could not be made.
		kind = rheo.KindConnectionLost
	}
	return &rheo.UnavailableError{Op: op, Kind: kind, Message: msg, Err: err}
}

// classify returns the kind of err and the server's words about it: the
// SQLSTATE's kind for an error the server answered with, a timeout or a
// cancellation for the context's or the connection's.
func classify(err error) (rheo.Kind, string) {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return pgerr.Kind(pgErr), pgerr.Message(pgErr)
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return rheo.KindTimeout, ""
	case errors.Is(err, context.Canceled):
		return rheo.KindCanceled, ""
	}
	return rheo.KindUnknown, ""
}

// errConnLost reports a statement not sent because its connection had
// already been closed, by an earlier failure of its transaction.
var errConnLost = errors.New("the connection was closed before the statement was sent")

// sentNothing reports whether err is known to have happened before any
// byte of the request was sent. pgx marks such errors safe to retry,
// but marks ErrConnClosed so as well where it replaces a read error (see
// interpretError): that one proves nothing.
func sentNothing(err error) bool {
	return pgconn.SafeToRetry(err) && !errors.Is(err, pgconn.ErrConnClosed)
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// lostConnection reports whether err ended a statement by a timeout or
// a broken connection.
func lostConnection(err error) bool {
	var netErr net.Error
	return pgconn.Timeout(err) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed)
}
