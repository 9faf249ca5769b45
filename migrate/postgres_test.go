package migrate

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDollarQuote(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"plain text keeps the tag", "SELECT 1;", "$q$\nSELECT 1;\n$q$"},
		{"other dollar quotes are left alone", "AS $$ SELECT 1 $$;", "$q$\nAS $$ SELECT 1 $$;\n$q$"},
		{"a body holding the tag gets another one", "AS $q$ x $q$;", "$q_1$\nAS $q$ x $q$;\n$q_1$"},
		{"a body holding both tags gets a third", "$q$ $q_1$", "$q_2$\n$q$ $q_1$\n$q_2$"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dollarQuote(tt.body, "q")
			require.Equal(t, tt.want, got, "dollarQuote(%q) = %q, want %q", tt.body, got, tt.want)
		})
	}
}

func TestParseSteps(t *testing.T) {
	steps, err := parseSteps(`-- the first step
CREATE TABLE a ();

-- the second step's comment
-- rheo:step concurrently
CREATE INDEX CONCURRENTLY b ON a ((1));
-- rheo:step
-- only a comment
-- rheo:step batch
SELECT n FROM f() AS n WHERE n > 0;
`)
	require.NoError(t, err)
	want := []step{
		{stepTx, "-- the first step\nCREATE TABLE a ();"},
		{stepConcurrently, "-- the second step's comment\nCREATE INDEX CONCURRENTLY b ON a ((1));"},
		{stepBatch, "-- only a comment\nSELECT n FROM f() AS n WHERE n > 0;"},
	}
	require.Len(t, steps, len(want), "steps %q, want %q", steps, want)
	for i := range want {
		assert.Equal(t, want[i], steps[i], "step %d = %q, want %q", i, steps[i], want[i])
	}
	_, err = parseSteps("-- rheo:step sometimes\nSELECT 1;")
	assert.Error(t, err, "an unknown kind of step was accepted")
}

func TestHandOverRelations(t *testing.T) {
	require.NotEqual(t, handOverSQL, handOverRelationsSQL, "handOverRelationsSQL still hands the routines over:\n%s", handOverRelationsSQL)
	require.NotContains(t, handOverRelationsSQL, "ROUTINE", "handOverRelationsSQL still hands the routines over:\n%s", handOverRelationsSQL)
}

// TestRetryable says which errors a step runs again for: a lock it gave
// up on, a deadlock, a serialization failure, and a catalog row that a
// run in another database changed at the same time; nothing else.
func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "55P03"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "XX000", Message: "tuple concurrently updated"}, true},
		{&pgconn.PgError{Code: "XX000", Message: "cache lookup failed for relation 1"}, false},
		{&pgconn.PgError{Code: "42501", Message: "permission denied for schema rheo"}, false},
		{fmt.Errorf("step: %w", &pgconn.PgError{Code: "40P01"}), true},
		{errors.New("connection refused"), false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
