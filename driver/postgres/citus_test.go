package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testcitus"
)

// TestCitusConformance runs the driver conformance suite against Rheo
// installed distributed on a Citus cluster (internal/testcitus): the
// driver on the coordinator, logged in as an application role granted
// rheo_admin, as on a single server.
func TestCitusConformance(t *testing.T) {
	t.Parallel()
	drivertest.Exercise(t, citusHarness(t))
}

// citusHarness installs Rheo in a database of its own on the test
// cluster's coordinator, with an application role that Citus creates on
// every node (testcitus.NewRheo).
func citusHarness(t *testing.T) drivertest.Harness {
	t.Helper()
	ctx := context.Background()
	c := testcitus.Start(t)
	adminURL, appURL := c.NewRheo(t)
	pool, err := pgxpool.New(ctx, adminURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	appPool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(appPool.Close)

	return drivertest.Harness{
		NewDriver: func(tb testing.TB, clock driver.Clock) driver.Driver {
			d := postgres.New(appPool, &postgres.Options{Clock: clock})
			tb.Cleanup(func() { _ = d.Close() })
			return d
		},
		RawWrites: func(ctx context.Context, tb testing.TB, _ driver.Driver, stream string) map[string]error {
			return rawWrites(ctx, pool, stream)
		},
	}
}
