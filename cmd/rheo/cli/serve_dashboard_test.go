package cli_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rheo-go/rheo/cmd/rheo/cli"
)

// cliServe runs rheo serve in-process with args and returns the URL it
// listens on and a function that interrupts it and returns its exit
// status and stderr.
func cliServe(t *testing.T, args ...string) (string, func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &cliSyncBuffer{}, &cliSyncBuffer{}
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
				t.Error("rheo serve did not stop after the interrupt")
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
	t.Fatalf("rheo serve did not say where it listens: %q, stderr %q", stdout.String(), stderr.String())
	return "", nil
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestCLIServeDashboard(t *testing.T) {
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		b.cliStream(t, "orders", 2, 5)

		t.Run("the dashboard is at /, read-only by default, beside /metrics and /healthz", func(t *testing.T) {
			base, stop := cliServe(t, "--listen", "127.0.0.1:0", "--database-url", b.url, "--sample-interval", "100ms")
			code, body := httpGet(t, base+"/")
			if code != http.StatusOK || !strings.Contains(body, `href="/streams/orders"`) || !strings.Contains(body, "read-only") {
				t.Errorf("GET /: %d\n%s", code, body)
			}
			code, body = httpGet(t, base+"/streams/orders/groups/billing")
			if code != http.StatusOK || strings.Contains(body, "<form") {
				t.Errorf("GET the group: %d\n%s", code, body)
			}
			resp, err := http.PostForm(base+"/streams/orders/groups/billing/reopen", url.Values{"event_id": {"x"}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST reopen on the read-only dashboard: %d, want 403", resp.StatusCode)
			}
			if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
				t.Errorf("/healthz: %d %q", code, body)
			}
			if code, body := httpGet(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "rheo_scrape_success 1") {
				t.Errorf("/metrics: %d\n%s", code, body)
			}
			code, stderr := stop()
			if code != cli.ExitOK || !strings.Contains(stderr, "action refused: read-only") {
				t.Errorf("rheo serve exited %d; stderr %q", code, stderr)
			}
		})

		t.Run("with a token the dashboard needs it, /metrics and /healthz do not", func(t *testing.T) {
			t.Setenv(cli.EnvDashboardToken, "t0ken")
			base, _ := cliServe(t, "--listen", "127.0.0.1:0", "--database-url", b.url, "--allow-actions")
			if code, _ := httpGet(t, base+"/"); code != http.StatusUnauthorized {
				t.Errorf("GET / without the token: %d, want 401", code)
			}
			req, _ := http.NewRequest(http.MethodGet, base+"/streams/orders", nil)
			req.Header.Set("Authorization", "Bearer t0ken")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET the stream with the token: %d", resp.StatusCode)
			}
			for _, path := range []string{"/metrics", "/healthz"} {
				if code, _ := httpGet(t, base+path); code != http.StatusOK {
					t.Errorf("GET %s without the token: %d, want 200", path, code)
				}
			}
		})

		t.Run("--no-dashboard serves only the metrics and the health check", func(t *testing.T) {
			base, _ := cliServe(t, "--listen", "127.0.0.1:0", "--database-url", b.url, "--no-dashboard")
			if code, _ := httpGet(t, base+"/"); code != http.StatusNotFound {
				t.Errorf("GET /: %d, want 404", code)
			}
			if code, _ := httpGet(t, base+"/metrics"); code != http.StatusOK {
				t.Errorf("GET /metrics: %d", code)
			}
		})

		t.Run("actions on an address other machines may reach need credentials", func(t *testing.T) {
			r := b.run(t, "serve", "--listen", "0.0.0.0:0", "--allow-actions")
			if r.code != cli.ExitFailure || !strings.Contains(r.stderr, cli.EnvDashboardToken) || !strings.Contains(r.stderr, "nothing was started") {
				t.Errorf("%s", r)
			}
			r = b.run(t, "serve", "--listen", "127.0.0.1:0", "--sample-interval", "0s")
			if r.code != cli.ExitUsage {
				t.Errorf("--sample-interval 0s: %s", r)
			}
		})
	})
}
