package tests

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testcitus"
)

// concDB is a fresh database with Rheo installed that a concurrency test
// runs on, through a pool of connections as a superuser: on the single
// PostgreSQL server, or on the Citus test cluster's coordinator with Rheo
// installed distributed. It knows where to look for the lock waits of
// its backends: on Citus a call made outside a transaction runs whole on
// the worker that holds its stream, and one made in a transaction sends
// its statements there, so that a backend of the pool waits on a lock in
// a worker's backend serving it, not in its own.
type concDB struct {
	*pgxpool.Pool
	// cluster is the Citus cluster the database is on, nil on the single
	// server.
	cluster *testcitus.Cluster
	// url is the database's URL as a superuser, on the coordinator on
	// Citus.
	url string
	// coordinator is the coordinator's node id on Citus, from which a
	// backend's global pid there is made (citus_calculate_gpid): the
	// backends serving it on the workers carry the same global pid.
	coordinator int32
}

// concOpener opens a pool of up to size connections to a fresh database
// with Rheo installed, on the server or cluster of the subtest that
// concOnEach gave it to. The caller closes the pool.
type concOpener func(t *testing.T, size int32) *concDB

// concOnEach runs test twice, as parallel subtests: "postgres" on the
// single server, and "citus" on the Citus test cluster
// (internal/testcitus), which skips with a one-line reason where there
// is no Citus and fails for it under CI=true.
func concOnEach(t *testing.T, test func(t *testing.T, open concOpener)) {
	t.Helper()
	for _, b := range []struct {
		name string
		open concOpener
	}{
		{"postgres", concPool},
		{"citus", concCitusPool},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.open)
		})
	}
}

// concOnEachPool is concOnEach for a test of one pool of up to size
// connections under a context bounded by concTimeout: test gets both,
// and the pool is closed when it returns.
func concOnEachPool(t *testing.T, size int32, test func(ctx context.Context, t *testing.T, pool *concDB)) {
	t.Helper()
	concOnEach(t, func(t *testing.T, open concOpener) {
		ctx, cancel := context.WithTimeout(context.Background(), concTimeout)
		defer cancel()
		pool := open(t, size)
		defer pool.Close()
		test(ctx, t, pool)
	})
}

// concPool opens a pool of up to size connections to a fresh database
// with Rheo installed on the single server. The caller closes it.
func concPool(t *testing.T, size int32) *concDB {
	t.Helper()
	url := pgtapInstalledDatabase(t)
	return &concDB{Pool: concNewPool(t, url, size), url: url}
}

// concCitusPool opens a pool of up to size connections to a fresh
// database of the Citus test cluster with Rheo installed distributed, on
// the coordinator as a superuser. The caller closes it.
func concCitusPool(t *testing.T, size int32) *concDB {
	t.Helper()
	c := testcitus.Start(t)
	url := c.NewRheoCopy(t)
	db := &concDB{Pool: concNewPool(t, url, size), cluster: c, url: url}
	err := db.QueryRow(context.Background(), `SELECT nodeid FROM pg_dist_node WHERE groupid = 0`).Scan(&db.coordinator)
	if err != nil {
		db.Close()
	}
	require.NoError(t, err, "read the coordinator's node id")
	return db
}

func concNewPool(t *testing.T, url string, size int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = size
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	return pool
}

// onCitus reports whether the database is on the Citus test cluster.
func (db *concDB) onCitus() bool { return db.cluster != nil }

// sized returns postgres on the single server and citus on the Citus
// cluster: the size of a test's load, which is smaller on the cluster,
// whose three servers share the machine's cores and where each call
// costs more round trips.
func (db *concDB) sized(postgres, citus int) int {
	if db.onCitus() {
		return citus
	}
	return postgres
}

// The statements that tell whether a backend of the pool, by its pid,
// waits on a lock, and whether it waits on a lock another holds. On
// Citus they read every node, by the backends' global pids.
const (
	concWaitsSQL = `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`
	// The backends serving the pool's backend on the workers carry its
	// global pid (citus_stat_activity has one row per node's backend).
	concCitusWaitsSQL = `SELECT EXISTS (SELECT FROM citus_stat_activity
		WHERE global_pid = citus_calculate_gpid($2, $1) AND wait_event_type = 'Lock')`
	concBlockedBySQL = `SELECT $2::int = ANY (pg_blocking_pids($1))`
	// citus_lock_waits names the waiting and the blocking distributed
	// transactions by the global pids of the backends that began them.
	concCitusBlockedBySQL = `SELECT EXISTS (SELECT FROM citus_lock_waits
		WHERE waiting_gpid = citus_calculate_gpid($3, $1) AND blocking_gpid = citus_calculate_gpid($3, $2))`
)

