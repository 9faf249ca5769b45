package dashboard_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/internal/testcitus"
)

// TestCitusStreamsPage shows the stream list of a Citus cluster: a Node
// column names the worker that holds each stream. A single server's list
// has no such column (TestDashboard's pages).
func TestCitusStreamsPage(t *testing.T) {
	t.Parallel()
	c := testcitus.Start(t)
	_, appURL := c.NewRheo(t)
	drv, err := connect.Open(context.Background(), appURL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { drv.Close() })
	require.NoError(t, drv.CreateStream(context.Background(), "orders", 2))
	streams, err := drv.ListStreams(context.Background())
	require.NoError(t, err)
	require.Len(t, streams, 1)
	require.NotEmpty(t, streams[0].Node)

	bn := setup(t, drv, nil)
	code, body := bn.get(t, "/")
	require.Equal(t, http.StatusOK, code, "GET /: %d\n%s", code, body)
	wantContains(t, "the stream list", body, "<th>Node</th>", `<td data-field="node">`+streams[0].Node+`</td>`)
}

// TestStreamsPageWithoutNodes checks that a single server's stream list
// has no Node column.
func TestStreamsPageWithoutNodes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		require.NoError(t, b.drv.CreateStream(context.Background(), "orders", 1))
		bn := setup(t, b.drv, nil)
		code, body := bn.get(t, "/")
		require.Equal(t, http.StatusOK, code, "GET /: %d\n%s", code, body)
		assert.NotContains(t, body, "<th>Node</th>")
	})
}
