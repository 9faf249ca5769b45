package rheo_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func TestQueryFilter(t *testing.T) {
	t.Run("the zero query has an empty filter", func(t *testing.T) {
		got, err := rheo.Query{MaxCount: 5, After: "c", Descending: true}.Filter()
		require.NoError(t, err)
		require.JSONEq(t, `{}`, string(got))
	})

	t.Run("every filter that is set is written under its SQL name", func(t *testing.T) {
		p, until := 2, int64(9)
		from := time.Date(2030, 1, 1, 1, 0, 0, 123456789, time.FixedZone("x", 3600))
		to := from.Add(time.Hour)
		got, err := rheo.Query{
			Type: "t", Key: "k", Partition: &p,
			Payload: json.RawMessage(`{"a": [1, {"b": 1.0}]}`), Metadata: json.RawMessage(`{"correlation_id": "c"}`),
			From: &from, To: &to, AfterSequence: 3, UntilSequence: &until,
		}.Filter()
		require.NoError(t, err)
		require.JSONEq(t, `{"type": "t", "key": "k", "partition": 2,
			"payload": {"a": [1, {"b": 1.0}]}, "metadata": {"correlation_id": "c"},
			"from": "2030-01-01T00:00:00.123456Z", "to": "2030-01-01T01:00:00.123456Z",
			"after_sequence": 3, "until_sequence": 9}`, string(got),
			"times in UTC, cut to whole microseconds")
	})

	t.Run("payload or metadata that is not JSON is invalid_argument", func(t *testing.T) {
		_, err := rheo.Query{Payload: json.RawMessage(`{`)}.Filter()
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		_, err = rheo.Query{Metadata: json.RawMessage(`nope`)}.Filter()
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})
}
