package redis_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/workertest"
)

// TestWorker runs the worker's behavioural cases (internal/workertest,
// which the worker package runs on SQLite and PostgreSQL) on Redis: on
// the server at RHEO_TEST_REDIS_URL, else on a private redis-server
// started for the test (AOF on, loopback, a free port of its own) and
// stopped when it ends. Every case works on a stream of its own.
func TestWorker(t *testing.T) {
	url := os.Getenv("RHEO_TEST_REDIS_URL")
	if url == "" {
		url = startWorkerRedis(t)
	}
	workertest.Run(t, func(t *testing.T, clock driver.Clock) driver.Driver {
		drv, err := connect.Open(context.Background(), url, &connect.Options{Clock: clock, Migrate: true})
		if err != nil {
			t.Fatalf("open %s: %v", url, err)
		}
		t.Cleanup(func() { _ = drv.Close() })
		return drv
	})
}

// startWorkerRedis starts a redis-server of the test's own, on a free
// loopback port, with its data in a temporary directory, and returns its
// URL; it is stopped when t ends. Without redis-server the test is
// skipped, except under CI=true, where it fails.
func startWorkerRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no redis-server (apt-get install redis-server), and RHEO_TEST_REDIS_URL is not set")
		}
		t.Skip("no redis-server (apt-get install redis-server) and no RHEO_TEST_REDIS_URL")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
		"--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for !redisAnswers(addr) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on %s did not answer PING within 30s; its log:\n%s", addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "redis://" + addr + "/0"
}

// redisAnswers reports whether the server at addr answers PING.
func redisAnswers(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.TrimSpace(line) == "+PONG"
}
