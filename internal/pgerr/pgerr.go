// Package pgerr classifies PostgreSQL's errors into rheo.Kind: the one
// table of SQLSTATEs that driver/postgres and migrate share, so that an
// error reads the same whichever of them met it.
package pgerr

import (
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rheo-go/rheo"
)

// Kind returns the kind of the server's error pgErr, or rheo.KindUnknown.
func Kind(pgErr *pgconn.PgError) rheo.Kind {
	switch code := pgErr.Code; {
	case code == "42501": // insufficient_privilege
		return rheo.KindPermissionDenied
	case code == "28P01": // invalid_password
		return rheo.KindAuthenticationFailed
	case code == "28000": // invalid_authorization_specification
		if strings.Contains(pgErr.Message, "pg_hba.conf") {
			return rheo.KindNotAdmitted
		}
		return rheo.KindRoleNotFound
	case code == "3D000": // invalid_catalog_name
		return rheo.KindDatabaseNotFound
	case code == "53300": // too_many_connections
		return rheo.KindTooManyConnections
	case code == "57P01", code == "57P02", code == "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return rheo.KindShuttingDown
	case strings.HasPrefix(code, "08"): // connection_exception
		return rheo.KindConnectionLost
	case code == "57014": // query_canceled
		if strings.Contains(pgErr.Message, "statement timeout") {
			return rheo.KindTimeout
		}
		return rheo.KindCanceled
	case code == "40001", code == "40P01": // serialization_failure, deadlock_detected
		return rheo.KindSerialization
	case code == "55P03": // lock_not_available
		return rheo.KindLockTimeout
	case code == "42883", code == "42P01", code == "42703", code == "3F000":
		// undefined_function, undefined_table, undefined_column, invalid_schema_name
		return rheo.KindSchemaMissing
	case code == "25006": // read_only_sql_transaction
		return rheo.KindReadOnly
	case strings.HasPrefix(code, "53"): // insufficient_resources
		return rheo.KindOutOfResources
	case code == "42P05", code == "26000":
		// duplicate_prepared_statement, invalid_sql_statement_name: a
		// statement prepared on one server connection and used or
		// prepared again on another, behind a pooler in transaction mode.
		return rheo.KindPreparedStatements
	}
	return rheo.KindUnknown
}

// Message is pgErr's message and detail, without the severity and the
// SQLSTATE that pgx adds.
func Message(pgErr *pgconn.PgError) string {
	if pgErr.Detail != "" {
		return pgErr.Message + " (" + pgErr.Detail + ")"
	}
	return pgErr.Message
}
