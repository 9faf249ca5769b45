package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/rheo-go/rheo"
)

// interpretError translates an error of operation op into the SPEC
// vocabulary; it is the only place where pgx errors are looked at.
// ambiguousIfLost is true for a write that commits on its own: when such
// a statement was sent and its answer lost, the outcome is unknown.
// Reads, and writes inside a transaction (which cannot commit once its
// connection is gone), are never ambiguous.
func interpretError(op string, ambiguousIfLost bool, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return interpretServerError(op, pgErr)
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, puddle.ErrClosedPool) {
		return unavailable(op, err)
	}
	if pgconn.SafeToRetry(err) {
		// Nothing reached the server.
		if isContextError(err) {
			return &rheo.FailedError{Op: op, Err: err}
		}
		return unavailable(op, err)
	}
	if lostInTransit(err) {
		if ambiguousIfLost {
			return &rheo.AmbiguousError{Op: op, Err: err}
		}
		if isContextError(err) {
			return &rheo.FailedError{Op: op, Err: err}
		}
		return unavailable(op, err)
	}
	return &rheo.FailedError{Op: op, Err: err}
}

// interpretServerError translates an error the server answered with. The
// statement failed, so the outcome is never ambiguous.
func interpretServerError(op string, pgErr *pgconn.PgError) error {
	if sentinel := rheo.ErrorForSQLState(pgErr.Code); sentinel != nil {
		return rheo.Errorf(sentinel, "%s", pgErr.Detail)
	}
	switch {
	case strings.HasPrefix(pgErr.Code, "22"):
		// Data exceptions: input PostgreSQL cannot store, such as a NUL
		// character in text or \u0000 in jsonb.
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s", pgErr.Message)
	case strings.HasPrefix(pgErr.Code, "08"), // connection exception
		pgErr.Code == "53300", // too_many_connections
		pgErr.Code == "57P01", // admin_shutdown
		pgErr.Code == "57P02", // crash_shutdown
		pgErr.Code == "57P03": // cannot_connect_now
		return unavailable(op, pgErr)
	}
	return &rheo.FailedError{Op: op, Err: pgErr}
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, rheo.ErrBackendUnavailable, err)
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// lostInTransit reports whether err ended a statement after it may have
// been sent: a cancelled context, a timeout or a broken connection.
func lostInTransit(err error) bool {
	var netErr net.Error
	return isContextError(err) || pgconn.Timeout(err) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed)
}
