package rheo_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func TestLineage(t *testing.T) {
	t.Run("WithLineage sets the non-zero fields and keeps the other keys", func(t *testing.T) {
		got, err := rheo.WithLineage(json.RawMessage(`{"tenant": "acme", "producer": "old"}`), rheo.Lineage{
			CorrelationID: "c-1", Producer: "billing", Schema: "invoice", SchemaVersion: 3,
		})
		require.NoError(t, err)
		require.JSONEq(t, `{"tenant": "acme", "producer": "billing", "correlation_id": "c-1",
			"schema": "invoice", "schema_version": 3}`, string(got))
	})

	t.Run("nil and blank metadata count as an empty object", func(t *testing.T) {
		for _, m := range []json.RawMessage{nil, json.RawMessage(" ")} {
			got, err := rheo.WithLineage(m, rheo.Lineage{CausationID: "e-1"})
			require.NoError(t, err)
			require.JSONEq(t, `{"causation_id": "e-1"}`, string(got))
		}
	})

	t.Run("LineageOf reads what WithLineage wrote", func(t *testing.T) {
		want := rheo.Lineage{CorrelationID: "c", CausationID: "e", Producer: "p", Schema: "s", SchemaVersion: 2}
		m, err := rheo.WithLineage(json.RawMessage(`{"other": [1, 2]}`), want)
		require.NoError(t, err)
		got, err := rheo.LineageOf(m)
		require.NoError(t, err)
		require.Equal(t, want, got)
	})

	t.Run("absent keys and JSON nulls are zero fields", func(t *testing.T) {
		got, err := rheo.LineageOf(json.RawMessage(`{"correlation_id": null, "producer": "p"}`))
		require.NoError(t, err)
		require.Equal(t, rheo.Lineage{Producer: "p"}, got)
	})

	t.Run("metadata that is not an object is invalid_argument", func(t *testing.T) {
		for _, m := range []string{`[]`, `"x"`, `null`, `{`, `1`} {
			_, err := rheo.LineageOf(json.RawMessage(m))
			require.ErrorIs(t, err, rheo.ErrInvalidArgument, m)
			_, err = rheo.WithLineage(json.RawMessage(m), rheo.Lineage{Producer: "p"})
			require.ErrorIs(t, err, rheo.ErrInvalidArgument, m)
		}
	})

	t.Run("a lineage key of the wrong JSON type is invalid_argument", func(t *testing.T) {
		for _, m := range []string{`{"correlation_id": 7}`, `{"causation_id": {}}`, `{"schema_version": "2"}`,
			`{"schema_version": 1.5}`} {
			_, err := rheo.LineageOf(json.RawMessage(m))
			require.ErrorIs(t, err, rheo.ErrInvalidArgument, m)
		}
	})

	t.Run("Metadata holds only the non-zero fields", func(t *testing.T) {
		require.JSONEq(t, `{"correlation_id": "c"}`, string(rheo.Lineage{CorrelationID: "c"}.Metadata()))
		require.JSONEq(t, `{}`, string(rheo.Lineage{}.Metadata()))
	})
}

func TestCausedBy(t *testing.T) {
	t.Run("a child keeps the parent's correlation id and is caused by the parent", func(t *testing.T) {
		parent := rheo.Event{ID: "e-2", Metadata: json.RawMessage(`{"correlation_id": "c-1", "causation_id": "e-1", "producer": "orders"}`)}
		got, err := rheo.CausedBy(parent, json.RawMessage(`{"producer": "billing"}`))
		require.NoError(t, err)
		require.JSONEq(t, `{"correlation_id": "c-1", "causation_id": "e-2", "producer": "billing"}`, string(got))
	})

	t.Run("the child of a parent without correlation id is correlated by the parent's id", func(t *testing.T) {
		parent := rheo.Event{ID: "e-1", Metadata: json.RawMessage(`{}`)}
		got, err := rheo.CausedBy(parent, nil)
		require.NoError(t, err)
		require.JSONEq(t, `{"correlation_id": "e-1", "causation_id": "e-1"}`, string(got))
	})

	t.Run("lineage in the child's own metadata is replaced", func(t *testing.T) {
		parent := rheo.Event{ID: "e-1", Metadata: json.RawMessage(`{"correlation_id": "c-1"}`)}
		got, err := rheo.CausedBy(parent, json.RawMessage(`{"correlation_id": "stale", "causation_id": "stale"}`))
		require.NoError(t, err)
		require.JSONEq(t, `{"correlation_id": "c-1", "causation_id": "e-1"}`, string(got))
	})

	t.Run("a parent without id or with malformed metadata is invalid_argument", func(t *testing.T) {
		_, err := rheo.CausedBy(rheo.Event{Metadata: json.RawMessage(`{}`)}, nil)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		_, err = rheo.CausedBy(rheo.Event{ID: "e", Metadata: json.RawMessage(`{"correlation_id": 1}`)}, nil)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})
}

// ExampleCausedBy builds the metadata of an event caused by another and
// the filter that finds the whole conversation.
func ExampleCausedBy() {
	placed := rheo.Event{ID: "evt-1", Metadata: rheo.Lineage{CorrelationID: "order-42", Producer: "shop"}.Metadata()}

	paid, err := rheo.CausedBy(placed, rheo.Lineage{Producer: "billing"}.Metadata())
	if err != nil {
		panic(err)
	}
	fmt.Println(string(paid))

	lineage, err := rheo.LineageOf(paid)
	if err != nil {
		panic(err)
	}
	fmt.Printf("caused by %s in %s\n", lineage.CausationID, lineage.CorrelationID)

	conversation := rheo.Query{Metadata: rheo.Lineage{CorrelationID: lineage.CorrelationID}.Metadata()}
	filter, err := conversation.Filter()
	if err != nil {
		panic(err)
	}
	fmt.Println(string(filter))
	// Output:
	// {"causation_id":"evt-1","correlation_id":"order-42","producer":"billing"}
	// caused by evt-1 in order-42
	// {"metadata":{"correlation_id":"order-42"}}
}
