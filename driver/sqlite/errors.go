package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/rheo-go/rheo"
)

// errDBClosedText is the message of database/sql's (unexported) error for
// a call on a closed *sql.DB.
const errDBClosedText = "sql: database is closed"

// interpretError translates an error of operation op into Rheo's
// vocabulary; it is the only place where SQLite errors are looked at.
// Errors that already carry a word of the vocabulary pass unchanged.
//
// SQLite runs in the process, so an outcome is never unknown: a failed
// statement or commit rolls its transaction back, and a cancelled context
// ends the transaction before it commits.
func interpretError(op string, err error) error {
	if err == nil || rheo.IsVocabulary(err) {
		return err
	}
	if code, ok := resultCode(err); ok {
		switch code {
		case codeConstraint:
			// RAISE(ABORT, 'immutable_event') in the triggers on
			// rheo_events. mattn's message is the word alone, modernc's
			// "constraint failed: immutable_event (1811)".
			if strings.Contains(err.Error(), rheo.ErrImmutableEvent.Reason) {
				return rheo.Errorf(rheo.ErrImmutableEvent, "rheo_events rows cannot be updated or deleted")
			}
		case codeBusy, codeLocked:
			// Another connection held the database beyond the busy timeout.
			return unavailable(op, err)
		case codeCantOpen:
			return unavailable(op, err)
		}
	}
	if errors.Is(err, sql.ErrConnDone) || dbClosed(err) {
		return unavailable(op, err)
	}
	return &rheo.FailedError{Op: op, Err: err}
}

// dbClosed reports whether err is, or wraps, database/sql's error for a
// closed *sql.DB, which can only be recognised by its text.
func dbClosed(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == errDBClosedText {
			return true
		}
	}
	return false
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, rheo.ErrBackendUnavailable, err)
}
