package testcitus

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/migrate"
)

// NewRheo returns a database of NewDatabase with Rheo installed
// distributed, as rheo-migrate up installs it on a coordinator, and an
// application role granted rheo_admin, which Citus makes on every node:
// the URL of the database as the superuser, and as the role. The role
// is dropped when t ends.
func (c *Cluster) NewRheo(t testing.TB) (adminURL, appURL string) {
	t.Helper()
	ctx := context.Background()
	adminURL = c.NewDatabase(t)
	conn, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	require.NoError(t, migrate.Postgres(ctx, conn, nil), "install Rheo on the Citus cluster")
	app := "rheo_test_role_" + randomSuffix()
	ident := pgx.Identifier{app}.Sanitize()
	_, err = conn.Exec(ctx, "CREATE ROLE "+ident+" LOGIN")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "GRANT rheo_admin TO "+ident)
	require.NoError(t, err)
	t.Cleanup(func() {
		// In the database, before it is dropped (cleanups run last
		// first), where Citus drops the role on every node too.
		err := execSQL(context.WithoutCancel(ctx), adminURL, "DROP ROLE IF EXISTS "+ident)
		assert.NoErrorf(t, err, "drop the test role %s", app)
	})
	return adminURL, testdb.AsRole(t, adminURL, app)
}
