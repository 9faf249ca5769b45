package testcitus

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testskip"
)

func TestMain(m *testing.M) { os.Exit(testskip.Run(m)) }

func TestCluster(t *testing.T) {
	c := Start(t)
	ctx := context.Background()

	var name string
	t.Run("a distributed table spreads over the workers, and a row written through the coordinator is read back", func(t *testing.T) {
		db := c.NewDatabase(t)
		conn, err := pgx.Connect(ctx, db)
		require.NoError(t, err)
		defer conn.Close(ctx)
		require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&name))

		_, err = conn.Exec(ctx, "CREATE TABLE items (stream text NOT NULL, n int NOT NULL)")
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "SELECT create_distributed_table('items', 'stream')")
		require.NoError(t, err)

		rows, err := conn.Query(ctx, `SELECT DISTINCT nodename, nodeport FROM citus_shards
			WHERE table_name = 'items'::regclass ORDER BY nodeport`)
		require.NoError(t, err)
		var holders []Node
		var n Node
		_, err = pgx.ForEachRow(rows, []any{&n.Host, &n.Port}, func() error {
			holders = append(holders, n)
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, c.Workers, holders, "the shards are on both workers, and on no other node")

		_, err = conn.Exec(ctx, "INSERT INTO items VALUES ('s', 7)")
		require.NoError(t, err)
		var got int
		require.NoError(t, conn.QueryRow(ctx, "SELECT n FROM items WHERE stream = 's'").Scan(&got))
		assert.Equal(t, 7, got)

		t.Run("the worker that holds the row's shard has it, at its URL", func(t *testing.T) {
			var shard string
			var holder Node
			require.NoError(t, conn.QueryRow(ctx, `SELECT shard_name, nodename, nodeport FROM citus_shards
				WHERE shardid = get_shard_id_for_distribution_column('items', 's')`).Scan(&shard, &holder.Host, &holder.Port))
			urls := c.WorkerURLs(t, db)
			require.Len(t, urls, len(c.Workers))
			i := slices.Index(c.Workers, holder)
			require.GreaterOrEqual(t, i, 0, "the shard's node %v is a worker", holder)
			assert.Equal(t, c.URL(holder, name), urls[i])

			w, err := pgx.Connect(ctx, urls[i])
			require.NoError(t, err)
			defer w.Close(ctx)
			require.NoError(t, w.QueryRow(ctx, "SELECT n FROM "+pgx.Identifier{shard}.Sanitize()+" WHERE stream = 's'").Scan(&got))
			assert.Equal(t, 7, got)
		})
	})

	t.Run("a cluster at RHEO_TEST_CITUS_URL is found from the pg_dist_node of the database it names", func(t *testing.T) {
		db := c.NewDatabase(t)
		found, err := fromURL(db)
		require.NoError(t, err)
		assert.Equal(t, c.Coordinator, found.Coordinator)
		assert.Equal(t, c.Workers, found.Workers)
		assert.Equal(t, c.WorkerURLs(t, db), found.WorkerURLs(t, db))
	})

	t.Run("the database is dropped on every node when its test ends", func(t *testing.T) {
		require.NotEmpty(t, name)
		for _, node := range c.nodes() {
			conn, err := pgx.Connect(ctx, c.adminURL(node))
			require.NoError(t, err)
			var exists bool
			err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists)
			_ = conn.Close(ctx)
			require.NoError(t, err)
			assert.False(t, exists, "database %s on %s", name, node.Addr())
		}
	})
}

func TestNewRheoCopy(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	connect := func(t *testing.T, u string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, u)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(ctx) })
		return conn
	}
	a, b := connect(t, c.NewRheoCopy(t)), connect(t, c.NewRheoCopy(t))

	t.Run("each copy is Rheo installed distributed, whose calls reach the workers", func(t *testing.T) {
		for _, conn := range []*pgx.Conn{a, b} {
			var distributed bool
			require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_dist_partition
				WHERE logicalrelid = 'rheo.events'::regclass)`).Scan(&distributed))
			assert.True(t, distributed, "rheo.events is distributed in %s", conn.Config().Database)
		}
		_, err := a.Exec(ctx, "SELECT rheo.create_stream('s')")
		require.NoError(t, err)
		_, err = a.Exec(ctx, `SELECT rheo.append('s', '{"n": 7}')`)
		require.NoError(t, err)
		var holder Node
		require.NoError(t, a.QueryRow(ctx, `SELECT nodename, nodeport FROM citus_shards
			WHERE shardid = get_shard_id_for_distribution_column('rheo.events', 's')`).Scan(&holder.Host, &holder.Port))
		assert.Contains(t, c.Workers, holder, "the stream's shard is on a worker")
		var n int
		require.NoError(t, a.QueryRow(ctx, `SELECT (payload->>'n')::int FROM rheo.read('s')`).Scan(&n))
		assert.Equal(t, 7, n, "the event read back through the coordinator")
	})

	t.Run("the copies are databases of their own on every node", func(t *testing.T) {
		var streams int
		require.NoError(t, b.QueryRow(ctx, "SELECT count(*) FROM rheo.streams").Scan(&streams))
		assert.Zero(t, streams, "streams in the other copy")
		require.NotEqual(t, a.Config().Database, b.Config().Database)
	})
}

func TestFindInstall(t *testing.T) {
	t.Run("a PostgreSQL without Citus is Citus missing", func(t *testing.T) {
		t.Setenv("PG_CONFIG", "/nonexistent/pg_config")
		_, err := findInstall()
		var m missing
		require.ErrorAs(t, err, &m)
		assert.Contains(t, err.Error(), "no Citus for tests")
		assert.Contains(t, err.Error(), "build.sh")
	})
}
