package testcitus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testskip"
)

// dirPrefix begins the name of a local cluster's temporary directory,
// followed by the test binary's process id and a dash.
const dirPrefix = "rheo-citus-"

// settings are the servers' settings, beside their port. A test cluster
// keeps nothing worth a crash: no fsync. Each node takes a few hundred
// connections (tests in parallel, and the coordinator's connections to
// the workers), a maintenance daemon per database with citus, and
// wal_level logical, so that shard moves can also be online ones. Citus
// commits multi-node writes in two phases: it would raise
// max_prepared_transactions to this itself, and say so in the log.
// node_conninfo without SSL keeps CREATE EXTENSION citus from turning
// SSL on with a self-signed certificate (ALTER SYSTEM).
var settings = []string{
	"listen_addresses=127.0.0.1",
	"unix_socket_directories=",
	"shared_preload_libraries=citus",
	"citus.node_conninfo=sslmode=disable",
	"fsync=off",
	"synchronous_commit=off",
	"full_page_writes=off",
	"max_connections=300",
	"max_prepared_transactions=600",
	"max_worker_processes=64",
	"wal_level=logical",
	"max_replication_slots=32",
	"max_wal_senders=32",
	"shared_buffers=64MB",
}

// install is where a PostgreSQL installation keeps what a cluster needs.
type install struct {
	bindir, pkglibdir, sharedir string
}

// findInstall locates the local PostgreSQL with Citus installed in it.
func findInstall() (install, error) {
	pgConfig := os.Getenv("PG_CONFIG")
	if pgConfig == "" {
		pgConfig = "/usr/lib/postgresql/15/bin/pg_config"
		if _, err := os.Stat(pgConfig); err != nil {
			pgConfig = "pg_config"
		}
	}
	var inst install
	for _, v := range []struct {
		flag string
		dir  *string
	}{{"--bindir", &inst.bindir}, {"--pkglibdir", &inst.pkglibdir}, {"--sharedir", &inst.sharedir}} {
		out, err := exec.Command(pgConfig, v.flag).Output()
		if err != nil {
			return install{}, missing{fmt.Errorf("no Citus for tests: no PostgreSQL installation (%s %s: %v); %s", pgConfig, v.flag, err, installHint)}
		}
		*v.dir = strings.TrimSpace(string(out))
	}
	for _, f := range []string{
		filepath.Join(inst.pkglibdir, "citus.so"),
		filepath.Join(inst.sharedir, "extension", "citus.control"),
	} {
		if _, err := os.Stat(f); err != nil {
			return install{}, missing{fmt.Errorf("no Citus for tests: no %s; %s", f, installHint)}
		}
	}
	return inst, nil
}

// server is one postgres process of a local cluster.
type server struct {
	dir    string
	port   int
	log    *os.File
	cmd    *exec.Cmd
	exited chan struct{}
}

// local is a cluster this package started.
type local struct {
	base    string
	servers []*server
}

// startLocal starts a coordinator and two workers from the local
// PostgreSQL, and has testskip.Run stop them and remove their files.
func startLocal() (*Cluster, error) {
	inst, err := findInstall()
	if err != nil {
		return nil, err
	}
	as, err := serverAccount()
	if err != nil {
		return nil, err
	}
	removeOrphans()
	base, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", dirPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	l := &local{base: base}
	c, err := l.start(inst, as)
	if err != nil {
		l.stop()
		return nil, err
	}
	testskip.AtExit(l.stop)
	return c, nil
}

