package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/dashboard"
	"github.com/rheo-go/rheo/driver"
)

// bigPayload is a JSON object of about n bytes.
func bigPayload(n int) string {
	return `{"type": "blob", "data": "` + strings.Repeat("x", n) + `"}`
}

// getLive fetches path as the page's script does, for its live parts.
func (b *bundle) getLive(t *testing.T, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	req.Header.Set("X-Rheo-Live", "1")
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestDashboardBoundedPages stores big payloads and reasons and checks
// that no page grows with them: previews with a link to the whole
// event, which its JSON gives back exactly, and live refreshes that
// carry only the parts they swap.
func TestDashboardBoundedPages(t *testing.T) {
	ctx := context.Background()
	b := openBackend(t, "sqlite", "sqlite://"+filepath.Join(t.TempDir(), "rheo.db"))
	newStream(t, b.drv, "blobs", 1, "billing")
	const count, size = 10, 512 << 10
	var first rheo.Event
	for i := range count {
		ev := deadLetter(t, b.drv, "blobs", "billing", bigPayload(size), strings.Repeat("reason ", size/7))
		if i == 0 {
			first = ev
		}
	}
	_, err := b.drv.Fetch(ctx, "blobs", "billing", nil)
	require.NoError(t, err)
	bn := setup(t, b.drv, &dashboard.Options{AllowActions: true})
	// Ten dead letters of half a megabyte, and their reasons, in a page
	// of about ten previews of a kilobyte each.
	const bound = 64 << 10

	t.Run("the group page shows previews of the dead letters", func(t *testing.T) {
		code, body := bn.get(t, "/streams/blobs/groups/billing")
		require.Equal(t, http.StatusOK, code, "GET the group page")
		require.LessOrEqual(t, len(body), bound, "GET the group page: bytes")
		wantContains(t, "the group page", body, "the whole payload, 524,", `href="/streams/blobs/events/0/1"`)
	})
	t.Run("the events page shows a line of each payload", func(t *testing.T) {
		code, body := bn.get(t, "/streams/blobs/events")
		require.Equal(t, http.StatusOK, code, "GET the events page")
		require.LessOrEqual(t, len(body), bound, "GET the events page: bytes")
	})
	t.Run("the event page shows the beginning, and links to the whole event", func(t *testing.T) {
		code, body := bn.get(t, "/streams/blobs/events/0/1")
		require.Equal(t, http.StatusOK, code, "GET the event page")
		require.LessOrEqual(t, len(body), dashboard.DefaultEventBytes+bound, "GET the event page: bytes")
		wantContains(t, "the event page", body, `id="payload-cut"`, `href="/streams/blobs/events/0/1/json"`)
		code, raw := bn.get(t, "/streams/blobs/events/0/1/json")
		var ev rheo.Event
		err := json.Unmarshal([]byte(raw), &ev)
		require.Equal(t, http.StatusOK, code, "GET the event's JSON")
		require.NoError(t, err, "GET the event's JSON")
		msg := fmt.Sprintf("the event's JSON is not the event as stored (%d bytes of payload)", len(ev.Payload))
		var got, want map[string]any
		require.NoError(t, json.Unmarshal(ev.Payload, &got), msg)
		require.NoError(t, json.Unmarshal(first.Payload, &want), msg)
		require.Equal(t, first.ID, ev.ID, msg)
		require.Equal(t, want["data"], got["data"], msg)
	})
	t.Run("a live refresh carries the live parts alone", func(t *testing.T) {
		code, body := bn.getLive(t, "/streams/blobs/groups/billing")
		msg := fmt.Sprintf("a live refresh of the group page: %d, %d bytes:\n%.2000s", code, len(body), body)
		require.Equal(t, http.StatusOK, code, msg)
		// True and False, not Contains: the message cuts the body short.
		require.True(t, strings.Contains(body, `id="group-state"`), msg)
		require.False(t, strings.Contains(body, `id="dead-letters"`), msg)
		require.False(t, strings.Contains(body, "<html"), msg)
		require.LessOrEqual(t, len(body), bound, msg)
		for _, path := range []string{"/", "/streams/blobs"} {
			code, body := bn.getLive(t, path)
			require.Equal(t, http.StatusOK, code, "a live refresh of %s: %d:\n%s", path, code, body)
			require.NotContains(t, body, "<html", "a live refresh of %s: %d:\n%s", path, code, body)
			require.Contains(t, body, "data-live", "a live refresh of %s: %d:\n%s", path, code, body)
		}
	})
	t.Run("rendering the group page costs about what the driver reads", func(t *testing.T) {
		stored := uint64(count * size * 2) // the payloads and the reasons
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		bn.get(t, "/streams/blobs/groups/billing")
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		require.LessOrEqual(t, alloc, 3*stored, "a group page allocated %d bytes for %d stored: the rendering copies the payloads", alloc, stored)
	})
}

// downDriver is a driver whose database does not answer, with the
// details of the connection in its error, as pgx gives them.
type downDriver struct{ driver.Driver }

const connectionDetails = "failed to connect to `user=app_owner database=payments`: 10.1.2.3:6543 (db.internal): dial error"

func (downDriver) ListStreams(context.Context) ([]rheo.StreamSummary, error) {
	return nil, rheo.Errorf(rheo.ErrBackendUnavailable, "%s", connectionDetails)
}

// TestDashboardDatabaseDown checks that a visitor is told the database
// does not answer, without its address, user or name, which the log
// gets.
func TestDashboardDatabaseDown(t *testing.T) {
	b := openBackend(t, "sqlite", "sqlite://"+filepath.Join(t.TempDir(), "rheo.db"))
	bn := setup(t, downDriver{b.drv}, nil)
	code, body := bn.get(t, "/")
	require.Equal(t, http.StatusServiceUnavailable, code, "GET /: %d\n%s", code, body)
	require.Contains(t, body, "The database does not answer", "GET /: %d\n%s", code, body)
	for _, detail := range []string{"app_owner", "payments", "10.1.2.3", "6543", "db.internal"} {
		assert.NotContains(t, body, detail, "the page shows %q:\n%s", detail, body)
	}
	wantContains(t, "the log", bn.logs.String(), "app_owner", "10.1.2.3:6543")
}

// TestDashboardSignInStaysUnderPrefix signs in with next paths that
// leave the dashboard's prefix once cleaned.
func TestDashboardSignInStaysUnderPrefix(t *testing.T) {
	b := openBackend(t, "sqlite", "sqlite://"+filepath.Join(t.TempDir(), "rheo.db"))
	bn := setup(t, b.drv, &dashboard.Options{Prefix: "/admin/rheo", Token: "s3cret-token"})
	for next, want := range map[string]string{
		"/admin/rheo/../secret":             "/admin/rheo/",
		"/admin/rheo/%2e%2e/secret":         "/admin/rheo/",
		"/admin/rheo/streams/../../../x":    "/admin/rheo/",
		"/admin/rheo/./streams/a/../b?x=1":  "/admin/rheo/streams/b?x=1",
		"/admin/rheo/streams/orders%2Feu":   "/admin/rheo/streams/orders%2Feu",
		"/admin/rheo":                       "/admin/rheo/",
		"/admin/rheosecret":                 "/admin/rheo/",
		"https://evil.example/admin/rheo/x": "/admin/rheo/",
	} {
		resp, _ := bn.post(t, "/login", url.Values{"token": {"s3cret-token"}, "next": {next}})
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "sign-in with next=%s: %d to %q, want 303 to %q", next, resp.StatusCode, resp.Header.Get("Location"), want)
		assert.Equal(t, want, resp.Header.Get("Location"), "sign-in with next=%s: %d to %q, want 303 to %q", next, resp.StatusCode, resp.Header.Get("Location"), want)
	}
}

