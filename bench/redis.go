package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"

	// The Redis Streams driver registers redis:// and rediss:// with
	// package connect: the harness opens it by URL, as any program does.
	_ "github.com/rheo-go/rheo/driver/redis"
)

// systemRedis is Rheo on Redis (driver/redis), measured beside Rheo on
// PostgreSQL (systemRheo) and River (systemRiver) in the append, drain
// and latency workloads, and alone in the memory workload.
const systemRedis = "redis"

// workloadMemory measures what Redis holds per retained event.
const workloadMemory = "memory"

// redisSizes are the flags of Rheo on Redis.
type redisSizes struct {
	off     bool   // --redis=false: PostgreSQL and River only
	url     string // a server of the caller's; "" starts a private one
	server  string // the redis-server binary of the private server
	memoryN int    // events of the memory workload
}

func (s *redisSizes) flags(fs *flag.FlagSet) {
	fs.Func("redis", "run Rheo on Redis beside PostgreSQL and River (true or false); defaults to true", func(v string) error {
		on, err := strconv.ParseBool(v)
		s.off = !on
		return err
	})
	fs.StringVar(&s.url, "redis-url", "", "Redis `URL` (redis://host:port/db) for Rheo on Redis; defaults to a private redis-server "+
		"the harness starts on a free loopback port (AOF on, appendfsync everysec) and stops at the end")
	fs.StringVar(&s.server, "redis-server", "redis-server", "the redis-server `binary` of the private server")
	fs.IntVar(&s.memoryN, "memory-n", 100_000, "events of the memory workload (Redis memory per retained event)")
}

// redisQuick are the Redis sizes under --quick.
var redisQuick = map[string]string{"memory-n": "2000"}

// redisTarget is the Redis server of systemRedis: a private redis-server
// started for the run, or the one --redis-url names.
type redisTarget struct {
	url  string
	addr string // host:port, for INFO
	// user and password authenticate INFO's connection, as in the URL.
	user, password string
	// cmd and dir are the private server's process and data directory;
	// nil and "" for a server of the caller's.
	cmd *exec.Cmd
	dir string
}

// startRedis returns the server of s: the one s.url names, or a private
// redis-server on a free loopback port with AOF on (appendfsync
// everysec, the durability docs/redis.md states), its data in a
// temporary directory removed by close.
func startRedis(ctx context.Context, s redisSizes) (*redisTarget, error) {
	if s.url != "" {
		u, err := url.Parse(s.url)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("--redis-url %s: want redis://host:port/db", redact(s.url))
		}
		t := &redisTarget{url: s.url, addr: u.Host}
		if u.User != nil {
			t.user = u.User.Username()
			t.password, _ = u.User.Password()
		}
		if u.Port() == "" {
			t.addr = net.JoinHostPort(u.Hostname(), "6379")
		}
		return t, t.wait(ctx, 5*time.Second)
	}
	bin, err := exec.LookPath(s.server)
	if err != nil {
		return nil, fmt.Errorf("no %s for Rheo on Redis (apt-get install redis-server), or pass --redis-url or --redis=false", s.server)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find a free port for redis-server: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "rheo-bench-redis-")
	if err != nil {
		return nil, err
	}
	t := &redisTarget{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir}
	t.url = "redis://" + t.addr + "/0"
	t.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
		"--logfile", filepath.Join(dir, "redis.log"))
	if err := t.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	if err := t.wait(ctx, 30*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return nil, errors.Join(err, t.close(), fmt.Errorf("redis-server's log:\n%s", log))
	}
	return t, nil
}

