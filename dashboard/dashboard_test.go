package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/dashboard"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testdb"
)

func wantContains(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		assert.Contains(t, body, want, "%s lacks %q:\n%s", what, want, body)
	}
}

func TestDashboardPages(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		newStream(t, b.drv, "orders/eu", 2, "billing", "shipping")
		require.NoError(t, b.drv.SetRetention(ctx, "orders/eu", 72*time.Hour))
		p0 := 0
		placed, err := b.drv.Append(ctx, "orders/eu", json.RawMessage(`{"type": "order.placed", "key": "o-1", "qty": 5}`),
			&rheo.AppendOptions{Partition: &p0, Metadata: rheo.Lineage{CorrelationID: "conv-1", Producer: "shop"}.Metadata()})
		require.NoError(t, err)
		meta, err := rheo.CausedBy(placed, nil)
		require.NoError(t, err)
		paid, err := b.drv.Append(ctx, "orders/eu", json.RawMessage(`{"type": "order.paid", "key": "o-1"}`), &rheo.AppendOptions{Metadata: meta})
		require.NoError(t, err)
		dl := deadLetter(t, b.drv, "orders/eu", "billing", `{"type": "order.placed", "qty": -1}`, "invalid quantity")
		_, err = b.drv.Append(ctx, "orders/eu", json.RawMessage(`{"type": "order.shipped"}`), nil)
		require.NoError(t, err)
		leased, err := b.drv.Fetch(ctx, "orders/eu", "billing", &rheo.FetchOptions{ConsumerID: "worker-7", LeaseDuration: time.Hour})
		require.NoError(t, err, "fetch: %v, %v", leased, err)
		require.Len(t, leased, 1, "fetch: %v, %v", leased, err)
		require.NoError(t, b.drv.SetOrdering(ctx, "orders/eu", "billing", rheo.OrderingKey))
		require.NoError(t, b.drv.CreateStream(ctx, "quiet", 1))
		bn := setup(t, b.drv, &dashboard.Options{Prefix: "/ops/rheo"})

		code, body := bn.get(t, "/")
		require.Equal(t, http.StatusOK, code, "GET /: %d\n%s", code, body)
		wantContains(t, "the stream list", body, `href="/ops/rheo/streams/orders%2Feu"`, ">orders/eu<", "3d", "read-only",
			"<span>0: empty</span>")
		assert.NotContains(t, body, "1–0", "the stream list shows an empty partition's watermarks low above high:\n%s", body)

		code, body = bn.get(t, "/streams/orders%2Feu")
		require.Equal(t, http.StatusOK, code, "GET the stream: %d\n%s", code, body)
		wantContains(t, "the stream page", body, "Stream orders/eu", `href="/ops/rheo/streams/orders%2Feu/groups/billing"`,
			">shipping<", `data-field="dead-letters">1<`, "Partitions", `<svg class="chart spark"`)

		code, body = bn.get(t, "/streams/orders%2Feu/groups/billing")
		require.Equal(t, http.StatusOK, code, "GET the group: %d\n%s", code, body)
		wantContains(t, "the group page", body, `id="total-lag"`, "invalid quantity", dl.ID, "&#34;qty&#34;: -1",
			`id="leases"`, `data-delivery="`+leased[0].Event.ID+`"`, "worker-7", "leased", `<svg class="chart"`,
			`id="ordering">key<`)
		assert.NotContains(t, body, "<form", "a read-only group page has a form:\n%s", body)

		code, body = bn.get(t, "/streams/orders%2Feu/events?type=order.paid")
		require.Equal(t, http.StatusOK, code, "GET events: %d\n%s", code, body)
		wantContains(t, "the search for order.paid", body, paid.ID)
		assert.NotContains(t, body, placed.ID, "the search for order.paid shows order.placed:\n%s", body)

		eventPath := fmt.Sprintf("/streams/orders%%2Feu/events/%d/%d", paid.Partition, paid.Sequence)
		code, body = bn.get(t, eventPath)
		require.Equal(t, http.StatusOK, code, "GET the event: %d\n%s", code, body)
		wantContains(t, "the paid event's page", body, "Caused by",
			fmt.Sprintf(`href="/ops/rheo/streams/orders%%2Feu/events/%d/%d"`, placed.Partition, placed.Sequence),
			"correlation_id=conv-1")
		code, body = bn.get(t, fmt.Sprintf("/streams/orders%%2Feu/events/%d/%d", placed.Partition, placed.Sequence))
		require.Equal(t, http.StatusOK, code, "GET the placed event: %d\n%s", code, body)
		wantContains(t, "the placed event's page", body, `id="causes"`, eventPath)

		for path, want := range map[string]int{
			"/streams/nope":                         http.StatusNotFound,
			"/streams/orders%2Feu/groups/nope":      http.StatusNotFound,
			"/streams/orders%2Feu/events/0/999":     http.StatusNotFound,
			"/streams/orders%2Feu/events/9/1":       http.StatusNotFound,
			"/streams/orders%2Feu/events/x/1":       http.StatusNotFound,
			"/streams/orders%2Feu/events?payload=[": http.StatusBadRequest,
			"/streams/orders%2Feu/events?from=soon": http.StatusBadRequest,
			"/no/such/page":                         http.StatusNotFound,
		} {
			code, body := bn.get(t, path)
			assert.Equal(t, want, code, "GET %s: %d, want %d\n%s", path, code, want, body)
		}
		code, _ = bn.get(t, "/assets/dashboard.js")
		assert.Equal(t, http.StatusOK, code, "GET the script: %d", code)
	})
}

