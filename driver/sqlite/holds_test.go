package sqlite

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTurn(t *testing.T) {
	const now = 1000
	for _, tc := range []struct {
		name      string
		fresh     int64
		lowest    *inProgress
		wantFresh int64
		wantDue   []claim
	}{
		{"no delivery in progress: the event at the cursor", 5, nil, 1, nil},
		{"no delivery and no event: nothing", 0, nil, 0, nil},
		{"a delivery in progress not due: nothing", 5, &inProgress{sequence: 3, attempt: 1, expiresAt: now + 1}, 0, nil},
		{"a delivery due: it again, with its next attempt", 5, &inProgress{sequence: 3, attempt: 2, expiresAt: now},
			0, []claim{{partition: 7, sequence: 3, attempt: 3}}},
		{"a retry due (attempt 0, blocked before): its first lease", 0, &inProgress{sequence: 9, attempt: 0, expiresAt: 1},
			0, []claim{{partition: 7, sequence: 9, attempt: 1}}},
	} {
		fresh, due := turn(7, tc.fresh, tc.lowest, now)
		require.Equal(t, tc.wantFresh, fresh, tc.name)
		require.Equal(t, tc.wantDue, due, tc.name)
	}
}

// key is a walked event's key: "" for none.
func key(k string) sql.NullString { return sql.NullString{String: k, Valid: k != ""} }

func TestWalk(t *testing.T) {
	type event struct {
		sequence      int64
		key           string
		keyInProgress bool
	}
	for _, tc := range []struct {
		name          string
		events        []event
		take          int
		wantTaken     []int64
		wantBlocked   []int64
		wantNext      int64
		wantCandidate []int64
	}{
		{
			name:          "events without a key are all candidates",
			events:        []event{{10, "", false}, {11, "", false}, {12, "", false}},
			take:          2,
			wantCandidate: []int64{10, 11, 12},
			wantTaken:     []int64{10, 11},
			wantNext:      12,
		},
		{
			name:          "a key's later events wait behind its first",
			events:        []event{{10, "a", false}, {11, "a", false}, {12, "b", false}, {13, "a", false}},
			take:          2,
			wantCandidate: []int64{10, 12},
			wantTaken:     []int64{10, 12},
			wantBlocked:   []int64{11, 13},
			wantNext:      14,
		},
		{
			name:          "a key with a delivery in progress blocks all its events",
			events:        []event{{5, "a", true}, {6, "b", false}, {7, "a", true}},
			take:          1,
			wantCandidate: []int64{6},
			wantTaken:     []int64{6},
			wantBlocked:   []int64{5, 7},
			wantNext:      8,
		},
		{
			name:          "the cursor stops at the first candidate not taken, and the blocked events it passes go with it",
			events:        []event{{1, "a", false}, {2, "a", false}, {3, "b", false}, {4, "b", false}, {5, "c", false}},
			take:          1,
			wantCandidate: []int64{1, 3, 5},
			wantTaken:     []int64{1},
			wantBlocked:   []int64{2},
			wantNext:      3,
		},
		{
			name:          "taking none passes nothing",
			events:        []event{{1, "a", true}, {2, "b", false}},
			take:          0,
			wantCandidate: []int64{2},
			wantBlocked:   []int64{1},
			wantNext:      2,
		},
	} {
		wk := &walk{end: tc.events[0].sequence, held: map[string]bool{}}
		for _, e := range tc.events {
			wk.visit(claim{partition: 0, sequence: e.sequence, attempt: 1}, key(e.key), e.keyInProgress)
		}
		require.Equal(t, tc.events[len(tc.events)-1].sequence+1, wk.end, tc.name)
		require.Equal(t, tc.wantCandidate, claimSequences(wk.candidates), tc.name)
		taken, blocked, next := wk.take(tc.take)
		require.Equal(t, tc.wantTaken, claimSequences(taken), tc.name)
		require.Equal(t, tc.wantBlocked, claimSequences(blocked), tc.name)
		require.Equal(t, tc.wantNext, next, tc.name)
	}
}

// claimSequences returns the sequences of claims, nil for none.
func claimSequences(claims []claim) []int64 {
	var out []int64
	for _, c := range claims {
		out = append(out, c.sequence)
	}
	return out
}
