package main

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/stretchr/testify/require"
)

// TestDriverParameters checks that the URL parameters of driver/postgres,
// which an application's DATABASE_URL may carry, are not sent to the
// server, which would refuse them as unknown settings.
func TestDriverParameters(t *testing.T) {
	direct := testdb.NewDatabase(t)
	u, err := url.Parse(direct)
	require.NoError(t, err)
	q := u.Query()
	q.Set("rheo_poll_only", "true")
	q.Set("rheo_listen_url", direct)
	u.RawQuery = q.Encode()
	runCmd(t, "status", "--database-url", u.String()).wantPending(t,
		fmt.Sprintf("schema: version 0 of %d", schemaVersions(t)),
		"functions: not current",
		"status: pending, run rheo-migrate up")
}
