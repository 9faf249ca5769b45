package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/rheo-go/rheo/internal/testlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cliServe runs rheo serve in-process with args and returns the URL it
// listens on and a function that interrupts it and returns its exit
// status and stderr.
func cliServe(t *testing.T, args ...string) (string, func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &testlog.Buffer{}, &testlog.Buffer{}
	done := make(chan int, 1)
	go func() { done <- cli.Run(ctx, append([]string{"serve"}, args...), nil, stdout, stderr) }()
	var (
		once sync.Once
		code int
	)
	stop := func() (int, string) {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(30 * time.Second):
				assert.Fail(t, "rheo serve did not stop after the interrupt")
			}
		})
		return code, stderr.String()
	}
	listening := regexp.MustCompile(`listening on (http://\S+) `)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			t.Cleanup(func() { stop() })
			return m[1], stop
		}
		select {
		case code := <-done:
			done <- code
			return "", stop
		default:
		}
	}
	cancel()
	require.FailNow(t, fmt.Sprintf("rheo serve did not say where it listens: %q, stderr %q", stdout.String(), stderr.String()))
	return "", nil
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestCLIServeDashboard(t *testing.T) {
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		b.cliStream(t, "orders", 2, 5)

		t.Run("the dashboard is at /, read-only by default, beside /metrics and /healthz", func(t *testing.T) {
			base, stop := cliServe(t, "--listen", "127.0.0.1:0", "--database-url", b.url, "--sample-interval", "100ms")
			code, body := httpGet(t, base+"/")
			assert.Equal(t, http.StatusOK, code, "GET /:\n%s", body)
			assert.Contains(t, body, `href="/streams/orders"`, "GET /: %d", code)
			assert.Contains(t, body, "read-only", "GET /: %d", code)
			code, body = httpGet(t, base+"/streams/orders/groups/billing")
			assert.Equal(t, http.StatusOK, code, "GET the group:\n%s", body)
			assert.NotContains(t, body, "<form", "GET the group: %d", code)
			resp, err := http.PostForm(base+"/streams/orders/groups/billing/reopen", url.Values{"event_id": {"x"}})
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "POST reopen on the read-only dashboard")
			code, body = httpGet(t, base+"/healthz")
			assert.Equal(t, http.StatusOK, code, "/healthz: %q", body)
			assert.Equal(t, "ok\n", body, "/healthz: %d", code)
			code, body = httpGet(t, base+"/metrics")
			assert.Equal(t, http.StatusOK, code, "/metrics:\n%s", body)
			assert.Contains(t, body, "rheo_scrape_success 1", "/metrics: %d", code)
			code, stderr := stop()
			assert.Equal(t, cli.ExitOK, code, "rheo serve exited; stderr %q", stderr)
			assert.Contains(t, stderr, "action refused: read-only", "rheo serve exited %d", code)
		})

		t.Run("with a token the dashboard needs it, /metrics and /healthz do not", func(t *testing.T) {
			t.Setenv(cli.EnvDashboardToken, "t0ken")
			base, _ := cliServe(t, "--listen", "127.0.0.1:0", "--database-url", b.url, "--allow-actions")
			code, _ := httpGet(t, base+"/")
			assert.Equal(t, http.StatusUnauthorized, code, "GET / without the token")
			req, _ := http.NewRequest(http.MethodGet, base+"/streams/orders", nil)
			req.Header.Set("Authorization", "Bearer t0ken")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, "GET the stream with the token")
			for _, path := range []string{"/metrics", "/healthz"} {
				code, _ := httpGet(t, base+path)
				assert.Equal(t, http.StatusOK, code, "GET %s without the token", path)
			}
		})

		t.Run("--no-dashboard serves only the metrics and the health check", func(t *testing.T) {
			base, _ := cliServe(t, "--listen", "127.0.0.1:0", "--database-url", b.url, "--no-dashboard")
			code, _ := httpGet(t, base+"/")
			assert.Equal(t, http.StatusNotFound, code, "GET /")
			code, _ = httpGet(t, base+"/metrics")
			assert.Equal(t, http.StatusOK, code, "GET /metrics")
		})

		t.Run("actions on an address other machines may reach need credentials", func(t *testing.T) {
			r := b.run(t, "serve", "--listen", "0.0.0.0:0", "--allow-actions")
			assert.Equal(t, cli.ExitFailure, r.code, "%s", r)
			assert.Contains(t, r.stderr, cli.EnvDashboardToken, "%s", r)
			assert.Contains(t, r.stderr, "nothing was started", "%s", r)
			r = b.run(t, "serve", "--listen", "127.0.0.1:0", "--sample-interval", "0s")
			assert.Equal(t, cli.ExitUsage, r.code, "--sample-interval 0s: %s", r)
		})
	})
}