// wait waits until the server answers PING, for at most timeout.
func (t *redisTarget) wait(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := t.command(ctx, "PING")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis at %s did not answer PING within %s: %w", t.addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// close stops the private server and removes its data; a server of the
// caller's is left as it is.
func (t *redisTarget) close() error {
	if t.cmd == nil {
		return nil
	}
	_ = t.cmd.Process.Kill()
	_ = t.cmd.Wait()
	return os.RemoveAll(t.dir)
}

// withRheo runs f on Rheo on Redis, opened by URL through package
// connect, and drops every stream f created when it returns, so that a
// run leaves the server as it found it.
func (t *redisTarget) withRheo(ctx context.Context, f func(*rheoSystem) error) (err error) {
	drv, err := connect.Open(ctx, t.url, &connect.Options{Migrate: true})
	if err != nil {
		return fmt.Errorf("open %s: %w", redact(t.url), err)
	}
	defer drv.Close()
	before, err := drv.ListStreams(ctx)
	if err != nil {
		return err
	}
	existed := map[string]bool{}
	for _, s := range before {
		existed[s.Name] = true
	}
	defer func() {
		ctx := context.WithoutCancel(ctx)
		after, lerr := drv.ListStreams(ctx)
		err = errors.Join(err, lerr)
		for _, s := range after {
			if !existed[s.Name] {
				_, derr := drv.DropStream(ctx, s.Name, &rheo.DropOptions{Confirm: true})
				err = errors.Join(err, derr)
			}
		}
	}()
	return f(&rheoSystem{drv: drv})
}

// usedMemory is the server's used_memory (INFO memory): the bytes its
// allocator holds for data and its own structures.
func (t *redisTarget) usedMemory(ctx context.Context) (int64, error) {
	info, err := t.info(ctx, "memory")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(info["used_memory"], 10, 64)
}

// settings are what the report prints of the server: its version and
// persistence.
func (t *redisTarget) settings(ctx context.Context) (string, error) {
	server, err := t.info(ctx, "server")
	if err != nil {
		return "", err
	}
	persistence, err := t.info(ctx, "persistence")
	if err != nil {
		return "", err
	}
	fsync := "?"
	if reply, err := t.command(ctx, "CONFIG", "GET", "appendfsync"); err == nil {
		if kv, ok := reply.([]any); ok && len(kv) == 2 {
			fsync = fmt.Sprint(kv[1])
		}
	}
	where := "a private server started by the harness"
	if t.cmd == nil {
		where = redact(t.url)
	}
	return fmt.Sprintf("%s; aof_enabled=%s appendfsync=%s (%s)", server["redis_version"], persistence["aof_enabled"], fsync, where), nil
}

// info returns the fields of one INFO section.
func (t *redisTarget) info(ctx context.Context, section string) (map[string]string, error) {
	reply, err := t.command(ctx, "INFO", section)
	if err != nil {
		return nil, err
	}
	text, ok := reply.(string)
	if !ok {
		return nil, fmt.Errorf("INFO %s: unexpected reply %T", section, reply)
	}
	fields := map[string]string{}
	for line := range strings.SplitSeq(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields, nil
}

// command sends one command on a connection of its own (authenticated
// as the URL says) and returns the reply: a string, an int64, or a
// []any. The harness sends a few such commands per run, outside every
// timed section.
func (t *redisTarget) command(ctx context.Context, args ...string) (any, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	r := bufio.NewReader(conn)
	if t.password != "" {
		auth := []string{"AUTH", t.password}
		if t.user != "" {
			auth = []string{"AUTH", t.user, t.password}
		}
		if _, err := roundTrip(conn, r, auth); err != nil {
			return nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	return roundTrip(conn, r, args)
}

// roundTrip writes args as a RESP array and reads the reply.
func roundTrip(w io.Writer, r *bufio.Reader, args []string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return nil, err
	}
	return readReply(r)
}

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch body := line[1:]; line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errors.New(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		items := make([]any, n)
		for i := range items {
			if items[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return items, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

// onRedis runs f on Rheo on Redis.
func (c *config) onRedis(f func(ctx context.Context, s *rheoSystem) ([]sample, error)) func(context.Context) ([]sample, error) {
	if c.redis == nil {
		return nil
	}
	return func(ctx context.Context) (samples []sample, err error) {
		err = c.redis.withRheo(ctx, func(s *rheoSystem) error {
			samples, err = f(ctx, s)
			return err
		})
		return samples, err
	}
}

// memoryMeasurement measures what Redis holds per retained event: the
// growth of used_memory over --memory-n events appended to one
// partition (the events' entries, their id index, the stream's
// bookkeeping), and again once a group has acked them all (what the
// group's delivery state adds, if it keeps any after the acks).
func (c *config) memoryMeasurement() measurement {
	n := c.redisSizes.memoryN
	return measurement{
		label: fmt.Sprintf("memory n=%d", n),
		redis: c.onRedis(func(ctx context.Context, s *rheoSystem) ([]sample, error) {
			stream, err := s.stream(ctx, 1)
			if err != nil {
				return nil, err
			}
			if err := s.drv.CreateGroup(ctx, stream, "memory", nil); err != nil {
				return nil, err
			}
			before, err := c.redis.usedMemory(ctx)
			if err != nil {
				return nil, err
			}
			if err := s.appendAll(ctx, stream, n); err != nil {
				return nil, err
			}
			retained, err := c.redis.usedMemory(ctx)
			if err != nil {
				return nil, err
			}
			if _, err := s.consume(ctx, stream, "memory", n, 64); err != nil {
				return nil, err
			}
			drained, err := c.redis.usedMemory(ctx)
			if err != nil {
				return nil, err
			}
			return []sample{
				{"memory per retained event", "bytes/event", float64(retained-before) / float64(n)},
				{"memory per retained event, one group drained", "bytes/event", float64(drained-before) / float64(n)},
			}, nil
		}),
	}
}
