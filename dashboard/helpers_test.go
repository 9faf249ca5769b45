package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/dashboard"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testlog"
	"github.com/rheo-go/rheo/internal/testskip"
)

// backend is a fresh migrated database.
type backend struct {
	name string
	url  string
	drv  driver.Driver
}

// forEachBackend runs fn on a fresh migrated SQLite file and a fresh
// migrated PostgreSQL database, as the subtests "sqlite" and "postgres".
func forEachBackend(t *testing.T, fn func(t *testing.T, b *backend)) {
	testbackend.Run(t, func(t *testing.T, tb *testbackend.Backend) {
		fn(t, openBackend(t, tb.Name, tb.URL))
	})
}

func openBackend(t *testing.T, name, u string) *backend {
	t.Helper()
	drv, err := connect.Open(context.Background(), u, &connect.Options{Migrate: true})
	require.NoError(t, err, "open %s", u)
	t.Cleanup(func() { drv.Close() })
	return &backend{name: name, url: u, drv: drv}
}

// bundle is a dashboard served by a test server.
type bundle struct {
	drv    driver.Driver
	h      *dashboard.Handler
	srv    *httptest.Server
	logs   *testlog.Buffer
	client *http.Client
	// base is the dashboard's URL: the server's plus the prefix.
	base string
}

// setup serves a dashboard of drv with opts (nil: test defaults, with
// quick sampling and refreshing) at the root, or under opts.Prefix.
func setup(t *testing.T, drv driver.Driver, opts *dashboard.Options) *bundle {
	t.Helper()
	if opts == nil {
		opts = &dashboard.Options{}
	}
	logs := &testlog.Buffer{}
	o := *opts
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	if o.SampleInterval == 0 {
		o.SampleInterval = 100 * time.Millisecond
	}
	if o.SampleWindow == 0 {
		o.SampleWindow = time.Minute
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = 200 * time.Millisecond
	}
	h, err := dashboard.New(context.Background(), drv, &o)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	var handler http.Handler = h
	if o.Prefix != "" {
		mux := http.NewServeMux()
		mux.Handle(o.Prefix+"/", h)
		handler = mux
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &bundle{drv: drv, h: h, srv: srv, logs: logs, client: client, base: srv.URL + o.Prefix}
}

// get fetches a dashboard path and returns the status and body.
func (b *bundle) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := b.client.Get(b.base + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// post posts a form to a dashboard path and returns the response, its
// body read.
func (b *bundle) post(t *testing.T, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := b.client.PostForm(b.base+path, form)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the page at path (the cookie jar keeps
// its cookie).
func (b *bundle) csrf(t *testing.T, path string) string {
	t.Helper()
	code, body := b.get(t, path)
	m := csrfRE.FindStringSubmatch(body)
	require.Equal(t, http.StatusOK, code, "GET %s: %d, no CSRF token in:\n%s", path, code, body)
	require.NotNil(t, m, "GET %s: %d, no CSRF token in:\n%s", path, code, body)
	return m[1]
}

// deadLetter appends payload to stream and dead-letters it for group
// with reason; it returns the event.
func deadLetter(t *testing.T, drv driver.Driver, stream, group, payload, reason string) rheo.Event {
	t.Helper()
	ctx := context.Background()
	ev, err := drv.Append(ctx, stream, json.RawMessage(payload), nil)
	require.NoError(t, err)
	for {
		leases, err := drv.Fetch(ctx, stream, group, &rheo.FetchOptions{MaxCount: 10})
		require.NoError(t, err)
		require.NotEmpty(t, leases, "event %s was not fetched", ev.ID)
		for _, l := range leases {
			if l.Event.ID == ev.ID {
				require.NoError(t, drv.Reject(ctx, l.LeaseID, reason))
				return ev
			}
			require.NoError(t, drv.Ack(ctx, l.LeaseID))
		}
	}
}

// newStream creates stream with partitions and group on it.
func newStream(t *testing.T, drv driver.Driver, stream string, partitions int, groups ...string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, drv.CreateStream(ctx, stream, partitions))
	for _, g := range groups {
		require.NoError(t, drv.CreateGroup(ctx, stream, g, nil))
	}
}

// EnvChromium names the variable that points the browser tests at a
// Chromium or Chrome binary.
const EnvChromium = "RHEO_TEST_CHROMIUM"

// chromiumPath finds the browser, or skips t (fails it under CI=true).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testskip.Missing(t, "Chromium", fmt.Sprintf("no Chromium for the browser tests: install it (apt-get install -y chromium) or set %s", EnvChromium))
	return ""
}

// newTab starts a headless Chromium of the test's own, with a fresh
// profile, and returns the context of its tab; it ends with the test.
func newTab(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1300, 1000),
	)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx), "start Chromium (%s)", path)
	return ctx
}

// browse runs steps in the tab, bounded by 60 seconds.
//
// Steps that find a node the page replaced between the query and the
// action ("No node with given id found": the document was still
// settling) are run again, from the first, until the 60 seconds are up;
// such a step has not acted yet.
func browse(t *testing.T, tab context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 60*time.Second)
	defer cancel()
	for {
		err := chromedp.Do(ctx, steps...)
		if err == nil {
			return
		}
		require.ErrorContains(t, err, "No node with given id found")
		require.NoError(t, ctx.Err(), "browse: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
}

// eval evaluates a JavaScript expression in the tab.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluate %s", expr)
	return v
}

// evalAwait evaluates a JavaScript expression giving a promise in the
// tab, and returns what the promise resolves to.
func evalAwait[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	require.NoError(t, err, "evaluate %s", expr)
	return v
}

// waitFor waits until the JavaScript expression is truthy in the tab,
// across the navigations a form's submission makes.
func waitFor(t *testing.T, tab context.Context, expr string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithDeadline(tab, deadline)
		// A page that a form's submission loads is complete before the
		// next step looks for its nodes: nodes found while it still loads
		// are replaced when it ends ("No node with given id found").
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`document.readyState === "complete" && (`+expr+`)`,
			chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		if err == nil {
			return
		}
		// A navigation (a form's submission) ends the page's JavaScript
		// context under the poll: Chromium's -32000 errors ("Inspected
		// target navigated or closed", "Cannot find context with
		// specified id", "Execution context was destroyed").
		if strings.Contains(err.Error(), "-32000") || strings.Contains(err.Error(), "context was destroyed") {
			if time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		text, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		require.NoError(t, err, "waiting for %s; the page shows:\n%s", expr, strings.TrimSpace(text))
	}
}

// jsString quotes s as a JavaScript string.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
