package rheo

import "fmt"

// Kind says what a failure outside the functions' words was, in the same
// terms on every database: the drivers classify their databases' errors
// (PostgreSQL's SQLSTATEs, SQLite's result codes) into kinds, so that a
// program, the rheo command and the dashboard can say what went wrong
// without reading a driver's error codes. A *FailedError and an
// *UnavailableError carry one; KindUnknown is a failure no kind
// describes. docs/reference.md §10.4 lists which errors of each
// database get which kind.
type Kind string

// The kinds of failure.
const (
	// KindUnknown is a failure that no other kind describes.
	KindUnknown Kind = ""
	// KindPermissionDenied: the database role lacks a privilege the
	// operation needs (a Rheo role it was not granted, or CONNECT on the
	// database).
	KindPermissionDenied Kind = "permission_denied"
	// KindAuthenticationFailed: the server refused the credentials (a
	// wrong password).
	KindAuthenticationFailed Kind = "authentication_failed"
	// KindRoleNotFound: the server has no role of the user's name.
	KindRoleNotFound Kind = "role_not_found"
	// KindNotAdmitted: the server's access rules (pg_hba.conf) admit no
	// connection of this host, user and database.
	KindNotAdmitted Kind = "not_admitted"
	// KindDatabaseNotFound: the server has no database of that name.
	KindDatabaseNotFound Kind = "database_not_found"
	// KindTooManyConnections: the server has no connection left.
	KindTooManyConnections Kind = "too_many_connections"
	// KindShuttingDown: the server is shutting down, restarting or
	// starting up.
	KindShuttingDown Kind = "shutting_down"
	// KindConnectionLost: the connection broke, or the server ended the
	// session.
	KindConnectionLost Kind = "connection_lost"
	// KindTimeout: a timeout ended the operation: the context's deadline,
	// the server's statement_timeout, or the connect timeout.
	KindTimeout Kind = "timeout"
	// KindCanceled: the operation was cancelled, by the context or by
	// the server on request (pg_cancel_backend).
	KindCanceled Kind = "canceled"
	// KindSerialization: the database aborted the transaction to resolve
	// a conflict with another (a serialization failure, a deadlock); it
	// may be run again.
	KindSerialization Kind = "serialization"
	// KindLockTimeout: a lock was not granted in time (PostgreSQL's
	// lock_timeout, SQLite's busy timeout); it may be run again.
	KindLockTimeout Kind = "lock_timeout"
	// KindSchemaMissing: the database lacks a table, function or column
	// of Rheo's schema: it was never installed, or is out of date.
	KindSchemaMissing Kind = "schema_missing"
	// KindReadOnly: the database accepts no writes here (a standby,
	// default_transaction_read_only, a read-only SQLite file).
	KindReadOnly Kind = "read_only"
	// KindOutOfResources: the database is out of memory, disk or another
	// resource.
	KindOutOfResources Kind = "out_of_resources"
	// KindPreparedStatements: the database refused a prepared statement
	// of the driver's: a pooler in transaction mode (PgBouncer) in front
	// of a driver that prepares statements, which needs pgx's
	// default_query_exec_mode=exec (docs/pgbouncer.md).
	KindPreparedStatements Kind = "prepared_statements"
)

// UnavailableError reports a database that could not be reached, or a
// session it ended: nothing took effect that the caller cannot retry.
// errors.Is(err, ErrBackendUnavailable) holds.
type UnavailableError struct {
	// Op names the operation, such as "open".
	Op string
	// Kind says why, where the driver knows.
	Kind Kind
	// Message is what the database said, in its own words and without
	// its error codes; "" when it said nothing (a network failure).
	Message string
	// Err is the underlying cause.
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Op, ErrBackendUnavailable.Reason, e.Err)
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrBackendUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrBackendUnavailable }

// KindOf returns the kind of the first *FailedError or *UnavailableError
// in err's chain that has one, or KindUnknown.
func KindOf(err error) Kind {
	var kind Kind
	walkClassified(err, func(k Kind, _ string) bool {
		kind = k
		return k != KindUnknown
	})
	return kind
}

// MessageOf returns the database's own words about the failure in err's
// chain: the Message of its first *FailedError or *UnavailableError that
// has one, or "".
func MessageOf(err error) string {
	var msg string
	walkClassified(err, func(_ Kind, m string) bool {
		msg = m
		return m != ""
	})
	return msg
}

// walkClassified calls visit with the kind and message of each
// *FailedError and *UnavailableError in err's chain, depth first, until
// visit returns true; it reports whether one did.
func walkClassified(err error, visit func(Kind, string) bool) bool {
	for err != nil {
		switch e := err.(type) {
		case *FailedError:
			if visit(e.Kind, e.Message) {
				return true
			}
		case *UnavailableError:
			if visit(e.Kind, e.Message) {
				return true
			}
		}
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if walkClassified(inner, visit) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
