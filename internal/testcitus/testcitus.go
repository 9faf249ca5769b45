// Package testcitus gives tests a Citus cluster, and a database of their
// own on it:
//
//	func TestMain(m *testing.M) { os.Exit(testskip.Run(m)) }
//
//	func TestX(t *testing.T) {
//		c := testcitus.Start(t)
//		db := c.NewDatabase(t)           // on the coordinator
//		workers := c.WorkerURLs(t, db)   // the same database on each worker
//		…
//	}
//
// The cluster is the one whose coordinator RHEO_TEST_CITUS_URL points at,
// else one this package starts once per test binary from the local
// PostgreSQL's binaries (pg_config: $PG_CONFIG, else PostgreSQL 15's,
// else the one on PATH) with the Citus extension installed in them
// (bash ../shared/vendor/citus/build.sh installs it): a coordinator and
// two workers, each a postgres of its own with its data directory under
// one temporary directory, listening on free loopback ports (never 5432)
// with shared_preload_libraries = 'citus'. Run as root, the servers run
// as the postgres user. The package's TestMain must be testskip.Run (or
// wrap m with testskip.Wrap): it stops the cluster and removes its files
// once the tests have run. A binary killed before that takes its servers
// with it (on Linux), and the next cluster started on the machine removes
// the files left behind.
//
// Each test's database is a copy, on every node, of a template with the
// citus extension created (made once per test binary and dropped when it
// ends), with the coordinator and the workers registered in it. NewRheo
// installs Rheo in such a copy; NewRheoCopy copies a template where Rheo
// is installed, for tests that need many databases.
//
// When there is no Citus (no citus.so or extension files in the local
// PostgreSQL, or no citus among pg_available_extensions of the server at
// RHEO_TEST_CITUS_URL) the test is skipped with one line saying why,
// except under CI=true, where it fails (package testskip).
package testcitus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testskip"
)

// EnvURL names the variable that points tests at a running Citus
// cluster: a URL of its coordinator, naming a database where the citus
// extension is created and the workers are registered (citus_add_node).
// The workers are found from that database's pg_dist_node, and are
// reached with the URL's user and password at the host and port
// registered there. The coordinator is reached at the URL's host and
// port, and registered in the tests' databases at the ones pg_dist_node
// gives it there, else at the URL's.
const EnvURL = "RHEO_TEST_CITUS_URL"

// Node is one PostgreSQL server of the cluster, at the address Citus
// knows it by (pg_dist_node, citus_shards).
type Node struct {
	// Host is the node's host name or address.
	Host string
	// Port is the node's port.
	Port int
}

// Addr returns the node's host:port.
func (n Node) Addr() string { return net.JoinHostPort(n.Host, strconv.Itoa(n.Port)) }

// Cluster is a running Citus cluster: a coordinator and its workers.
type Cluster struct {
	// Coordinator is the coordinator node.
	Coordinator Node
	// Workers are the worker nodes, ordered by host, then port.
	Workers []Node

	// admin is a URL of the coordinator's administrative database; the
	// URLs of the nodes are made from it.
	admin *url.URL

	templateOnce sync.Once
	// template is the database NewDatabase copies on every node.
	template    string
	templateErr error

	rheoTemplateOnce sync.Once
	// rheoTemplate is the database NewRheoCopy copies on every node.
	rheoTemplate    string
	rheoTemplateErr error
}

var (
	clusterOnce sync.Once
	cluster     *Cluster
	clusterErr  error
	// clusterMissing says, when clusterErr is set, that Citus is not
	// there (skip) rather than broken (fail).
	clusterMissing bool
)

// Start returns the tests' Citus cluster, started on the first call of
// the test binary unless RHEO_TEST_CITUS_URL points at one. It skips or
// fails t as the package documentation says.
func Start(t testing.TB) *Cluster {
	t.Helper()
	clusterOnce.Do(func() { cluster, clusterMissing, clusterErr = findCluster() })
	if clusterErr != nil && clusterMissing {
		testskip.Missing(t, "Citus", clusterErr.Error())
	}
	require.NoError(t, clusterErr, "start the Citus test cluster")
	return cluster
}

// missing marks err as saying that Citus is not there.
type missing struct{ error }

func findCluster() (c *Cluster, isMissing bool, err error) {
	if raw := os.Getenv(EnvURL); raw != "" {
		c, err = fromURL(raw)
	} else {
		c, err = startLocal()
	}
	var m missing
	return c, errors.As(err, &m), err
}

