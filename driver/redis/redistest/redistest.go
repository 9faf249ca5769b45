// Package redistest runs private Redis servers for tests: one server
// with the append-only file on, and a three-master Redis Cluster, each
// on loopback ports of its own with its files in a temporary directory,
// started from the redis-server (and redis-cli) on PATH.
//
// StandaloneURL and ClusterURL give a test the URL of a running
// deployment: the one named by RHEO_TEST_REDIS_URL or
// RHEO_TEST_REDIS_CLUSTER (comma-separated seed addresses) when set,
// else one this package starts on first use and shares with the rest of
// the process. A test binary that uses them calls Main from its TestMain,
// which stops what was started when the tests end. Without redis-server
// the tests that need it are skipped, except under CI=true, where they
// fail.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Server is a redis-server process this package started.
type Server struct {
	// Addr is the server's host:port on loopback.
	Addr string
	dir  string
	args []string
	cmd  *exec.Cmd
	// exited is closed when the process has ended, with exitErr set.
	exited  chan struct{}
	exitErr error
}

// ServerOptions are the settings of StartServer.
type ServerOptions struct {
	// Dir holds the server's files (the append-only file, nodes.conf).
	// Defaults to a new temporary directory, removed by Stop.
	Dir string
	// Fsync is the appendfsync setting: "always", "everysec" or "no".
	// Defaults to "everysec".
	Fsync string
	// Cluster starts the server with cluster mode on.
	Cluster bool
}

// StartServer starts a redis-server with the append-only file on, on a
// free loopback port, and waits until it answers. opts may be nil.
func StartServer(opts *ServerOptions) (*Server, error) {
	if opts == nil {
		opts = &ServerOptions{}
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed: %w", err)
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "rheo-redis-"); err != nil {
			return nil, err
		}
	}
	fsync := opts.Fsync
	if fsync == "" {
		fsync = "everysec"
	}
	port, err := freePort(opts.Cluster)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", fsync, "--save", "",
		"--daemonize", "no", "--protected-mode", "no", "--logfile", filepath.Join(dir, "redis.log"),
	}
	if opts.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000")
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, args: append([]string{bin}, args...)}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	exited := make(chan struct{})
	s.exited = exited
	go func() {
		s.exitErr = cmd.Wait()
		close(exited)
	}()
	if err := s.waitReady(10 * time.Second); err != nil {
		_ = s.Kill()
		return err
	}
	return nil
}

// waitReady pings the server until it answers PONG (not LOADING).
func (s *Server) waitReady(timeout time.Duration) error {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redis-server on %s exited: %v (see %s)", s.Addr, s.exitErr, filepath.Join(s.dir, "redis.log"))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer within %v: %w", s.Addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Kill ends the server at once (SIGKILL): what the append-only file had
// written survives, as after a crash.
func (s *Server) Kill() error {
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
	return nil
}

// Restart starts the server again on the same port and files, after
// Kill, and waits until it has loaded its data.
func (s *Server) Restart() error {
	if s.cmd != nil {
		return errors.New("the server is running")
	}
	return s.start()
}

// Stop ends the server and removes its directory.
func (s *Server) Stop() {
	_ = s.Kill()
	_ = os.RemoveAll(s.dir)
}

// Cluster is a Redis Cluster of three masters this package started.
type Cluster struct {
	// Nodes are the masters.
	Nodes []*Server
}

// StartCluster starts three redis-servers in cluster mode and joins them
// with redis-cli --cluster create, each master holding a third of the
// slots, and waits until the cluster is ok on every node.
func StartCluster() (*Cluster, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli is not installed: %w", err)
	}
	c := &Cluster{}
	for range 3 {
		s, err := StartServer(&ServerOptions{Cluster: true})
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Seeds()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		client := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1})
		for {
			info, err := client.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = client.Close()
				c.Stop()
				return nil, fmt.Errorf("the cluster did not become ok on %s: %v %s", n.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = client.Close()
	}
	return c, nil
}

// Seeds are the masters' addresses.
func (c *Cluster) Seeds() []string {
	seeds := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		seeds[i] = n.Addr
	}
	return seeds
}

// URL is the cluster's redis+cluster:// URL.
func (c *Cluster) URL() string { return ClusterSeedsURL(c.Seeds()) }

// Stop ends every node and removes their directories.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// ClusterSeedsURL is the redis+cluster:// URL of a cluster with these
// seed addresses.
func ClusterSeedsURL(seeds []string) string {
	return "redis+cluster://" + strings.Join(seeds, ",") + "/"
}

// freePort finds a free loopback port; for a cluster node its bus port
// (port + 10000) must be free too.
func freePort(cluster bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !cluster {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		_ = bus.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair for a cluster node")
}

var shared struct {
	mu         sync.Mutex
	server     *Server
	serverErr  error
	cluster    *Cluster
	clusterErr error
}

// StandaloneURL returns the URL of a running Redis server:
// RHEO_TEST_REDIS_URL when set, else the URL of a server started on
// first use and shared by the process (Main stops it). Without
// redis-server it skips tb, or fails it under CI=true.
func StandaloneURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv("RHEO_TEST_REDIS_URL"); u != "" {
		return u
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server == nil && shared.serverErr == nil {
		shared.server, shared.serverErr = StartServer(nil)
	}
	if shared.serverErr != nil {
		unavailable(tb, shared.serverErr)
	}
	return shared.server.URL()
}

// ClusterURL returns the URL of a running Redis Cluster: of the seeds in
// RHEO_TEST_REDIS_CLUSTER when set, else of a three-master cluster
// started on first use and shared by the process (Main stops it).
// Without redis-server it skips tb, or fails it under CI=true.
func ClusterURL(tb testing.TB) string {
	tb.Helper()
	if seeds := os.Getenv("RHEO_TEST_REDIS_CLUSTER"); seeds != "" {
		return ClusterSeedsURL(strings.Split(seeds, ","))
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil && shared.clusterErr == nil {
		shared.cluster, shared.clusterErr = StartCluster()
	}
	if shared.clusterErr != nil {
		unavailable(tb, shared.clusterErr)
	}
	return shared.cluster.URL()
}

// RequireServer skips tb, or fails it under CI=true, when redis-server
// (or redis-cli, which a cluster needs) is not installed: for tests that
// start servers of their own with StartServer or StartCluster.
func RequireServer(tb testing.TB) {
	tb.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			unavailable(tb, fmt.Errorf("%s is not installed: %w", bin, err))
		}
	}
}

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("Redis is required under CI=true: %v", err)
	}
	tb.Skipf("no Redis to test against: %v", err)
}

// Main runs the tests of m and stops the servers StandaloneURL and
// ClusterURL started, then exits with the tests' code: call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the servers StandaloneURL and ClusterURL started.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server != nil {
		shared.server.Stop()
		shared.server = nil
	}
	if shared.cluster != nil {
		shared.cluster.Stop()
		shared.cluster = nil
	}
	shared.serverErr, shared.clusterErr = nil, nil
}
