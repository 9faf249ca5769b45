package migrate_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testcitus"
	"github.com/rheo-go/rheo/migrate"
)

// TestCitusConvert converts a single-server install in place, as
// docs/citus.md says: Rheo installed and in use on a server without
// Citus, then the citus extension created and the workers added, then
// rheo-migrate up again. The log, the groups and a lease in flight come
// through: the events are all there, on the workers, and immutable; the
// lease in flight settles, and the group goes on from where it was.
func TestCitusConvert(t *testing.T) {
	c := testcitus.Start(t)
	url := c.NewDatabase(t)
	ctx := context.Background()
	conn := migrateConnect(t, url)
	_, err := conn.Exec(ctx, `DROP EXTENSION citus`)
	require.NoError(t, err)
	require.NoError(t, migrate.Postgres(ctx, conn, nil))
	for _, call := range []string{
		`SELECT rheo.create_stream('orders', 4)`,
		`SELECT rheo.create_group('orders', 'billing')`,
		`SELECT count(*) FROM rheo.append_batch('orders',
			(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 100) n),
			keys => (SELECT array_agg('k' || n % 10) FROM generate_series(1, 100) n))`,
	} {
		_, err := conn.Exec(ctx, call)
		require.NoError(t, err, call)
	}
	var lease string
	require.NoError(t, conn.QueryRow(ctx, `SELECT lease_id::text FROM rheo.fetch('orders', 'billing', max_count => 1)`).Scan(&lease))
	var acked int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(rheo.ack(lease_id)) FROM rheo.fetch('orders', 'billing', max_count => 10)`).Scan(&acked))
	require.Equal(t, int64(10), acked)
	var lagBefore int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT sum(lag) FROM rheo.lag('orders', 'billing')`).Scan(&lagBefore))

	_, err = conn.Exec(ctx, `CREATE EXTENSION citus`)
	require.NoError(t, err)
	c.Register(t, url)
	require.NoError(t, migrate.Postgres(ctx, conn, nil))

	var distributed bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'rheo.events'::regclass)`).Scan(&distributed))
	require.True(t, distributed, "rheo.events is distributed after the conversion")
	var onCoordinator int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM citus_shards
		WHERE table_name = 'rheo.events'::regclass AND nodeport = $1`, c.Coordinator.Port).Scan(&onCoordinator))
	assert.Zero(t, onCoordinator, "the events' shards are on the workers")
	var events int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM rheo.events WHERE stream = 'orders'`).Scan(&events))
	assert.Equal(t, int64(100), events, "every event came through")
	for _, raw := range []string{`DELETE FROM rheo.events WHERE stream = 'orders'`, `TRUNCATE rheo.events`} {
		_, err := conn.Exec(ctx, raw)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, raw)
		assert.Equal(t, "RH012", pgErr.Code, "the converted events are immutable on their shards: %s", raw)
	}

	var lag int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT sum(lag) FROM rheo.lag('orders', 'billing')`).Scan(&lag))
	assert.Equal(t, lagBefore, lag, "the group's progress came through")
	// A lease taken before names no stream's node (docs/citus.md,
	// "Converting an install"): its settle asks every shard once, and
	// settles.
	_, err = conn.Exec(ctx, `SELECT rheo.ack($1)`, lease)
	require.NoError(t, err, "the lease taken before the conversion settles after it")
	var fetched int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(rheo.ack(lease_id)) FROM rheo.fetch('orders', 'billing', max_count => 100)`).Scan(&fetched))
	assert.Equal(t, int64(89), fetched, "the group goes on from where it was")
	require.NoError(t, conn.QueryRow(ctx, `SELECT sum(lag) FROM rheo.lag('orders', 'billing')`).Scan(&lag))
	assert.Zero(t, lag)
}
