package sqlite

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func TestRetryOf(t *testing.T) {
	const now = 5_000_000
	for _, tc := range []struct {
		name                 string
		attempt, maxAttempts int
		reason               string
		delayMS              int64
		want                 retryDecision
	}{
		{"below the limit: retrying after the delay", 1, 3, "boom", 250,
			retryDecision{rheo.Retrying, sql.NullString{String: "boom", Valid: true}, now + 250_000}},
		{"an empty reason is stored as none", 2, 3, "", 0,
			retryDecision{rheo.Retrying, sql.NullString{}, now}},
		{"at the limit: dead-lettered with the reason", 3, 3, "boom", 250,
			retryDecision{rheo.DeadLettered, sql.NullString{String: "boom", Valid: true}, 0}},
		{"at the limit an empty reason is max_attempts", 3, 3, "", 0,
			retryDecision{rheo.DeadLettered, sql.NullString{String: "max_attempts", Valid: true}, 0}},
		{"past the limit (lowered since the lease): dead-lettered", 4, 2, "", 0,
			retryDecision{rheo.DeadLettered, sql.NullString{String: "max_attempts", Valid: true}, 0}},
	} {
		require.Equal(t, tc.want, retryOf(tc.attempt, tc.maxAttempts, tc.reason, now, tc.delayMS), tc.name)
	}
}
