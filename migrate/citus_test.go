package migrate_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testcitus"
	"github.com/rheo-go/rheo/migrate"
)

// TestCitusInstall installs Rheo on a Citus cluster's coordinator: the
// per-stream tables distributed by the stream and co-located with
// rheo.events, the global ones reference tables, the functions that take a
// stream first distributed by it and delegated whole to the node that
// holds the stream, and streams spread over the workers.
func TestCitusInstall(t *testing.T) {
	c := testcitus.Start(t)
	url := c.NewDatabase(t)
	ctx := context.Background()
	conn := migrateConnect(t, url)
	require.NoError(t, migrate.Postgres(ctx, conn, nil))
	// A second run changes nothing, and fails at nothing.
	require.NoError(t, migrate.Postgres(ctx, conn, nil))

	t.Run("tables", func(t *testing.T) {
		rows, err := conn.Query(ctx, `
SELECT p.logicalrelid::text, p.partmethod::text,
       p.colocationid = (SELECT e.colocationid FROM pg_dist_partition e WHERE e.logicalrelid = 'rheo.events'::regclass)
  FROM pg_dist_partition p
 WHERE p.logicalrelid::text LIKE 'rheo.%'`)
		require.NoError(t, err)
		type dist struct {
			method    string
			colocated bool
		}
		got := map[string]dist{}
		for rows.Next() {
			var name string
			var d dist
			require.NoError(t, rows.Scan(&name, &d.method, &d.colocated))
			got[name] = d
		}
		require.NoError(t, rows.Err())
		for _, table := range []string{"events", "partitions", "time_marks", "groups", "cursors", "deliveries",
			"dead_letters", "key_wakeups"} {
			var column string
			require.NoError(t, conn.QueryRow(ctx, `SELECT column_to_column_name(logicalrelid, partkey)
  FROM pg_dist_partition WHERE logicalrelid = $1::regclass`, "rheo."+table).Scan(&column), table)
			assert.Equal(t, "stream", column, "rheo.%s is distributed by the stream", table)
			assert.Equal(t, "h", got["rheo."+table].method, "rheo.%s is hash-distributed", table)
			assert.True(t, got["rheo."+table].colocated, "rheo.%s is co-located with rheo.events", table)
		}
		for _, table := range []string{"streams", "schema_version", "role_prefix", "function_set"} {
			assert.Equal(t, "n", got["rheo."+table].method, "rheo.%s is a reference table", table)
		}
		var local []string
		require.NoError(t, conn.QueryRow(ctx, `
SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname), '{}')
  FROM pg_class c
 WHERE c.relnamespace = 'rheo'::regnamespace AND c.relkind = 'r'
   AND NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)`).Scan(&local))
		assert.Empty(t, local, "every table of schema rheo is distributed or a reference table")
	})

	t.Run("functions", func(t *testing.T) {
		var missing, undistributed, misdistributed []string
		require.NoError(t, conn.QueryRow(ctx, `
SELECT coalesce(array_agg(f.name ORDER BY f.name) FILTER (WHERE o.objid IS NULL), '{}'),
       coalesce(array_agg(f.name ORDER BY f.name)
                FILTER (WHERE f.by_stream AND (o.distribution_argument_index IS DISTINCT FROM 0
                                               OR o.colocationid IS DISTINCT FROM e.colocationid)), '{}'),
       coalesce(array_agg(f.name ORDER BY f.name)
                FILTER (WHERE NOT f.by_stream AND o.distribution_argument_index IS NOT NULL), '{}')
  FROM (SELECT p.oid, p.oid::regprocedure::text AS name,
               (p.proname !~ '^_' OR p.proname = '_ack_on') AND p.pronargs > 0 AND p.proargnames[1] = 'stream' AS by_stream
          FROM pg_proc p WHERE p.pronamespace = 'rheo'::regnamespace) f
  LEFT JOIN pg_dist_object o ON o.classid = 'pg_proc'::regclass AND o.objid = f.oid
 CROSS JOIN (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'rheo.events'::regclass) e`).
			Scan(&missing, &undistributed, &misdistributed))
		assert.Empty(t, missing, "every function is on every node")
		assert.Empty(t, undistributed, "a function whose first argument is the stream (and the settles' rheo._ack_on) is distributed by it, co-located with the events")
		assert.Empty(t, misdistributed, "the other functions have no distribution argument")
		for _, w := range c.WorkerURLs(t, url) {
			var n int
			require.NoError(t, migrateConnect(t, w).QueryRow(ctx,
				`SELECT count(*) FROM pg_proc WHERE pronamespace = 'rheo'::regnamespace`).Scan(&n))
			var want int
			require.NoError(t, conn.QueryRow(ctx,
				`SELECT count(*) FROM pg_proc WHERE pronamespace = 'rheo'::regnamespace`).Scan(&want))
			assert.Equal(t, want, n, "worker %s has every function", w)
		}
	})

	t.Run("roles on every node", func(t *testing.T) {
		for _, w := range c.WorkerURLs(t, url) {
			wc := migrateConnect(t, w)
			var n int
			require.NoError(t, wc.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = ANY ($1)`,
				migrate.Roles).Scan(&n))
			assert.Equal(t, len(migrate.Roles), n, "Rheo's roles exist on worker %s", w)
			var owner string
			require.NoError(t, wc.QueryRow(ctx, `SELECT n.nspowner::regrole::text FROM pg_namespace n WHERE n.nspname = 'rheo'`).Scan(&owner))
			assert.Equal(t, migrate.OwnerRole, owner, "schema rheo on worker %s belongs to the owner role", w)
			var ownerLogin, othersLogin bool
			require.NoError(t, wc.QueryRow(ctx, `
SELECT bool_or(rolcanlogin) FILTER (WHERE rolname = $1), bool_or(rolcanlogin) FILTER (WHERE rolname <> $1)
  FROM pg_roles WHERE rolname = ANY ($2)`, migrate.OwnerRole, migrate.Roles).Scan(&ownerLogin, &othersLogin))
			assert.True(t, ownerLogin, "on Citus the owner role logs in between the nodes (worker %s)", w)
			assert.False(t, othersLogin, "the application roles stay NOLOGIN (worker %s)", w)
		}
	})

	t.Run("calls", func(t *testing.T) {
		_, err := conn.Exec(ctx, `SELECT rheo.create_stream('orders', 4)`)
		require.NoError(t, err)
		for _, call := range []string{
			`SELECT * FROM rheo.append('orders', '{"type": "placed"}', 'k', NULL, 'o-1')`,
			`SELECT * FROM rheo.append_batch('orders', '[{"type": "a"}, {"type": "b"}]')`,
			`SELECT * FROM rheo.stream_info('orders')`,
			`SELECT * FROM rheo.read('orders', 1)`,
			`SELECT * FROM rheo.query('orders', '{"type": "placed"}')`,
			`SELECT * FROM rheo.list_streams()`,
			`SELECT rheo.create_group('orders', 'billing')`,
			`SELECT * FROM rheo.list_groups('orders')`,
			`SELECT rheo.set_retention('orders', '30 days')`,
		} {
			_, err := conn.Exec(ctx, call)
			require.NoError(t, err, call)
		}
		var high int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT sum(high_watermark) FROM rheo.stream_info('orders')`).Scan(&high))
		assert.Equal(t, int64(3), high, "three events appended")
		var id string
		require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM rheo.events WHERE stream = 'orders' AND key = 'k'`).Scan(&id))
		assert.Equal(t, "o-1", id)
		var groups []string
		require.NoError(t, conn.QueryRow(ctx, `SELECT array_agg(group_name) FROM rheo.list_groups('orders')`).Scan(&groups))
		assert.Equal(t, []string{"billing"}, groups)
		var matched int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM rheo.query('orders', '{"type": "placed"}')`).Scan(&matched))
		assert.Equal(t, 1, matched)
		for _, raw := range []string{
			`UPDATE rheo.events SET payload = '{}' WHERE stream = 'orders'`,
			`DELETE FROM rheo.events WHERE stream = 'orders'`,
		} {
			_, err := conn.Exec(ctx, raw)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, raw)
			assert.Equal(t, "RH012", pgErr.Code, "the events cannot be changed on their shards either: %s", raw)
		}
		for _, query := range []string{
			`SELECT * FROM rheo.events WHERE stream = 'orders'`,
			`SELECT * FROM rheo.append('orders', '{}')`,
			`SELECT * FROM rheo.stream_info('orders')`,
			`SELECT * FROM rheo.fetch('orders', 'billing')`,
			`SELECT * FROM rheo.lag('orders', 'billing')`,
		} {
			plan := citusPlan(t, conn, query)
			assert.Contains(t, plan, "Task Count: 1", "one task: %s\n%s", query, plan)
			assert.Equal(t, 1, strings.Count(plan, "Node: host="), "on one node: %s\n%s", query, plan)
		}
	})

	t.Run("streams spread over the workers", func(t *testing.T) {
		for i := range 16 {
			stream := fmt.Sprintf("spread-%d", i)
			_, err := conn.Exec(ctx, `SELECT rheo.create_stream($1, 1)`, stream)
			require.NoError(t, err)
			_, err = conn.Exec(ctx, `SELECT rheo.append($1, '{"type": "x"}')`, stream)
			require.NoError(t, err)
		}
		rows, err := conn.Query(ctx, `
SELECT s.nodename || ':' || s.nodeport, count(*)
  FROM rheo.streams st
  JOIN citus_shards s ON s.table_name = 'rheo.events'::regclass
                     AND s.shardid = get_shard_id_for_distribution_column('rheo.events', st.stream)
 WHERE st.stream LIKE 'spread-%'
 GROUP BY 1`)
		require.NoError(t, err)
		held := map[string]int64{}
		for rows.Next() {
			var node string
			var n int64
			require.NoError(t, rows.Scan(&node, &n))
			held[node] = n
		}
		require.NoError(t, rows.Err())
		require.Len(t, held, len(c.Workers), "16 streams land on every worker: %v", held)
		for _, w := range c.Workers {
			assert.Positive(t, held[w.Addr()], "worker %s holds streams", w.Addr())
		}
		var events int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM rheo.events WHERE stream LIKE 'spread-%'`).Scan(&events))
		assert.Equal(t, int64(16), events)
	})

	t.Run("statements on the shards", func(t *testing.T) {
		// rheo._shard_tables names the stream's shards on the node that
		// holds them, and the distributed tables everywhere else.
		const tables = `ARRAY['events', 'deliveries', 'key_wakeups']`
		var holder string
		var shards []string
		require.NoError(t, conn.QueryRow(ctx, `
SELECT s.nodename || ':' || s.nodeport,
       ARRAY(SELECT format('rheo.%s_%s', t, get_shard_id_for_distribution_column(('rheo.' || t)::regclass, 'orders'))
               FROM unnest(`+tables+`) WITH ORDINALITY AS x(t, o) ORDER BY o)
  FROM citus_shards s
 WHERE s.table_name = 'rheo.events'::regclass AND s.shardid = get_shard_id_for_distribution_column('rheo.events', 'orders')`).
			Scan(&holder, &shards))
		plain := []string{"rheo.events", "rheo.deliveries", "rheo.key_wakeups"}
		var got []string
		require.NoError(t, conn.QueryRow(ctx, `SELECT rheo._shard_tables('orders', `+tables+`)`).Scan(&got))
		assert.Equal(t, plain, got, "the coordinator, which holds no shard")
		for i, w := range c.WorkerURLs(t, url) {
			wc := migrateConnect(t, w)
			require.NoError(t, wc.QueryRow(ctx, `SELECT rheo._shard_tables('orders', `+tables+`)`).Scan(&got))
			if c.Workers[i].Addr() == holder {
				assert.Equal(t, shards, got, "the worker %s, which holds the stream", holder)
			} else {
				assert.Equal(t, plain, got, "the worker %s, which does not hold the stream", c.Workers[i].Addr())
			}
		}
	})
}

// citusPlan is the plan of query on the coordinator, EXPLAIN (VERBOSE).
func citusPlan(t *testing.T, conn *pgx.Conn, query string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN (VERBOSE, COSTS OFF) "+query)
	require.NoError(t, err)
	var lines []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(t, rows.Err())
	return strings.Join(lines, "\n")
}

// TestCitusInstallWithRolesOnTheCoordinatorOnly installs Rheo on a
// coordinator whose Rheo roles were made before, where Citus did not copy
// them to the workers (in another database of the server, or before the
// citus extension): the install makes them, with their memberships, on
// every worker, and then works as any other.
func TestCitusInstallWithRolesOnTheCoordinatorOnly(t *testing.T) {
	c := testcitus.Start(t)
	ctx := context.Background()
	prefix := "rheo_test_" + strings.ToLower(rand.Text()[:10]) + "_"
	names, err := migrate.RoleNamesFor(prefix)
	require.NoError(t, err)
	roles := []string{names.Admin, names.Producer, names.Consumer, names.Reader, names.Owner}
	// Registered first, so that it runs after the database is dropped.
	t.Cleanup(func() {
		for _, n := range append([]testcitus.Node{c.Coordinator}, c.Workers...) {
			conn, err := pgx.Connect(ctx, c.URL(n, "postgres"))
			if !assert.NoError(t, err, "drop the roles on %s", n.Addr()) {
				continue
			}
			for _, role := range roles {
				_, err := conn.Exec(ctx, "SET citus.enable_ddl_propagation = off; DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
				assert.NoError(t, err, "drop %s on %s", role, n.Addr())
			}
			_ = conn.Close(ctx)
		}
	})
	url := c.NewDatabase(t)
	conn := migrateConnect(t, url)
	for _, role := range roles {
		_, err := conn.Exec(ctx, "SET citus.enable_ddl_propagation = off; CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" NOLOGIN")
		require.NoError(t, err)
	}
	_, err = conn.Exec(ctx, "SET citus.enable_ddl_propagation = on")
	require.NoError(t, err)

	require.NoError(t, migrate.Postgres(ctx, conn, &migrate.Options{RolePrefix: prefix}))

	for _, w := range c.WorkerURLs(t, url) {
		wc := migrateConnect(t, w)
		for _, role := range roles {
			var exists bool
			require.NoError(t, wc.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists))
			assert.True(t, exists, "role %s on the worker %s", role, w)
		}
		var member bool
		require.NoError(t, wc.QueryRow(ctx, `SELECT pg_has_role($1, $2, 'MEMBER')`, names.Admin, names.Reader).Scan(&member))
		assert.True(t, member, "%s is a member of %s on the worker %s", names.Admin, names.Reader, w)
	}
	_, err = conn.Exec(ctx, `
SELECT rheo.create_stream('orders', 2);
SELECT rheo.create_group('orders', 'billing');
SELECT rheo.append('orders', '{"n": 1}'::jsonb);`)
	require.NoError(t, err)
	var fetched int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM rheo.fetch('orders', 'billing', 10, 'c1', 30)`).Scan(&fetched))
	assert.Equal(t, 1, fetched)
}