func TestDashboardEventsPaging(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		newStream(t, b.drv, "orders", 2)
		base := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
		var ids []string
		for i := range 7 {
			ts := base.Add(time.Duration(i) * time.Minute)
			ev, err := b.drv.Append(ctx, "orders", json.RawMessage(fmt.Sprintf(`{"type": "tick", "n": %d, "tags": ["t%d"]}`, i, i%2)),
				&rheo.AppendOptions{Key: "k" + strconv.Itoa(i%3), TS: &ts})
			require.NoError(t, err)
			ids = append(ids, ev.ID)
		}
		bn := setup(t, b.drv, &dashboard.Options{PageSize: 3})
		nextRE := regexp.MustCompile(`id="next-page">([^<]+)<`)
		hrefRE := regexp.MustCompile(`href="([^"]+)" id="next-page"`)
		var seen []string
		path := "/streams/orders/events?from=2026-01-02T10:01:00Z&to=2026-01-02+10:05"
		for range 5 {
			code, body := bn.get(t, path)
			require.Equal(t, http.StatusOK, code, "GET %s: %d\n%s", path, code, body)
			for _, id := range ids {
				if strings.Contains(body, `data-event-id="`+id+`"`) {
					seen = append(seen, id)
				}
			}
			m := nextRE.FindStringSubmatch(body)
			if m == nil || m[1] != "Next page" {
				break
			}
			path = strings.TrimPrefix(html.UnescapeString(hrefRE.FindStringSubmatch(body)[1]), bn.base)
		}
		got, want := strings.Join(seen, ","), strings.Join(ids[1:6], ",")
		assert.Len(t, seen, 5, "paging from 10:01 to 10:05 saw %s, want the 5 events %s (in some order)", got, want)

		code, body := bn.get(t, "/streams/orders/events?"+url.Values{"payload": {`{"tags": ["t1"]}`}, "key": {"k1"}}.Encode())
		require.Equal(t, http.StatusOK, code, "GET by payload: %d\n%s", code, body)
		n := strings.Count(body, "data-event-id=")
		assert.Equal(t, 1, n, "payload {tags: [t1]} and key k1 found %d events, want only %s:\n%s", n, ids[1], body)
		assert.Contains(t, body, ids[1], "payload {tags: [t1]} and key k1 found %d events, want only %s:\n%s", n, ids[1], body)
	})
}

