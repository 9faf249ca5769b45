package rheootel

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/trace"
)

func TestWithCreationContext(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	const tp = `"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`
	for _, tc := range []struct{ name, in, want string }{
		{"nil metadata", "", "{" + tp + "}"},
		{"an empty object", ` { } `, "{" + tp + "}"},
		{"the caller's keys and formatting are kept", `{ "a" : [1, 2],"b":{"c":null} }`, `{ "a" : [1, 2],"b":{"c":null} ,` + tp + "}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := withCreationContext(json.RawMessage(tc.in), sc)
			assert.Equal(t, tc.want, string(got))
			assert.True(t, json.Valid(got))
			back := creationContext(got)
			assert.Equal(t, sc.TraceID(), back.TraceID())
			assert.Equal(t, sc.SpanID(), back.SpanID())
		})
	}

	t.Run("a trace state is stored too", func(t *testing.T) {
		ts, err := trace.ParseTraceState("vendor=x")
		assert.NoError(t, err)
		got := withCreationContext(nil, sc.WithTraceState(ts))
		assert.Equal(t, "{"+tp+`,"tracestate":"vendor=x"}`, string(got))
		assert.Equal(t, "vendor=x", creationContext(got).TraceState().String())
	})

	t.Run("an invalid span context adds nothing", func(t *testing.T) {
		assert.Equal(t, `{"a":1}`, string(withCreationContext(json.RawMessage(`{"a":1}`), trace.SpanContext{})))
	})
}

func TestLeaseTable(t *testing.T) {
	lt := &leaseTable{m: map[string]leaseEntry{}}
	now := time.Now()
	lt.put("old", leaseEntry{forgetAt: now.Add(time.Second)}, now)
	lt.put("renewed", leaseEntry{forgetAt: now.Add(time.Second)}, now)
	lt.extend("renewed", now.Add(time.Minute))
	lt.put("settled", leaseEntry{forgetAt: now.Add(time.Minute)}, now)
	lt.forget("settled")
	assert.Equal(t, 2, lt.size())

	// The next put after sweepEvery drops what ran out of time.
	later := now.Add(sweepEvery + 2*time.Second)
	lt.put("new", leaseEntry{forgetAt: later.Add(time.Second)}, later)
	_, old := lt.get("old")
	_, renewed := lt.get("renewed")
	assert.False(t, old, "a lease neither settled nor renewed is forgotten")
	assert.True(t, renewed, "a renewed lease is kept")
	assert.Equal(t, 2, lt.size())
}