// waits reports whether the backend pid of the pool waits on a lock, in
// itself or, on Citus, in a backend serving it on a worker.
func (db *concDB) waits(ctx context.Context, pid uint32) (bool, error) {
	var waiting bool
	var err error
	if db.onCitus() {
		err = db.QueryRow(ctx, concCitusWaitsSQL, int64(pid), db.coordinator).Scan(&waiting)
	} else {
		err = db.QueryRow(ctx, concWaitsSQL, int64(pid)).Scan(&waiting)
	}
	return waiting, err
}

// blockedBy reports whether the backend waiter of the pool waits on a
// lock that the backend holder of the pool holds (on Citus, that the
// distributed transactions they began hold and wait for on any node).
func (db *concDB) blockedBy(ctx context.Context, waiter, holder uint32) (bool, error) {
	var blocked bool
	var err error
	if db.onCitus() {
		err = db.QueryRow(ctx, concCitusBlockedBySQL, int64(waiter), int64(holder), db.coordinator).Scan(&blocked)
	} else {
		err = db.QueryRow(ctx, concBlockedBySQL, int64(waiter), int64(holder)).Scan(&blocked)
	}
	return blocked, err
}

// concWaitForLock returns once the backend pid waits on a lock.
func concWaitForLock(ctx context.Context, t *testing.T, pool *concDB, pid uint32) {
	t.Helper()
	for {
		waiting, err := pool.waits(ctx, pid)
		require.NoError(t, err, "wait for backend %d to wait on a lock", pid)
		if waiting {
			return
		}
	}
}

// concFinishedOrWaiting returns once b has finished or its backend waits
// on a lock.
func concFinishedOrWaiting(ctx context.Context, t *testing.T, pool *concDB, b *concBackground) {
	t.Helper()
	for !b.finished() {
		waiting, err := pool.waits(ctx, b.pid)
		require.NoError(t, err, "watch backend %d", b.pid)
		if waiting {
			return
		}
	}
}

// concWaitForBlocker returns once the backend waiter waits on a lock
// that the backend holder holds: for the end of holder's transaction,
// when waiter meets a row that holder wrote.
func concWaitForBlocker(ctx context.Context, t *testing.T, pool *concDB, waiter, holder uint32) {
	t.Helper()
	for {
		blocked, err := pool.blockedBy(ctx, waiter, holder)
		require.NoError(t, err, "wait for backend %d to wait for backend %d", waiter, holder)
		if blocked {
			return
		}
	}
}

// concNotifyRoute is a connection that hears the notifications of
// appends to a stream, and how to append an end marker so that it
// notifies there.
type concNotifyRoute struct {
	conn *pgx.Conn
	// inTransaction appends the end marker in a transaction: on Citus
	// the call runs on the coordinator, and notifies there.
	inTransaction bool
}

// appendMarker appends an event to the stream marker that notifies on
// r's connection.
func (r concNotifyRoute) appendMarker(ctx context.Context, t *testing.T, pool *concDB, marker string) {
	t.Helper()
	const sql = `SELECT rheo.append($1, '{}')`
	if !r.inTransaction {
		concExec(ctx, t, pool, sql, marker)
		return
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql, marker)
		return err
	})
	require.NoError(t, err, "%s in a transaction", sql)
}

// concNotifyRoutes listens on rheo_events where the appends to stream,
// which must exist, notify, and returns the listening connections,
// closed when t ends, with a stream name for the end markers (not yet
// created) that notifies there too, after what was committed before it.
// On the single server that is one connection, and the markers are
// appended outside a transaction. On Citus it is the worker that holds
// stream, with a marker stream held by the same worker, and the
// coordinator, where appends in a transaction notify.
func concNotifyRoutes(ctx context.Context, t *testing.T, pool *concDB, stream string) ([]concNotifyRoute, string) {
	t.Helper()
	listen := func(url string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
		_, err = conn.Exec(ctx, `LISTEN rheo_events`)
		require.NoError(t, err)
		return conn
	}
	if !pool.onCitus() {
		return []concNotifyRoute{{conn: listen(pool.url)}}, "end-marker"
	}
	node := func(stream string) testcitus.Node {
		var n testcitus.Node
		require.NoError(t, pool.QueryRow(ctx, `SELECT n.nodename, n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
			WHERE p.shardid = get_shard_id_for_distribution_column('rheo.events', $1::text) AND n.noderole = 'primary'`, stream).
			Scan(&n.Host, &n.Port), "find the node of stream %s", stream)
		return n
	}
	holder := node(stream)
	marker := "end-marker"
	for i := 1; node(marker) != holder; i++ {
		marker = fmt.Sprint("end-marker-", i)
	}
	i := slices.Index(pool.cluster.Workers, holder)
	require.GreaterOrEqual(t, i, 0, "stream %s is on %s, not a worker", stream, holder.Addr())
	return []concNotifyRoute{
		{conn: listen(pool.cluster.WorkerURLs(t, pool.url)[i])},
		{conn: listen(pool.url), inTransaction: true},
	}, marker
}
