package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testcitus"
)

// TestCLICitusStreams lists streams on a Citus cluster: the table gains
// a NODE column naming the worker that holds each stream, and the JSON
// a "node" field.
func TestCLICitusStreams(t *testing.T) {
	t.Parallel()
	c := testcitus.Start(t)
	_, appURL := c.NewRheo(t)
	b := &cliBackend{url: appURL}
	b.ok(t, "create-stream", "orders", "--partitions", "2")

	got := cliJSON[[]rheo.StreamSummary](t, b.ok(t, "streams", "--output", "json"))
	require.Len(t, got, 1)
	workers := make([]string, len(c.Workers))
	for i, w := range c.Workers {
		workers[i] = w.Addr()
	}
	assert.Contains(t, workers, got[0].Node, "orders is held by a worker")
	table := b.ok(t, "streams")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	require.Len(t, lines, 2, "streams table:\n%s", table)
	assert.Equal(t, []string{"STREAM", "PARTITIONS", "CREATED_AT", "NODE"}, strings.Fields(lines[0]))
	assert.True(t, strings.HasPrefix(lines[1], "orders  2  "), "streams table:\n%s", table)
	assert.True(t, strings.HasSuffix(lines[1], "  "+got[0].Node), "streams table:\n%s", table)
}