// installHint says how to provide Citus, for the skip messages.
const installHint = "install it with bash ../shared/vendor/citus/build.sh, or set " + EnvURL + "=postgres://… (a coordinator)"

// fromURL is the cluster whose coordinator raw points at.
func fromURL(raw string) (*Cluster, error) {
	admin, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvURL, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return nil, missing{fmt.Errorf("no Citus for tests: %s is set but unreachable: %v", EnvURL, testdb.RootCause(err))}
	}
	defer conn.Close(ctx)
	var available bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'citus')").Scan(&available); err != nil {
		return nil, fmt.Errorf("%s: look for the citus extension: %w", EnvURL, err)
	}
	if !available {
		return nil, missing{fmt.Errorf("no Citus for tests: the server at %s has no citus extension; %s", EnvURL, installHint)}
	}
	port, _ := strconv.Atoi(admin.Port())
	if port == 0 {
		port = 5432
	}
	c := &Cluster{Coordinator: Node{Host: admin.Hostname(), Port: port}, admin: admin}
	rows, err := conn.Query(ctx, `SELECT groupid = 0, nodename, nodeport FROM pg_dist_node
		WHERE noderole = 'primary' AND isactive ORDER BY nodename, nodeport`)
	if err != nil {
		return nil, fmt.Errorf("%s: read pg_dist_node (is the citus extension created in that database?): %w", EnvURL, err)
	}
	var coordinator bool
	var n Node
	if _, err := pgx.ForEachRow(rows, []any{&coordinator, &n.Host, &n.Port}, func() error {
		if coordinator {
			c.Coordinator = n
		} else {
			c.Workers = append(c.Workers, n)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: read pg_dist_node: %w", EnvURL, err)
	}
	if len(c.Workers) == 0 {
		return nil, fmt.Errorf("%s: no active worker in pg_dist_node of that database", EnvURL)
	}
	return c, nil
}

// URL returns the URL of database name on node n, with the user and the
// parameters of the cluster's URLs. The coordinator is reached at the
// address of RHEO_TEST_CITUS_URL, which may differ from the one Citus
// knows it by.
func (c *Cluster) URL(n Node, name string) string {
	u := *c.admin
	if n != c.Coordinator {
		u.Host = n.Addr()
	}
	u.Path = "/" + name
	return u.String()
}

// NewDatabase creates a database for t on the coordinator and on each
// worker, with the citus extension created in each, the coordinator
// registered (citus_set_coordinator_host) and the workers added
// (citus_add_node); it drops the database on every node when t ends. It
// returns the database's URL on the coordinator; WorkerURLs gives its
// URLs on the workers.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	c.templateOnce.Do(func() { c.template, c.templateErr = c.makeTemplate() })
	require.NoError(t, c.templateErr, "make the Citus template database")
	u := c.copyEverywhere(t, c.template)
	c.Register(t, u)
	return u
}

// copyEverywhere creates a database for t on every node, a copy of the
// database template there, and drops it on every node when t ends. It
// returns the database's URL on the coordinator.
func (c *Cluster) copyEverywhere(t testing.TB, template string) string {
	t.Helper()
	name := "rheo_citus_test_" + randomSuffix()
	ctx := context.Background()
	// Registered first, so that a database created on some nodes only is
	// dropped too.
	t.Cleanup(func() {
		assert.NoErrorf(t, c.dropEverywhere(context.WithoutCancel(ctx), name), "drop the Citus test database %s", name)
	})
	nodes := c.nodes()
	err := parallel(len(nodes), func(i int) error {
		stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{template}.Sanitize()
		if err := execSQL(ctx, c.adminURL(nodes[i]), stmt); err != nil {
			return fmt.Errorf("on %s: %w", nodes[i].Addr(), err)
		}
		return nil
	})
	require.NoErrorf(t, err, "create the Citus test database %s", name)
	return c.URL(c.Coordinator, name)
}

// Register makes the database at databaseURL (a URL of NewDatabase) a
// cluster: it registers the coordinator (citus_set_coordinator_host) and
// adds the workers (citus_add_node) in it. NewDatabase does this; a test
// that drops and creates the citus extension again does it again.
func (c *Cluster) Register(t testing.TB, databaseURL string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, databaseURL)
	require.NoErrorf(t, err, "connect to the Citus test database %s", databaseURL)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT citus_set_coordinator_host($1, $2)", c.Coordinator.Host, c.Coordinator.Port)
	require.NoErrorf(t, err, "register the coordinator in %s", databaseURL)
	for _, w := range c.Workers {
		// Citus connects to the worker to add it; on a loaded machine
		// that connection can fail ("failure on connection marked as
		// essential"), and adding the node again then succeeds.
		for attempt := 1; ; attempt++ {
			_, err = conn.Exec(ctx, "SELECT citus_add_node($1, $2)", w.Host, w.Port)
			var pgErr *pgconn.PgError
			if err == nil || attempt == 5 || !errors.As(err, &pgErr) || !strings.Contains(pgErr.Message, "failure on connection") {
				break
			}
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		require.NoErrorf(t, err, "add the worker %s in %s", w.Addr(), databaseURL)
	}
}

