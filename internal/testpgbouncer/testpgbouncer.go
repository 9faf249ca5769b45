// Package testpgbouncer puts a PgBouncer in transaction pooling mode in
// front of the tests' PostgreSQL server (package testdb).
//
// The pooler is found through RHEO_TEST_PGBOUNCER_URL (.ci/run starts one
// and sets it), else the helper starts the pgbouncer binary itself for
// the test: it writes a pgbouncer.ini and a userlist into a temporary
// directory, listens on a free loopback port, and stops it when the test
// ends. When no pgbouncer binary is installed the test is skipped with a
// message saying how to install it, except under CI=true, where it fails.
package testpgbouncer

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testlog"
	"github.com/rheo-go/rheo/internal/testskip"
)

// EnvURL names the variable that points tests at a running PgBouncer. It
// must pool in transaction mode and forward every database name to the
// server the tests use (a "*" entry in [databases]); only its host and
// port are used.
const EnvURL = "RHEO_TEST_PGBOUNCER_URL"

const installHint = "install it with: apt-get install -y pgbouncer"

// Bouncer is a PgBouncer in transaction mode in front of the test server.
type Bouncer struct {
	// Addr is the pooler's host:port.
	Addr string

	log *testlog.Buffer // nil when the pooler was not started by this package
}

// Start returns a PgBouncer in transaction mode in front of the server of
// testdb.ServerURL: the one at RHEO_TEST_PGBOUNCER_URL, else one started
// for t and stopped when t ends. It skips or fails t as the package
// documentation says.
func Start(t testing.TB) *Bouncer {
	t.Helper()
	server := testdb.ServerURL(t)
	if raw := os.Getenv(EnvURL); raw != "" {
		u, err := url.Parse(raw)
		require.NoError(t, err, EnvURL)
		return &Bouncer{Addr: u.Host}
	}
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/bin"} {
			if _, serr := os.Stat(filepath.Join(dir, "pgbouncer")); serr == nil {
				bin, err = filepath.Join(dir, "pgbouncer"), nil
				break
			}
		}
	}
	if err != nil {
		testskip.Missing(t, "PgBouncer", fmt.Sprintf("no pgbouncer binary for the PgBouncer tests; %s, or set %s", installHint, EnvURL))
	}
	return start(t, bin, server)
}

// URL returns databaseURL (a direct URL of testdb) with its host and port
// replaced by the pooler's, plus the given query parameters.
func (b *Bouncer) URL(t testing.TB, databaseURL string, params ...string) string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	require.NoError(t, err, "parse database URL")
	u.Host = b.Addr
	q := u.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Log returns what the pooler has logged so far, or "" when it was not
// started by this package (RHEO_TEST_PGBOUNCER_URL).
func (b *Bouncer) Log() string {
	if b.log == nil {
		return ""
	}
	return b.log.String()
}

func start(t testing.TB, bin, server string) *Bouncer {
	t.Helper()
	su, err := url.Parse(server)
	require.NoError(t, err, "parse server URL")
	host, port := su.Hostname(), su.Port()
	if port == "" {
		port = "5432"
	}
	password, _ := su.User.Password()
	listenPort := freePort(t)

	dir := t.TempDir()
	userlist := filepath.Join(dir, "userlist.txt")
	ini := filepath.Join(dir, "pgbouncer.ini")
	// auth_type trust still looks the user up in auth_file, and logs in
	// to the server with the password found there.
	writeFile(t, userlist, fmt.Sprintf("%s %s\n", quote(su.User.Username()), quote(password)))
	writeFile(t, ini, fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 10
max_client_conn = 200
server_check_delay = 0
`, host, port, listenPort, userlist))

	args := []string{}
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root; it reads its files first and
		// then switches to this user. Its log goes to stderr, which this
		// process opened, so no file needs to be writable by that user.
		args = append(args, "-u", unprivilegedUser())
	}
	args = append(args, ini)
	cmd := exec.Command(bin, args...)
	logs := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	dieWithParent(cmd)
	require.NoError(t, cmd.Start(), "start pgbouncer")
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// SIGINT is PgBouncer's safe shutdown; a kill after a while covers
		// clients that hold on.
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	b := &Bouncer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(listenPort)), log: logs}
	probe := b.URL(t, testdb.WithDatabase(t, server, strings.TrimPrefix(su.Path, "/")), "sslmode", "disable")
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-exited:
			require.FailNow(t, fmt.Sprintf("pgbouncer exited at start:\n%s", logs))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, probe)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return b
		}
		if time.Now().After(deadline) {
			require.FailNow(t, fmt.Sprintf("pgbouncer does not answer at %s: %v\n%s", b.Addr, err, logs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unprivilegedUser is the user a PgBouncer started as root runs as.
func unprivilegedUser() string {
	if _, err := user.Lookup("postgres"); err == nil {
		return "postgres"
	}
	return "nobody"
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err, "find a free port")
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoErrorf(t, os.WriteFile(path, []byte(content), 0o600), "write %s", path)
}

// quote writes s as a userlist.txt field: in double quotes, with double
// quotes doubled.
func quote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