func TestDashboardSecurity(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		newStream(t, b.drv, "orders", 1, "billing")
		deadLetter(t, b.drv, "orders", "billing", `{"type": "x"}`, "r")

		t.Run("every page has a CSP with no inline script, and scripts only from files", func(t *testing.T) {
			bn := setup(t, b.drv, &dashboard.Options{AllowActions: true})
			scriptRE := regexp.MustCompile(`<script[^>]*>`)
			for _, path := range []string{"/", "/streams/orders", "/streams/orders/groups/billing", "/streams/orders/events",
				"/streams/orders/events/0/1", "/nope"} {
				resp, err := bn.client.Get(bn.base + path)
				require.NoError(t, err)
				resp.Body.Close()
				csp := resp.Header.Get("Content-Security-Policy")
				assert.Contains(t, csp, "script-src 'self'", "%s: CSP %q", path, csp)
				assert.NotContains(t, csp, "unsafe-inline", "%s: CSP %q", path, csp)
				assert.Contains(t, csp, "default-src 'none'", "%s: CSP %q", path, csp)
				assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), "%s: headers %v", path, resp.Header)
				assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), "%s: headers %v", path, resp.Header)
				_, body := bn.get(t, path)
				for _, tag := range scriptRE.FindAllString(body, -1) {
					assert.Contains(t, tag, `src="/assets/`, "%s: a script not from the dashboard's files: %s", path, tag)
				}
				assert.NotContains(t, body, " style=", "%s: inline style attribute:\n%s", path, body)
				assert.NotRegexp(t, ` on[a-z]+=`, body, "%s: event handler attribute:\n%s", path, body)
			}
		})

		t.Run("a POST without the session's CSRF token is refused", func(t *testing.T) {
			bn := setup(t, b.drv, &dashboard.Options{AllowActions: true})
			token := bn.csrf(t, "/streams/orders/groups/billing")
			for name, form := range map[string]url.Values{
				"no token":    {"event_id": {"x"}},
				"wrong token": {"event_id": {"x"}, "csrf": {strings.Repeat("A", len(token))}},
			} {
				resp, body := bn.post(t, "/streams/orders/groups/billing/reopen", form)
				assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %d\n%s", name, resp.StatusCode, body)
				assert.Contains(t, body, "security token", "%s: %d\n%s", name, resp.StatusCode, body)
			}
			// The token without its cookie (another browser) is refused too.
			other := setup(t, b.drv, &dashboard.Options{AllowActions: true})
			other.base = bn.base
			resp, _ := other.post(t, "/streams/orders/groups/billing/reopen", url.Values{"event_id": {"x"}, "csrf": {token}})
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "the token without its cookie: %d", resp.StatusCode)
			// A browser's cross-site POST is refused before the token is read.
			req, _ := http.NewRequest(http.MethodPost, bn.base+"/streams/orders/groups/billing/reopen",
				strings.NewReader(url.Values{"event_id": {"x"}, "csrf": {token}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			resp, err := bn.client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a cross-site POST: %d", resp.StatusCode)
			// With the token, the reopen goes through.
			resp, body := bn.post(t, "/streams/orders/groups/billing/reopen", url.Values{"event_id": {"x"}, "csrf": {token}})
			assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "with the token: %d\n%s", resp.StatusCode, body)
			cookies := bn.client.Jar.Cookies(mustURL(t, bn.base+"/"))
			hasCSRF := slices.ContainsFunc(cookies, func(c *http.Cookie) bool { return c.Name == "rheo_csrf" })
			assert.True(t, hasCSRF, "no rheo_csrf cookie in %v", cookies)
		})

		t.Run("with a token, every request needs it, as a bearer or through the sign-in page", func(t *testing.T) {
			bn := setup(t, b.drv, &dashboard.Options{Token: "s3cret-token"})
			code, body := bn.get(t, "/")
			assert.Equal(t, http.StatusUnauthorized, code, "without the token: %d\n%s", code, body)
			assert.Contains(t, body, `name="token"`, "without the token: %d\n%s", code, body)
			code, _ = bn.get(t, "/assets/style.css")
			assert.Equal(t, http.StatusOK, code, "the sign-in page's stylesheet: %d", code)
			req, _ := http.NewRequest(http.MethodGet, bn.base+"/streams/orders", nil)
			req.Header.Set("Authorization", "Bearer s3cret-token")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, "with the bearer token: %d", resp.StatusCode)
			resp, _ = bn.post(t, "/login", url.Values{"token": {"wrong"}, "next": {"/streams/orders"}})
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "sign-in with a wrong token: %d", resp.StatusCode)
			resp, _ = bn.post(t, "/login", url.Values{"token": {"s3cret-token"}, "next": {"//evil.example/x"}})
			assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "sign-in: %d to %q, want 303 to / (never off the dashboard)", resp.StatusCode, resp.Header.Get("Location"))
			assert.Equal(t, "/", resp.Header.Get("Location"), "sign-in: %d to %q, want 303 to / (never off the dashboard)", resp.StatusCode, resp.Header.Get("Location"))
			for _, c := range resp.Cookies() {
				if c.Name == "rheo_session" {
					assert.NotContains(t, c.Value, "s3cret", "the session cookie %+v", c)
					assert.True(t, c.HttpOnly, "the session cookie %+v", c)
					assert.Equal(t, http.SameSiteStrictMode, c.SameSite, "the session cookie %+v", c)
				}
			}
			code, body = bn.get(t, "/streams/orders")
			assert.Equal(t, http.StatusOK, code, "after signing in: %d\n%s", code, body)
		})

		t.Run("with basic auth, every request needs the user and password", func(t *testing.T) {
			bn := setup(t, b.drv, &dashboard.Options{BasicAuth: "ops:pa:ss", AllowActions: true})
			resp, err := http.Get(bn.base + "/")
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "without credentials: %d %v", resp.StatusCode, resp.Header)
			assert.True(t, strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic "), "without credentials: %d %v", resp.StatusCode, resp.Header)
			for creds, want := range map[[2]string]int{{"ops", "pa:ss"}: 200, {"ops", "nope"}: 401, {"root", "pa:ss"}: 401} {
				req, _ := http.NewRequest(http.MethodGet, bn.base+"/streams/orders/groups/billing", nil)
				req.SetBasicAuth(creds[0], creds[1])
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, want, resp.StatusCode, "as %v: %d, want %d", creds, resp.StatusCode, want)
			}
			// Actions log the user.
			jarURL := mustURL(t, bn.base)
			jarURL.User = url.UserPassword("ops", "pa:ss")
			bn.base = jarURL.String()
			token := bn.csrf(t, "/streams/orders/groups/billing")
			resp, body := bn.post(t, "/streams/orders/groups/billing/reopen", url.Values{"event_id": {"x"}, "csrf": {token}})
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, "reopen: %d\n%s", resp.StatusCode, body)
			wantContains(t, "the log", bn.logs.String(), "who=ops", "action=reopen", `result="reopened 0"`)
		})

		t.Run("invalid options are refused, naming the field", func(t *testing.T) {
			for _, opts := range []dashboard.Options{{Prefix: "rheo"}, {Prefix: "/rheo/"}, {BasicAuth: "nopassword"},
				{SampleInterval: -time.Second}, {SampleInterval: time.Minute, SampleWindow: time.Second}} {
				_, err := dashboard.New(context.Background(), b.drv, &opts)
				assert.ErrorContains(t, err, "Options.", "%+v", opts)
			}
		})
	})
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func TestDashboardReplayAndReset(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		newStream(t, b.drv, "orders", 2, "billing")
		for i := range 6 {
			p := i % 2
			_, err := b.drv.Append(ctx, "orders", json.RawMessage(`{"type": "x"}`), &rheo.AppendOptions{Partition: &p})
			require.NoError(t, err)
		}
		leases, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 10})
		require.NoError(t, err)
		for _, l := range leases {
			require.NoError(t, b.drv.Ack(ctx, l.LeaseID))
		}
		bn := setup(t, b.drv, &dashboard.Options{AllowActions: true})
		token := bn.csrf(t, "/streams/orders/groups/billing")
		form := url.Values{"csrf": {token}, "mode": {"sequence"}, "from_sequence": {"1"}, "step": {"count"}}

		resp, body := bn.post(t, "/streams/orders/groups/billing/replay", form)
		require.Equal(t, http.StatusOK, resp.StatusCode, "dry run: %d\n%s", resp.StatusCode, body)
		wantContains(t, "the dry run", body, "would make <strong>4</strong>", "Nothing has changed yet", "Replay 4 events", `name="step" value="confirm"`)
		lag, _ := b.drv.Lag(ctx, "orders", "billing", nil)
		assert.Zero(t, lag.Total, "the dry run changed the lag to %d", lag.Total)

		form.Set("step", "confirm")
		resp, body = bn.post(t, "/streams/orders/groups/billing/replay", form)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "replay: %d\n%s", resp.StatusCode, body)
		lag, _ = b.drv.Lag(ctx, "orders", "billing", nil)
		assert.EqualValues(t, 4, lag.Total, "after the replay the lag is %d, want 4", lag.Total)
		_, body = bn.get(t, "/streams/orders/groups/billing")
		wantContains(t, "the group page after the replay", body, "Replayed 4 events")

		form = url.Values{"csrf": {token}, "mode": {"time"}, "from_time": {"yesterday"}, "step": {"count"}}
		resp, body = bn.post(t, "/streams/orders/groups/billing/replay", form)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a replay from a bad time: %d\n%s", resp.StatusCode, body)
		assert.Contains(t, body, "is not a time", "a replay from a bad time: %d\n%s", resp.StatusCode, body)

		reset := url.Values{"csrf": {token}, "start_after": {"2"}, "partitions": {"1"}, "step": {"review"}}
		resp, body = bn.post(t, "/streams/orders/groups/billing/reset", reset)
		require.Equal(t, http.StatusOK, resp.StatusCode, "reset review: %d\n%s", resp.StatusCode, body)
		wantContains(t, "the reset review", body, "partitions 1", "after sequence 2", `name="confirm_group"`)
		reset.Set("step", "confirm")
		reset.Set("confirm_group", "billin")
		resp, body = bn.post(t, "/streams/orders/groups/billing/reset", reset)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "reset with the wrong name: %d\n%s", resp.StatusCode, body)
		assert.Contains(t, body, "Nothing was changed", "reset with the wrong name: %d\n%s", resp.StatusCode, body)
		lag, _ = b.drv.Lag(ctx, "orders", "billing", []int{1})
		assert.EqualValues(t, 2, lag.Total, "the refused reset changed partition 1's lag to %d", lag.Total)
		reset.Set("confirm_group", "billing")
		resp, body = bn.post(t, "/streams/orders/groups/billing/reset", reset)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "reset: %d\n%s", resp.StatusCode, body)
		lag, err = b.drv.Lag(ctx, "orders", "billing", nil)
		require.NoError(t, err)
		require.Len(t, lag.Partitions, 2, "after resetting partition 1 after sequence 2: %+v", lag)
		assert.EqualValues(t, 2, lag.Partitions[0].Lag, "after resetting partition 1 after sequence 2: %+v", lag)
		assert.EqualValues(t, 2, lag.Partitions[1].Frontier, "after resetting partition 1 after sequence 2: %+v", lag)
		assert.EqualValues(t, 1, lag.Partitions[1].Lag, "after resetting partition 1 after sequence 2: %+v", lag)
		wantContains(t, "the log", bn.logs.String(), `result="dry run: would replay 4"`, `result="replayed 4"`, "action=reset",
			"start_after=2", "result=reset")
	})
}

