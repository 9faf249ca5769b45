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
	adminURL, appURL := c.NewRheo(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
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
