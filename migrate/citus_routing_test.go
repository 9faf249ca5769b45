package migrate_test

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testcitus"
	"github.com/rheo-go/rheo/migrate"
)

// TestCitusRouting checks where the claims and the settles run on a Citus
// cluster (docs/decisions.md, "Settles on Citus"): a fetch is one task on
// the node that holds its stream; its lease ids begin with the stream's
// hash; and a settle, called in a transaction so that it runs on the
// coordinator, sends its statements to that node only, never to every
// shard.
func TestCitusRouting(t *testing.T) {
	c := testcitus.Start(t)
	url := c.NewDatabase(t)
	ctx := context.Background()
	conn := migrateConnect(t, url)
	require.NoError(t, migrate.Postgres(ctx, conn, nil))
	_, err := conn.Exec(ctx, `SELECT rheo.create_stream('routed', 4)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `BEGIN; SELECT rheo.create_group('routed', 'g'); COMMIT`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT count(*) FROM rheo.append_batch('routed',
  (SELECT jsonb_agg(jsonb_build_object('type', 'x', 'n', g)) FROM generate_series(1, 400) g))`)
	require.NoError(t, err)
	var node string
	require.NoError(t, conn.QueryRow(ctx, `
SELECT s.nodename || ':' || s.nodeport FROM citus_shards s
 WHERE s.table_name = 'rheo.events'::regclass
   AND s.shardid = get_shard_id_for_distribution_column('rheo.events', 'routed')`).Scan(&node))

	t.Run("fetch is one task on the stream's node", func(t *testing.T) {
		plan := citusPlan(t, conn, `SELECT * FROM rheo.fetch('routed', 'g')`)
		assert.Contains(t, plan, "Task Count: 1", plan)
		assert.Equal(t, 1, strings.Count(plan, "Node: host="), plan)
		host, port, _ := strings.Cut(node, ":")
		assert.Contains(t, plan, "Node: host="+host+" port="+port, "the node that holds the stream\n%s", plan)
	})

	t.Run("lease ids begin with the stream's hash", func(t *testing.T) {
		var prefixes []string
		require.NoError(t, conn.QueryRow(ctx, `
SELECT array_agg(DISTINCT substr(f.lease_id::text, 1, 8)) FROM rheo.fetch('routed', 'g', 20) f`).Scan(&prefixes))
		var hash string
		require.NoError(t, conn.QueryRow(ctx, `SELECT lpad(to_hex(hashtext('routed')), 8, '0')`).Scan(&hash))
		assert.Equal(t, []string{hash}, prefixes)
	})

	t.Run("a settle goes to the lease's node only", func(t *testing.T) {
		// citus.log_remote_commands reports each command the coordinator
		// sends, with the node it goes to.
		cfg, err := pgx.ParseConfig(url)
		require.NoError(t, err)
		var mu sync.Mutex
		var notices []string
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			mu.Lock()
			defer mu.Unlock()
			notices = append(notices, n.Message+" "+n.Detail)
		}
		logged, err := pgx.ConnectConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = logged.Close(context.WithoutCancel(ctx)) })
		var leases []string
		require.NoError(t, logged.QueryRow(ctx,
			`SELECT array_agg(lease_id::text) FROM rheo.fetch('routed', 'g', 6)`).Scan(&leases))
		require.Len(t, leases, 6)

		for _, call := range []string{
			`SELECT rheo.ack($1::uuid)`,
			`SELECT rheo.renew($1::uuid)`,
			`SELECT rheo.retry($1::uuid)`,
			`SELECT rheo.reject($1::uuid)`,
			`SELECT count(*) FROM rheo.ack_batch(ARRAY[$1::uuid])`,
		} {
			lease := leases[0]
			leases = leases[1:]
			tx, err := logged.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `SET LOCAL citus.log_remote_commands = on`)
			require.NoError(t, err)
			mu.Lock()
			notices = nil
			mu.Unlock()
			_, err = tx.Exec(ctx, call, lease)
			require.NoError(t, err, call)
			require.NoError(t, tx.Commit(ctx))
			mu.Lock()
			nodes := remoteNodes(notices)
			mu.Unlock()
			assert.Equal(t, []string{node}, nodes, "%s sends its statements to the lease's node only", call)
		}
	})

	t.Run("concurrent fetchers never share an event", func(t *testing.T) {
		// Half the fetchers run delegated (each call on its own), half in
		// transactions of their own (each statement routed).
		_, err := conn.Exec(ctx, `SELECT rheo.create_stream('shared', 4)`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `BEGIN; SELECT rheo.create_group('shared', 'g'); COMMIT`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `SELECT count(*) FROM rheo.append_batch('shared',
  (SELECT jsonb_agg(jsonb_build_object('n', g)) FROM generate_series(1, 300) g),
  keys => (SELECT array_agg('k' || g % 7) FROM generate_series(1, 300) g))`)
		require.NoError(t, err)
		var mu sync.Mutex
		seen := map[[2]int64]int{}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := pgx.Connect(ctx, url)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close(context.WithoutCancel(ctx))
				for range 40 {
					var parts []int64
					var seqs []int64
					var settled []bool
					fetchAck := func(q pgx.Tx) error {
						return q.QueryRow(ctx, `
WITH l AS MATERIALIZED (SELECT array_agg("partition"::bigint) AS p, array_agg(sequence) AS s, array_agg(lease_id) AS ids
                          FROM rheo.fetch('shared', 'g', 5))
SELECT coalesce(l.p, '{}'), coalesce(l.s, '{}'), coalesce((SELECT array_agg(b.ok) FROM rheo.ack_batch(coalesce(l.ids, '{}')) b), '{}')
  FROM l`).Scan(&parts, &seqs, &settled)
					}
					if w%2 == 0 {
						// Delegated: the fetch, then the batch, each a call of its own.
						var ids []string
						if err := c.QueryRow(ctx, `SELECT coalesce(array_agg("partition"::bigint), '{}'), coalesce(array_agg(sequence), '{}'),
       coalesce(array_agg(lease_id::text), '{}') FROM rheo.fetch('shared', 'g', 5)`).Scan(&parts, &seqs, &ids); err != nil {
							errs <- err
							return
						}
						if err := c.QueryRow(ctx, `SELECT coalesce(array_agg(ok), '{}') FROM rheo.ack_batch($1::uuid[])`, ids).Scan(&settled); err != nil {
							errs <- err
							return
						}
					} else if err := pgx.BeginFunc(ctx, c, fetchAck); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for i := range parts {
						seen[[2]int64{parts[i], seqs[i]}]++
					}
					mu.Unlock()
					for _, ok := range settled {
						if !ok {
							errs <- assert.AnError
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "a fetcher failed, or one of its leases did not settle")
		}
		for pos, n := range seen {
			assert.Equal(t, 1, n, "event %v leased once", pos)
		}
		assert.Len(t, seen, 300, "every event leased")
	})

	t.Run("what a settle costs", func(t *testing.T) {
		// Not an assertion: the numbers go to the test log.
		const n = 100
		var leases []string
		require.NoError(t, conn.QueryRow(ctx,
			`SELECT array_agg(lease_id::text) FROM rheo.fetch('routed', 'g', $1)`, 2*n).Scan(&leases))
		require.Len(t, leases, 2*n)
		start := time.Now()
		for _, lease := range leases[:n] {
			_, err := conn.Exec(ctx, `SELECT rheo.ack($1::uuid)`, lease)
			require.NoError(t, err)
		}
		auto := time.Since(start) / n
		start = time.Now()
		for _, lease := range leases[n:] {
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `SELECT rheo.ack($1::uuid)`, lease)
			require.NoError(t, err)
			require.NoError(t, tx.Commit(ctx))
		}
		inTx := time.Since(start) / n
		start = time.Now()
		for range n {
			_, err := conn.Exec(ctx, `SELECT count(*) FROM rheo.fetch('routed', 'g', 1)`)
			require.NoError(t, err)
		}
		fetch := time.Since(start) / n
		// A yardstick on the same cluster at the same moment: an append,
		// delegated too.
		start = time.Now()
		for range n {
			_, err := conn.Exec(ctx, `SELECT rheo.append('routed', '{"type": "yardstick"}')`)
			require.NoError(t, err)
		}
		appendCost := time.Since(start) / n
		t.Logf("on Citus: an ack %v (its own transaction), %v (BEGIN, ack, COMMIT); a fetch of one lease %v (delegated); "+
			"an append %v (delegated)", auto, inTx, fetch, appendCost)
	})
}

// remoteNodes lists the nodes, host:port, that Citus's logged remote
// commands went to, sorted and without duplicates.
func remoteNodes(notices []string) []string {
	re := regexp.MustCompile(`on server [^@ ]+@([^ ]+:\d+)`)
	seen := map[string]bool{}
	var nodes []string
	for _, n := range notices {
		if !strings.HasPrefix(n, "issuing") {
			continue
		}
		for _, m := range re.FindAllStringSubmatch(n, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				nodes = append(nodes, m[1])
			}
		}
	}
	sort.Strings(nodes)
	return nodes
}