func TestDashboardInsufficientPrivilege(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	role := testdb.NewRole(t, "")
	dbURL := testdb.NewDatabase(t)
	owner := openBackend(t, "postgres", dbURL)
	newStream(t, owner.drv, "orders", 1, "billing")
	ev := deadLetter(t, owner.drv, "orders", "billing", `{"type": "x"}`, "r")
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "GRANT rheo_reader TO "+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	// connect.Open checks the schema version, which a rheo_reader may not
	// read: the driver is made from a pool, as a host would.
	pool, err := pgxpool.New(ctx, testdb.AsRole(t, dbURL, role))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reader := postgres.New(pool, nil)
	t.Cleanup(func() { reader.Close() })

	bn := setup(t, reader, &dashboard.Options{AllowActions: true})
	for _, path := range []string{"/", "/streams/orders", "/streams/orders/groups/billing", "/streams/orders/events"} {
		code, body := bn.get(t, path)
		assert.Equal(t, http.StatusOK, code, "GET %s as rheo_reader: %d\n%s", path, code, body)
	}
	token := bn.csrf(t, "/streams/orders/groups/billing")
	resp, body := bn.post(t, "/streams/orders/groups/billing/reopen", url.Values{"event_id": {ev.ID}, "csrf": {token}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "reopen as rheo_reader: %d\n%s", resp.StatusCode, body)
	wantContains(t, "the refusal", body, "permission denied", "rheo_admin", "Nothing was changed")
	wantContains(t, "the log", bn.logs.String(), "dashboard action failed", "action=reopen", "result=failed")
	info, _ := owner.drv.GroupInfo(ctx, "orders", "billing")
	assert.EqualValues(t, 1, info.DeadLetters, "the refused reopen changed the group: %+v", info)
}