// start makes the nodes' data directories and starts their servers.
func (l *local) start(inst install, as *account) (*Cluster, error) {
	if err := as.chown(l.base); err != nil {
		return nil, err
	}
	// One initdb, copied: faster than three on two cores, and the copies
	// are independent servers all the same.
	first := filepath.Join(l.base, "coordinator")
	initdb := exec.Command(filepath.Join(inst.bindir, "initdb"), "-D", first, "-U", "postgres",
		"--auth=trust", "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = sysProcAttr(as, false)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	names := []string{"coordinator", "worker1", "worker2"}
	if err := parallel(len(names)-1, func(i int) error {
		return copyDir(first, filepath.Join(l.base, names[i+1]), as)
	}); err != nil {
		return nil, fmt.Errorf("copy the data directory: %w", err)
	}
	ports, err := freePorts(len(names))
	if err != nil {
		return nil, err
	}
	slices.Sort(ports)
	for i, name := range names {
		l.servers = append(l.servers, &server{dir: filepath.Join(l.base, name), port: ports[i]})
	}
	if err := parallel(len(l.servers), func(i int) error {
		return l.servers[i].start(inst, as, filepath.Join(l.base, names[i]+".log"))
	}); err != nil {
		return nil, err
	}
	admin, _ := url.Parse(fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", ports[0]))
	c := &Cluster{Coordinator: Node{Host: "127.0.0.1", Port: ports[0]}, admin: admin}
	for _, p := range ports[1:] {
		c.Workers = append(c.Workers, Node{Host: "127.0.0.1", Port: p})
	}
	return c, nil
}

// start starts s, logging to logPath, and returns once it accepts
// connections.
func (s *server) start(inst install, as *account, logPath string) error {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.log = log
	args := []string{"-D", s.dir, "-c", "port=" + strconv.Itoa(s.port)}
	for _, setting := range settings {
		args = append(args, "-c", setting)
	}
	s.cmd = exec.Command(filepath.Join(inst.bindir, "postgres"), args...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = sysProcAttr(as, true)
	s.exited = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		defer close(s.exited)
		// The server is to die with this thread (sysProcAttr): the thread
		// is kept for this goroutine, which lives as long as the server.
		runtime.LockOSThread()
		err := s.cmd.Start()
		started <- err
		if err == nil {
			_ = s.cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		s.cmd = nil
		return fmt.Errorf("start postgres in %s: %w", s.dir, err)
	}
	probe := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=1", s.port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("postgres in %s exited at start:\n%s", s.dir, tail(logPath))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, probe)
		if err == nil {
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres in %s does not answer on port %d: %v\n%s", s.dir, s.port, testdb.RootCause(err), tail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop stops the servers (a fast shutdown, a kill after a while) and
// removes the cluster's files.
func (l *local) stop() {
	_ = parallel(len(l.servers), func(i int) error {
		s := l.servers[i]
		if s.cmd != nil {
			_ = s.cmd.Process.Signal(os.Interrupt)
			select {
			case <-s.exited:
			case <-time.After(30 * time.Second):
				_ = s.cmd.Process.Kill()
				<-s.exited
			}
		}
		if s.log != nil {
			_ = s.log.Close()
		}
		return nil
	})
	_ = os.RemoveAll(l.base)
}

// removeOrphans removes the directories of local clusters whose test
// binary ended without removing them, unless a server still runs there.
func removeOrphans() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := strings.CutPrefix(e.Name(), dirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, _, _ = strings.Cut(pid, "-")
		if n, err := strconv.Atoi(pid); err != nil || testdb.Alive(n) {
			continue
		}
		dir := filepath.Join(os.TempDir(), e.Name())
		if !serverRuns(dir) {
			_ = os.RemoveAll(dir)
		}
	}
}

// serverRuns reports whether a postgres still runs in a data directory
// under dir: its postmaster.pid names a live process.
func serverRuns(dir string) bool {
	pidFiles, _ := filepath.Glob(filepath.Join(dir, "*", "postmaster.pid"))
	for _, f := range pidFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		first, _, _ := bytes.Cut(b, []byte("\n"))
		if n, err := strconv.Atoi(string(first)); err == nil && testdb.Alive(n) {
			return true
		}
	}
	return false
}

// copyDir copies the directory tree src to dst, keeping modes, owned by
// as.
func copyDir(src, dst string, as *account) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(path, target, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("copy %s: not a file or directory", path)
		}
		return as.chown(target)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// freePorts returns n distinct loopback ports that were free just now.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		// Kept open until all are found, so that the n ports differ.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail is the end of the file at path, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const keep = 4000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}
