package rheo

import (
	"errors"
	"fmt"
)

// Error is one word of Rheo's error vocabulary. Sentinel values of this
// type are compared with errors.Is; drivers wrap them with detail.
type Error struct {
	// Code is the SQLSTATE raised by the PostgreSQL functions ("RH001"…),
	// or "" for driver-side words.
	Code string
	// Reason is the vocabulary word, such as "stale_lease".
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// The error vocabulary of docs/reference.md §10. Drivers return errors that wrap these.
var (
	ErrStreamNotFound        = &Error{Code: "RH001", Reason: "stream_not_found"}
	ErrGroupNotFound         = &Error{Code: "RH002", Reason: "group_not_found"}
	ErrAlreadyExists         = &Error{Code: "RH003", Reason: "already_exists"}
	ErrStaleLease            = &Error{Code: "RH004", Reason: "stale_lease"}
	ErrReceiptMismatch       = &Error{Code: "RH005", Reason: "receipt_mismatch"}
	ErrInvalidPartitionCount = &Error{Code: "RH006", Reason: "invalid_partition_count"}
	ErrInvalidPartition      = &Error{Code: "RH007", Reason: "invalid_partition"}
	ErrConfirmRequired       = &Error{Code: "RH008", Reason: "confirm_required"}
	ErrInvalidReplayOpts     = &Error{Code: "RH009", Reason: "invalid_replay_opts"}
	ErrCursorNotFound        = &Error{Code: "RH010", Reason: "cursor_not_found"}
	ErrInvalidArgument       = &Error{Code: "RH011", Reason: "invalid_argument"}
	ErrImmutableEvent        = &Error{Code: "RH012", Reason: "immutable_event"}

	// ErrBackendUnavailable means the database could not be reached. It
	// is matched by every *UnavailableError.
	ErrBackendUnavailable = &Error{Reason: "backend_unavailable"}
	// ErrAmbiguous is matched by every *AmbiguousError.
	ErrAmbiguous = &Error{Reason: "ambiguous"}
	// ErrFailed is matched by every *FailedError.
	ErrFailed = &Error{Reason: "failed"}
)

var bySQLState = map[string]*Error{}

func init() {
	for _, e := range []*Error{
		ErrStreamNotFound, ErrGroupNotFound, ErrAlreadyExists, ErrStaleLease,
		ErrReceiptMismatch, ErrInvalidPartitionCount, ErrInvalidPartition,
		ErrConfirmRequired, ErrInvalidReplayOpts, ErrCursorNotFound,
		ErrInvalidArgument, ErrImmutableEvent,
	} {
		bySQLState[e.Code] = e
	}
}

// ErrorForSQLState returns the sentinel for a Rheo SQLSTATE ("RH004"), or
// nil when the code is not one of Rheo's.
func ErrorForSQLState(code string) *Error {
	return bySQLState[code]
}

// Errorf wraps a sentinel with a detail message; errors.Is(err, sentinel)
// holds for the result.
func Errorf(sentinel *Error, format string, args ...any) error {
	return &detailError{sentinel: sentinel, detail: fmt.Sprintf(format, args...)}
}

type detailError struct {
	sentinel *Error
	detail   string
}

func (e *detailError) Error() string {
	if e.detail == "" {
		return e.sentinel.Reason
	}
	return e.sentinel.Reason + ": " + e.detail
}

func (e *detailError) Unwrap() error { return e.sentinel }

// AmbiguousError reports an operation whose outcome is unknown: the write
// may or may not have committed (a timeout, or a connection lost after the
// request was sent). errors.Is(err, ErrAmbiguous) holds.
type AmbiguousError struct {
	// Op names the operation, such as "ack".
	Op string
	// Err is the underlying cause.
	Err error
}

func (e *AmbiguousError) Error() string { return fmt.Sprintf("%s: ambiguous: %v", e.Op, e.Err) }

// Unwrap returns the cause.
func (e *AmbiguousError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// FailedError reports an operation that definitely did not take effect for
// a reason outside Rheo's vocabulary. errors.Is(err, ErrFailed) holds.
type FailedError struct {
	// Op names the operation, such as "fetch".
	Op string
	// Kind says what the failure was, where the driver knows.
	Kind Kind
	// Message is what the database said, in its own words and without
	// its error codes; "" when the failure is not the database's.
	Message string
	// Err is the underlying cause.
	Err error
}

func (e *FailedError) Error() string { return fmt.Sprintf("%s: failed: %v", e.Op, e.Err) }

// Unwrap returns the cause.
func (e *FailedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFailed) true.
func (e *FailedError) Is(target error) bool { return target == ErrFailed }

// IsVocabulary reports whether err carries one of Rheo's words: a
// sentinel of this package, an *AmbiguousError, a *FailedError or an
// *UnavailableError.
func IsVocabulary(err error) bool {
	var e *Error
	return errors.As(err, &e) || errors.Is(err, ErrAmbiguous) || errors.Is(err, ErrFailed)
}
