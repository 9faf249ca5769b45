package sqlite

import (
	"encoding/json"
	"testing"

	"github.com/rheo-go/rheo/driver/driverutil"
	"github.com/stretchr/testify/require"
)

// PostgreSQL compares and extracts JSON natively; these helpers are the
// SQLite driver's own, so they are checked here against what jsonb does.

func TestJSONEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		equal bool
	}{
		{`{"a": 1, "b": [1, 2]}`, `{"b":[1,2],"a":1}`, true},
		{`{"a": 1}`, `{"a": 1.0}`, true},
		{`{"a": 100}`, `{"a": 1e2}`, true},
		{`{"a": 0.5}`, `{"a": 5E-1}`, true},
		{`{"a": -0}`, `{"a": 0.00}`, true},
		{`{"a": 12345678901234567890}`, `{"a": 12345678901234567891}`, false},
		{`{"a": 1, "a": 2}`, `{"a": 2}`, true},
		{`{"a": [1, 2]}`, `{"a": [2, 1]}`, false},
		{`{"a": "1"}`, `{"a": 1}`, false},
		{`{"a": null}`, `{}`, false},
		{`{"a": {"b": true}}`, `{"a": {"b": true, "c": 1}}`, false},
	} {
		require.Equal(t, tc.equal, driverutil.JSONEqual([]byte(tc.a), []byte(tc.b)), "%s vs %s", tc.a, tc.b)
	}
}

func TestPayloadKey(t *testing.T) {
	for payload, key := range map[string]string{
		`{"key": "k1"}`:         "k1",
		`{"key": "a\"b"}`:       `a"b`,
		`{"key": null}`:         "",
		`{"other": "k1"}`:       "",
		`{"key": 42}`:           "42",
		`{"key": true}`:         "true",
		`{"Key": "no", "x": 1}`: "",
	} {
		require.Equal(t, key, driverutil.PayloadKey(json.RawMessage(payload)), payload)
	}
}
