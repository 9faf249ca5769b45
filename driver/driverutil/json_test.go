package driverutil

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHasNULEscape(t *testing.T) {
	require.True(t, hasNULEscape([]byte(`{"a": "x\u0000"}`)))
	require.False(t, hasNULEscape([]byte(`{"a": "x\\u0000"}`)), "an escaped backslash, then text")
	require.False(t, hasNULEscape([]byte(`{"a": "\u0001"}`)))
}

// The values below were checked against PostgreSQL 15's jsonb input.
func TestJSONBProblem(t *testing.T) {
	for _, tc := range []struct {
		value   string
		refused bool
	}{
		{`"\ud83d\ude00"`, false},
		{`"\\ud800"`, false},
		{`"\u00e9\ud800\udc00x"`, false},
		{`"\ud800"`, true},
		{`"\udc00"`, true},
		{`"\ud800x"`, true},
		{`"\ud800\u0041"`, true},
		{`"\ud800\n"`, true},
		{`"\ud800\ud800\udc00"`, true},
		{`"\ude00\ud83d"`, true},
		{`1e131071`, false},
		{`9.9e131071`, false},
		{`12345678901234567890e131052`, false},
		{`123456.7e131066`, false},
		{`1e-16383`, false},
		{`0.5e-16382`, false},
		{`0.00e-16381`, false},
		{`0e1073741822`, false},
		{`0e1000000`, false},
		{`1e-0000000000000000016383`, false},
		{`-0`, false},
		{`1e131072`, true},
		{`-1e131072`, true},
		{`123456.7e131067`, true},
		{`1e-16384`, true},
		{`0.5e-16383`, true},
		{`0.00e-16382`, true},
		{`0.0e-99999999`, true},
		{`0e1073741823`, true},
		{`0e-1073741822`, true},
		{`1e1073741822`, true},
		{`1e99999999999999999999`, true},
	} {
		doc := []byte(`{"k": [` + tc.value + `, "after"]}`)
		require.Equal(t, tc.refused, jsonbProblem(doc) != "", tc.value)
	}
}

func TestJSONDeeperThan(t *testing.T) {
	require.False(t, jsonDeeperThan([]byte(`{}`), 1))
	require.True(t, jsonDeeperThan([]byte(`{"a": []}`), 1))
	require.False(t, jsonDeeperThan([]byte(`{"a": "[[[[{{{{"}`), 1), "brackets in strings do not count")
	require.False(t, jsonDeeperThan([]byte(`{"a": "\"[["}`), 1), "nor after an escaped quote")
	require.True(t, jsonDeeperThan([]byte(`[1, [2, [3]]]`), 2))
	require.False(t, jsonDeeperThan([]byte(`[[1], [2], [3]]`), 2), "depth, not count")
}
