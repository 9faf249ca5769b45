package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
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
	code, hasCode := resultCode(err)
	if hasCode {
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
			return unavailable(op, rheo.KindLockTimeout, err)
		case codeCantOpen:
			return unavailable(op, rheo.KindUnknown, err)
		}
	}
	if errors.Is(err, sql.ErrConnDone) || dbClosed(err) {
		return unavailable(op, rheo.KindConnectionLost, err)
	}
	kind := rheo.KindUnknown
	switch {
	case hasCode:
		kind = codeKind(code, err)
	case errors.Is(err, context.DeadlineExceeded):
		kind = rheo.KindTimeout
	case errors.Is(err, context.Canceled):
		kind = rheo.KindCanceled
	}
	return &rheo.FailedError{Op: op, Kind: kind, Message: message(err, hasCode), Err: err}
}

// codeKind returns the kind of an SQLite error with the primary result
// code code.
func codeKind(code int, err error) rheo.Kind {
	switch code {
	case codeReadOnly:
		return rheo.KindReadOnly
	case codeNoMem, codeFull:
		return rheo.KindOutOfResources
	case codeAuth, codePerm:
		return rheo.KindPermissionDenied
	case codeError:
		// The statement names what the database lacks: an SQLite file
		// with another schema, or a half-applied one.
		text := err.Error()
		if strings.Contains(text, "no such table") || strings.Contains(text, "no such column") ||
			strings.Contains(text, "no such function") {
			return rheo.KindSchemaMissing
		}
	}
	return rheo.KindUnknown
}

// codeSuffix is how modernc.org/sqlite ends its messages: the result code
// in parentheses, and the code's name.
var codeSuffix = regexp.MustCompile(`(\s*\((\d+|SQLITE_[A-Z_]+)\))+$`)

// errstrs are SQLite's texts of the result codes (sqlite3_errstr) that
// modernc.org/sqlite puts before the statement's own message.
var errstrs = []string{
	"SQL logic error", "constraint failed", "database is locked", "database table is locked",
	"attempt to write a readonly database", "database or disk is full", "out of memory",
	"unable to open database file", "file is not a database", "access permission denied",
	"authorization denied",
}

// message is SQLite's own words of err, without modernc.org/sqlite's
// codes and generic prefix; "" for an error that is not SQLite's.
func message(err error, isSQLite bool) string {
	if !isSQLite {
		return ""
	}
	msg := codeSuffix.ReplaceAllString(err.Error(), "")
	for _, prefix := range errstrs {
		if rest, ok := strings.CutPrefix(msg, prefix+": "); ok {
			return rest
		}
	}
	return msg
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

func unavailable(op string, kind rheo.Kind, err error) error {
	_, isSQLite := resultCode(err)
	return &rheo.UnavailableError{Op: op, Kind: kind, Message: message(err, isSQLite), Err: err}
}
