package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testcitus"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/migrate"
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
// cluster's coordinator and makes an application role, which Citus
// creates on every node.
func citusHarness(t *testing.T) drivertest.Harness {
	t.Helper()
	ctx := context.Background()
	c := testcitus.Start(t)
	url := c.NewDatabase(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	require.NoError(t, migrate.Postgres(ctx, conn, nil))

	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	app := "rheo_test_role_" + hex.EncodeToString(suffix)
	ident := pgx.Identifier{app}.Sanitize()
	_, err = conn.Exec(ctx, "CREATE ROLE "+ident+" LOGIN")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "GRANT rheo_admin TO "+ident)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := conn.Exec(context.WithoutCancel(ctx), "DROP OWNED BY "+ident+"; DROP ROLE "+ident)
		assert.NoError(t, err, "drop the application role")
	})
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	appPool, err := pgxpool.New(ctx, testdb.AsRole(t, url, app))
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