// TestDashboardCSRFTiedToSession checks that a CSRF token, with its
// cookie, works only in the session it was made for.
func TestDashboardCSRFTiedToSession(t *testing.T) {
	b := openBackend(t, "sqlite", "sqlite://"+filepath.Join(t.TempDir(), "rheo.db"))
	newStream(t, b.drv, "orders", 1, "billing")
	signIn := func(t *testing.T, bn *bundle) {
		t.Helper()
		resp, _ := bn.post(t, "/login", url.Values{"token": {"s3cret-token"}, "next": {"/"}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "sign-in: %d", resp.StatusCode)
	}
	opts := &dashboard.Options{Token: "s3cret-token", AllowActions: true}
	alice := setup(t, b.drv, opts)
	signIn(t, alice)
	token := alice.csrf(t, "/streams/orders/groups/billing")
	var aliceCSRF *http.Cookie
	for _, c := range alice.client.Jar.Cookies(mustURL(t, alice.base+"/")) {
		if c.Name == "rheo_csrf" {
			aliceCSRF = c
		}
	}
	require.NotNil(t, aliceCSRF, "no rheo_csrf cookie")

	// Another visitor, signed in on the same dashboard, given Alice's
	// CSRF cookie and token (planted by a sibling site, or seen in a log).
	mallory := setup(t, b.drv, opts)
	mallory.base = alice.base
	signIn(t, mallory)
	mallory.client.Jar.SetCookies(mustURL(t, alice.base+"/"), []*http.Cookie{{Name: "rheo_csrf", Value: aliceCSRF.Value, Path: "/"}})
	resp, body := mallory.post(t, "/streams/orders/groups/billing/reopen", url.Values{"event_id": {"x"}, "csrf": {token}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "another session with Alice's CSRF cookie and token: %d, want 403\n%s", resp.StatusCode, body)
	resp, body = alice.post(t, "/streams/orders/groups/billing/reopen", url.Values{"event_id": {"x"}, "csrf": {token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "Alice with her token: %d, want 303\n%s", resp.StatusCode, body)
}

// TestDashboardShowsInvisibleCharacters stores ids, types, keys, consumer
// ids, reasons and payloads with bidirectional overrides, zero-width and
// control characters (names cannot hold them), and checks that the pages
// show them as escapes.
func TestDashboardShowsInvisibleCharacters(t *testing.T) {
	ctx := context.Background()
	b := openBackend(t, "sqlite", "sqlite://"+filepath.Join(t.TempDir(), "rheo.db"))
	stream, group := "orders", "billing"
	newStream(t, b.drv, stream, 1, group)
	p0 := 0
	_, err := b.drv.Append(ctx, stream, json.RawMessage(`{"type": "paid\u2066", "note": "a`+"\u202e"+`b"}`),
		&rheo.AppendOptions{Key: "k\u200d\x1b[2J", ID: "id\u2067", Partition: &p0})
	require.NoError(t, err)
	deadLetter(t, b.drv, stream, group, `{"type": "x`+"\u202e"+`"}`, "bad\u202e\x1b]0;t\x07")
	_, err = b.drv.Append(ctx, stream, json.RawMessage(`{"type": "next"}`), nil)
	require.NoError(t, err)
	_, err = b.drv.Fetch(ctx, stream, group, &rheo.FetchOptions{ConsumerID: "worker\u202e\x1b[2J"})
	require.NoError(t, err)
	bn := setup(t, b.drv, nil)
	for _, path := range []string{
		"/", "/streams/" + url.PathEscape(stream), "/streams/" + url.PathEscape(stream) + "/groups/" + url.PathEscape(group),
		"/streams/" + url.PathEscape(stream) + "/events", "/streams/" + url.PathEscape(stream) + "/events/0/1",
	} {
		code, body := bn.get(t, path)
		require.Equal(t, http.StatusOK, code, "GET %s: %d\n%s", path, code, body)
		// Attributes keep the stored text exactly (hidden inputs, links'
		// data); what is read must not hold it.
		text := stripAttributes(body)
		assert.False(t, strings.ContainsAny(text, "\u202e\u200b\u200d\u2066\u2067\x1b\x07"), "GET %s shows an invisible or control character as it is:\n%q", path, text)
		if strings.Contains(path, "/groups/") || strings.Contains(path, "/events") {
			assert.Contains(t, text, `\u202e`, "GET %s does not show the override as \\u202e:\n%s", path, text)
		}
	}
}

// stripAttributes removes the tags of an HTML page, leaving its text.
func stripAttributes(body string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(body, '<')
		if i < 0 {
			return b.String() + body
		}
		b.WriteString(body[:i])
		j := strings.IndexByte(body[i:], '>')
		if j < 0 {
			return b.String()
		}
		body = body[i+j+1:]
	}
}
