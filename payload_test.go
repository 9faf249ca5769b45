package rheo_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

type placed struct {
	Customer string `json:"customer"`
}

func (placed) EventType() string { return "order.placed" }

type selfTyped struct {
	Type string `json:"type"`
}

func (selfTyped) EventType() string { return "ignored" }

type empty struct{}

func (empty) EventType() string { return "ping" }

func TestJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"an EventTyper's type comes first", placed{Customer: "ana"}, `{"type":"order.placed","customer":"ana"}`},
		{"a type the value encodes is kept", selfTyped{Type: "own"}, `{"type":"own"}`},
		{"an empty object gets its type alone", empty{}, `{"type":"ping"}`},
		{"a value without EventType is encoded as is", map[string]int{"n": 1}, `{"n":1}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := rheo.JSON(c.v)
			require.NoError(t, err)
			assert.JSONEq(t, c.want, string(got))
			assert.True(t, json.Valid(got))
			assert.Equal(t, c.want, string(got), "the members' order")
		})
	}
	for _, c := range []struct {
		name string
		v    any
	}{
		{"an array", []int{1}},
		{"a string", "x"},
		{"null", nil},
		{"a value that does not encode", map[string]any{"f": func() {}}},
	} {
		t.Run(c.name+" is invalid_argument", func(t *testing.T) {
			_, err := rheo.JSON(c.v)
			assert.ErrorIs(t, err, rheo.ErrInvalidArgument)
		})
	}
}
