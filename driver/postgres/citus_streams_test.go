package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testcitus"
)

// TestCitusListStreams lists streams on a Citus cluster as an
// application role: each names the worker that holds its shard, and
// eight streams land on both workers.
func TestCitusListStreams(t *testing.T) {
	t.Parallel()
	c := testcitus.Start(t)
	adminURL, pool := citusAppPool(t, c)
	ctx := context.Background()
	d := postgres.New(pool, nil)
	t.Cleanup(func() { _ = d.Close() })
	for i := range 8 {
		require.NoError(t, d.CreateStream(ctx, fmt.Sprintf("placed-%d", i), 1))
	}

	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	streams, err := d.ListStreams(ctx)
	require.NoError(t, err)
	require.Len(t, streams, 8)
	held := map[string]int{}
	for _, s := range streams {
		var want string
		require.NoError(t, admin.QueryRow(ctx, `SELECT nodename || ':' || nodeport FROM citus_shards
			WHERE table_name = 'rheo.events'::regclass
			  AND shardid = get_shard_id_for_distribution_column('rheo.events', $1::text)`, s.Name).Scan(&want))
		assert.Equal(t, want, s.Node, "the node of %s", s.Name)
		held[s.Node]++
	}
	for _, w := range c.Workers {
		assert.Positive(t, held[w.Addr()], "worker %s holds streams: %v", w.Addr(), held)
	}
}

// TestCitusGroupStatus reads the view rheo.group_status on a Citus
// cluster as an application role, which may read the view and not the
// tables under it: the rows are those of the single server.
func TestCitusGroupStatus(t *testing.T) {
	t.Parallel()
	c := testcitus.Start(t)
	adminURL, pool := citusAppPool(t, c)
	ctx := context.Background()
	for _, sql := range []string{
		`SELECT rheo.create_stream('status', 2)`,
		`SELECT rheo.create_group('status', 'g')`,
		`SELECT count(*) FROM rheo.append_batch('status', '[{}, {}, {}]', "partition" => 1)`,
		`SELECT count(*) FROM rheo.fetch('status', 'g', max_count => 1)`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	rows, err := pool.Query(ctx, `SELECT "partition", frontier, high_watermark, lag, inflight, dead_letters
		FROM rheo.group_status WHERE stream = 'status' AND group_name = 'g' ORDER BY "partition"`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([6]int64, error) {
		var r [6]int64
		err := row.Scan(&r[0], &r[1], &r[2], &r[3], &r[4], &r[5])
		return r, err
	})
	require.NoError(t, err)
	assert.Equal(t, [][6]int64{{0, 0, 0, 0, 0, 0}, {1, 0, 3, 3, 1, 0}}, got, "partition, frontier, high watermark, lag, in flight, dead letters")

	_, err = pool.Exec(ctx, `SELECT * FROM rheo._group_status()`)
	require.NoError(t, err, "the view's function is readable by rheo_reader")
	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	var owner string
	require.NoError(t, admin.QueryRow(ctx, `SELECT proowner::regrole::text FROM pg_proc WHERE oid = 'rheo._group_status()'::regprocedure`).Scan(&owner))
	assert.Equal(t, "rheo_owner", owner, "the view's function runs with Rheo's privileges")
}

// citusAppPool installs Rheo on a database of c (testcitus.NewRheo) and
// returns its superuser URL and a pool of the application role.
func citusAppPool(t *testing.T, c *testcitus.Cluster) (adminURL string, pool *pgxpool.Pool) {
	t.Helper()
	adminURL, appURL := c.NewRheo(t)
	pool, err := pgxpool.New(context.Background(), appURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return adminURL, pool
}
