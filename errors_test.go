package rheo_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			got := rheo.ErrorForSQLState(code)
			assert.Equal(t, want, got, "ErrorForSQLState(%s) = %v, want %v", code, got, want)
		}
		got := rheo.ErrorForSQLState("23505")
		assert.Nil(t, got, "ErrorForSQLState(23505) = %v, want nil", got)
	})

	t.Run("a detail error matches its sentinel and reads reason: detail", func(t *testing.T) {
		err := fmt.Errorf("ack lease x: %w", rheo.Errorf(rheo.ErrStaleLease, "lease %s is no longer held", "x"))
		require.ErrorIs(t, err, rheo.ErrStaleLease, "errors.Is mismatch for %v", err)
		require.NotErrorIs(t, err, rheo.ErrGroupNotFound, "errors.Is mismatch for %v", err)
		got, want := err.Error(), "ack lease x: stale_lease: lease x is no longer held"
		assert.Equal(t, want, got, "message = %q, want %q", got, want)
	})

	t.Run("ambiguous and failed errors wrap their cause", func(t *testing.T) {
		cause := errors.New("connection reset")
		amb := error(&rheo.AmbiguousError{Op: "ack", Err: cause})
		failed := error(&rheo.FailedError{Op: "fetch", Err: cause})
		assert.ErrorIs(t, amb, rheo.ErrAmbiguous, "ambiguous error does not match as expected: %v", amb)
		assert.ErrorIs(t, amb, cause, "ambiguous error does not match as expected: %v", amb)
		assert.NotErrorIs(t, amb, rheo.ErrFailed, "ambiguous error does not match as expected: %v", amb)
		assert.ErrorIs(t, failed, rheo.ErrFailed, "failed error does not match as expected: %v", failed)
		assert.ErrorIs(t, failed, cause, "failed error does not match as expected: %v", failed)
		assert.NotErrorIs(t, failed, rheo.ErrAmbiguous, "failed error does not match as expected: %v", failed)
		for _, err := range []error{amb, failed, rheo.ErrStaleLease, rheo.Errorf(rheo.ErrBackendUnavailable, "down")} {
			assert.True(t, rheo.IsVocabulary(err), "IsVocabulary(%v) = false", err)
		}
		assert.False(t, rheo.IsVocabulary(cause), "IsVocabulary(%v) = true for a raw error", cause)
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
		got := rheo.PartitionForKey(tc.key, tc.n)
		assert.Equal(t, tc.want, got, "PartitionForKey(%q, %d) = %d, want %d", tc.key, tc.n, got, tc.want)
	}
}
