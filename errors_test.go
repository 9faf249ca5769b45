package rheo_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rheo-go/rheo"
)

func TestErrors(t *testing.T) {
	t.Run("every SQLSTATE maps to its sentinel", func(t *testing.T) {
		for code, want := range map[string]*rheo.Error{
			"RH001": rheo.ErrStreamNotFound, "RH002": rheo.ErrGroupNotFound,
			"RH003": rheo.ErrAlreadyExists, "RH004": rheo.ErrStaleLease,
			"RH005": rheo.ErrReceiptMismatch, "RH006": rheo.ErrInvalidPartitionCount,
			"RH007": rheo.ErrInvalidPartition, "RH008": rheo.ErrConfirmRequired,
			"RH009": rheo.ErrInvalidReplayOpts, "RH010": rheo.ErrCursorNotFound,
			"RH011": rheo.ErrInvalidArgument, "RH012": rheo.ErrImmutableEvent,
		} {
			if got := rheo.ErrorForSQLState(code); got != want {
				t.Errorf("ErrorForSQLState(%s) = %v, want %v", code, got, want)
			}
		}
		if got := rheo.ErrorForSQLState("23505"); got != nil {
			t.Errorf("ErrorForSQLState(23505) = %v, want nil", got)
		}
	})

	t.Run("a detail error matches its sentinel and reads reason: detail", func(t *testing.T) {
		err := fmt.Errorf("ack lease x: %w", rheo.Errorf(rheo.ErrStaleLease, "lease %s is no longer held", "x"))
		if !errors.Is(err, rheo.ErrStaleLease) || errors.Is(err, rheo.ErrGroupNotFound) {
			t.Fatalf("errors.Is mismatch for %v", err)
		}
		if got, want := err.Error(), "ack lease x: stale_lease: lease x is no longer held"; got != want {
			t.Errorf("message = %q, want %q", got, want)
		}
	})

	t.Run("ambiguous and failed errors wrap their cause", func(t *testing.T) {
		cause := errors.New("connection reset")
		amb := error(&rheo.AmbiguousError{Op: "ack", Err: cause})
		failed := error(&rheo.FailedError{Op: "fetch", Err: cause})
		if !errors.Is(amb, rheo.ErrAmbiguous) || !errors.Is(amb, cause) || errors.Is(amb, rheo.ErrFailed) {
			t.Errorf("ambiguous error does not match as expected: %v", amb)
		}
		if !errors.Is(failed, rheo.ErrFailed) || !errors.Is(failed, cause) || errors.Is(failed, rheo.ErrAmbiguous) {
			t.Errorf("failed error does not match as expected: %v", failed)
		}
		for _, err := range []error{amb, failed, rheo.ErrStaleLease, rheo.Errorf(rheo.ErrBackendUnavailable, "down")} {
			if !rheo.IsVocabulary(err) {
				t.Errorf("IsVocabulary(%v) = false", err)
			}
		}
		if rheo.IsVocabulary(cause) {
			t.Errorf("IsVocabulary(%v) = true for a raw error", cause)
		}
	})
}

func TestPartitionForKey(t *testing.T) {
	// Values computed by PostgreSQL:
	// ('x' || substr(md5(key), 1, 8))::bit(32)::bigint % n
	for _, tc := range []struct {
		key  string
		n    int
		want int
	}{
		{"hello", 1000, 354},
		{"hello", 1, 0},
	} {
		if got := rheo.PartitionForKey(tc.key, tc.n); got != tc.want {
			t.Errorf("PartitionForKey(%q, %d) = %d, want %d", tc.key, tc.n, got, tc.want)
		}
	}
}