// templatePrefix begins the names of the template databases.
const templatePrefix = "rheo_citus_template_"

// makeTemplate creates the database NewDatabase copies on every node: a
// CREATE EXTENSION citus takes seconds, a copy a fraction of one. It is
// dropped when the test binary ends (testskip.Run). Citus's maintenance
// daemon, connected to every database with the extension, would keep
// the template from being copied: the template refuses connections.
func (c *Cluster) makeTemplate() (string, error) {
	ctx := context.Background()
	name := templatePrefix + randomSuffix()
	testskip.AtExit(func() {
		if err := c.dropEverywhere(ctx, name); err != nil {
			fmt.Printf("rheo tests: drop the Citus template database %s: %v\n", name, err)
		}
	})
	nodes := c.nodes()
	return name, parallel(len(nodes), func(i int) error {
		admin := c.adminURL(nodes[i])
		testdb.DropOrphanTemplates(ctx, admin, templatePrefix)
		ident := pgx.Identifier{name}.Sanitize()
		err := execSQL(ctx, admin, "CREATE DATABASE "+ident)
		if err == nil {
			err = execSQL(ctx, admin, "COMMENT ON DATABASE "+ident+" IS "+quoteLiteral(testdb.TemplateOwner()))
		}
		if err == nil {
			err = execSQL(ctx, c.URL(nodes[i], name), "CREATE EXTENSION citus")
		}
		if err == nil {
			err = closeTemplate(ctx, admin, name)
		}
		if err != nil {
			return fmt.Errorf("on %s: %w", nodes[i].Addr(), err)
		}
		return nil
	})
}

// closeTemplate makes database name, on the server at admin, refuse
// connections, and ends those it has: a database is copied only when
// nobody is connected to it.
func closeTemplate(ctx context.Context, admin, name string) error {
	err := execSQL(ctx, admin, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" ALLOW_CONNECTIONS false")
	if err == nil {
		err = execSQL(ctx, admin, "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = "+quoteLiteral(name))
	}
	return err
}

// dropEverywhere drops database name on every node, the coordinator
// first: dropping it there closes the connections its backends hold to
// the workers.
func (c *Cluster) dropEverywhere(ctx context.Context, name string) error {
	err := dropDatabase(ctx, c.adminURL(c.Coordinator), name)
	return errors.Join(err, parallel(len(c.Workers), func(i int) error {
		return dropDatabase(ctx, c.adminURL(c.Workers[i]), name)
	}))
}

// dropDatabase drops database name of the server at admin. Citus's
// maintenance daemon, a background worker that DROP DATABASE … WITH
// (FORCE) does not end, can hold the database for a moment (Citus stops
// it for the drop, and it may be starting again): the drop is tried
// again while the database is in use (55006), for up to ten seconds.
func dropDatabase(ctx context.Context, admin, name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := testdb.DropDatabase(ctx, admin, name)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodes are the coordinator and the workers.
func (c *Cluster) nodes() []Node { return append([]Node{c.Coordinator}, c.Workers...) }

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// WorkerURLs returns the URLs of the database that databaseURL (a URL
// of NewDatabase) names on each worker, in the order of c.Workers.
func (c *Cluster) WorkerURLs(t testing.TB, databaseURL string) []string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	require.NoError(t, err, "parse database URL")
	name := strings.TrimPrefix(u.Path, "/")
	urls := make([]string, len(c.Workers))
	for i, w := range c.Workers {
		urls[i] = c.URL(w, name)
	}
	return urls
}

// adminURL is the URL of node n's administrative database: the one the
// cluster's URL names.
func (c *Cluster) adminURL(n Node) string {
	return c.URL(n, strings.TrimPrefix(c.admin.Path, "/"))
}

// execSQL runs sql on its own connection to the database at u.
func execSQL(ctx context.Context, u, sql string) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// parallel runs f(0) … f(n-1) at once and returns their errors joined.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
