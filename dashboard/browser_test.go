package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/dashboard"
	"github.com/rheo-go/rheo/worker"
)

// The browser tests drive a headless Chromium against a dashboard served
// by the test, on PostgreSQL and SQLite. A global set by the test before
// a change, and found again after it, proves the page showed the change
// without a reload.

func TestDashboardBrowserStreamList(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		bn := setup(t, b.drv, nil)
		tab := newTab(t)
		browse(t, tab, chromedp.Navigate(bn.base+"/"))
		waitFor(t, tab, `document.getElementById("no-streams") !== null`)
		eval[chromedp.Void](t, tab, `window.rheoTestMarker = "not reloaded"`)

		newStream(t, b.drv, "orders", 2, "billing")
		for i := range 3 {
			p := i % 2
			_, err := b.drv.Append(context.Background(), "orders", json.RawMessage(`{"type": "order.placed"}`), &rheo.AppendOptions{Partition: &p})
			require.NoError(t, err)
		}
		waitFor(t, tab, `(document.querySelector('tr[data-stream="orders"] [data-field="high-watermark"]') || {}).textContent === "3"`)
		row := eval[string](t, tab, `document.querySelector('tr[data-stream="orders"]').innerText`)
		for _, want := range []string{"orders", "0: 1–2", "1: 1–1", "forever"} {
			assert.Contains(t, row, want, "the stream's row %q lacks %q", row, want)
		}
		got := eval[string](t, tab, `String(window.rheoTestMarker)`)
		assert.Equal(t, "not reloaded", got, "the page was reloaded to show the stream (marker %q)", got)
	})
}

func TestDashboardBrowserGroupLagFalls(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		const events, gate = 40, 20
		newStream(t, b.drv, "orders", 1, "billing")
		ctx := context.Background()
		for range events {
			_, err := b.drv.Append(ctx, "orders", json.RawMessage(`{"type": "order.placed"}`), nil)
			require.NoError(t, err)
		}
		bn := setup(t, b.drv, nil)
		tab := newTab(t)
		browse(t, tab, chromedp.Navigate(bn.base+"/streams/orders/groups/billing"))
		waitFor(t, tab, `document.getElementById("total-lag").textContent === "`+strconv.Itoa(events)+`"`)
		eval[chromedp.Void](t, tab, `window.rheoTestMarker = "not reloaded"`)

		// The worker handles the first gate events, then waits for release.
		release := make(chan struct{})
		w, err := worker.New(b.drv, &worker.Config{
			Stream: "orders", Group: "billing", Concurrency: 1, PollInterval: 50 * time.Millisecond,
			Handler: func(ctx context.Context, l rheo.Lease) error {
				if l.Event.Sequence > gate {
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				return nil
			},
		})
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		released := false
		t.Cleanup(func() {
			if !released {
				close(release)
			}
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			assert.NoError(t, w.Stop(stopCtx))
		})
		waitFor(t, tab, `document.getElementById("total-lag").textContent === "`+strconv.Itoa(events-gate)+`"`)
		close(release)
		released = true
		waitFor(t, tab, `document.getElementById("total-lag").textContent === "0"`)
		waitFor(t, tab, `(document.querySelector('#partitions tr[data-partition="0"] [data-field="lag"]') || {}).textContent === "0"`)
		got := eval[string](t, tab, `String(window.rheoTestMarker)`)
		assert.Equal(t, "not reloaded", got, "the page was reloaded to show the lag (marker %q)", got)
		// The chart was drawn from the server's samples.
		n := eval[int](t, tab, `document.querySelectorAll("#group-state svg.chart polyline, #group-state svg.chart circle").length`)
		assert.NotZero(t, n, "the lag chart shows no sample")
	})
}

// hostilePayload would set the page's title and a global if any of it
// ran as a script or an event handler.
const hostilePayload = `{"type": "order.placed", "note": "<script>document.title='pwned';window.rheoPwned=1</script>",` +
	` "img": "<img src=x onerror=\"window.rheoPwned=2\">", "close": "</pre><script>window.rheoPwned=3</script>"}`

func TestDashboardBrowserPayloadEscaped(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		newStream(t, b.drv, "orders", 1, "billing")
		ev := deadLetter(t, b.drv, "orders", "billing", hostilePayload, `<script>window.rheoPwned=4</script>`)
		bn := setup(t, b.drv, &dashboard.Options{AllowActions: true})
		tab := newTab(t)
		for _, path := range []string{
			"/streams/orders/groups/billing",
			"/streams/orders/events",
			"/streams/orders/events/0/" + strconv.FormatInt(ev.Sequence, 10),
		} {
			browse(t, tab, chromedp.Navigate(bn.base+path))
			waitFor(t, tab, `document.readyState === "complete"`)
			// Give an injected script or a failed image every chance to run.
			// The page's own have once it is complete (images hold the load
			// back); on a page that refreshes, so have those of the parts a
			// refresh swapped in, once a second refresh comes an interval
			// later.
			if eval[bool](t, tab, `document.body.getAttribute("data-refresh") !== "0"`) {
				waitFor(t, tab, `document.body.hasAttribute("data-refreshed")`)
				first := eval[string](t, tab, `document.body.getAttribute("data-refreshed")`)
				waitFor(t, tab, `document.body.getAttribute("data-refreshed") !== `+jsString(first))
			}
			got := eval[string](t, tab, `String(window.rheoPwned)`)
			assert.Equal(t, "undefined", got, "%s: a payload ran as script (rheoPwned = %s)", path, got)
			title := eval[string](t, tab, `document.title`)
			assert.NotContains(t, title, "pwned", "%s: a payload set the title to %q", path, title)
			n := eval[int](t, tab, `document.querySelectorAll("main script, main img, script:not([src])").length`)
			assert.Zero(t, n, "%s: the page has %d script or img elements made from the payload", path, n)
			text := eval[string](t, tab, `document.querySelector("main").innerText`)
			assert.Contains(t, text, `<script>document.title='pwned';window.rheoPwned=1</script>`, "%s: the payload is not shown as text:\n%s", path, text)
		}
		// The group page shows the reason as text too, and the payload
		// pretty-printed.
		browse(t, tab, chromedp.Navigate(bn.base+"/streams/orders/groups/billing"))
		reason := eval[string](t, tab, `document.querySelector("td.reason").textContent`)
		assert.Equal(t, `<script>window.rheoPwned=4</script>`, reason, "the reason shows as %q", reason)
		payload := eval[string](t, tab, `document.querySelector("pre.payload").textContent`)
		assert.Regexp(t, `\n  "note": "(\\u003cscript\\u003e|<script>)`, payload, "the payload is not pretty-printed JSON: %q", payload)
	})
}

func TestDashboardBrowserReopenDeadLetter(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		newStream(t, b.drv, "orders", 1, "billing")
		ev := deadLetter(t, b.drv, "orders", "billing", `{"type": "order.placed", "qty": -1}`, "invalid quantity")
		bn := setup(t, b.drv, &dashboard.Options{AllowActions: true})
		tab := newTab(t)
		browse(t, tab, chromedp.Navigate(bn.base+"/streams/orders/groups/billing"))
		waitFor(t, tab, `document.getElementById("dead-letter-count").textContent === "1"`)
		browse(t, tab, chromedp.Click(chromedp.CSS(`tr[data-event-id=`+jsString(ev.ID)+`] form[data-action="reopen"] button`)))
		waitFor(t, tab, `(document.getElementById("flash") || {textContent: ""}).textContent.includes("Reopened event `+ev.ID+`")`)
		waitFor(t, tab, `document.getElementById("dead-letter-count").textContent === "0"`)
		n := eval[int](t, tab, `document.querySelectorAll("tr[data-event-id]").length`)
		assert.Zero(t, n, "the group page still lists %d dead letters", n)

		leases, err := b.drv.Fetch(context.Background(), "orders", "billing", &rheo.FetchOptions{MaxCount: 10})
		require.NoError(t, err)
		require.Len(t, leases, 1, "after the reopen, fetch got %+v; want event %s at attempt 1", leases, ev.ID)
		require.Equal(t, ev.ID, leases[0].Event.ID, "after the reopen, fetch got %+v; want event %s at attempt 1", leases, ev.ID)
		require.EqualValues(t, 1, leases[0].Attempt, "after the reopen, fetch got %+v; want event %s at attempt 1", leases, ev.ID)
		logs := bn.logs.String()
		for _, want := range []string{"dashboard action", "action=reopen", "who=anonymous", "stream=orders", "group=billing", "event_id=" + ev.ID, `result="reopened 1"`} {
			assert.Contains(t, logs, want, "the log lacks %q:\n%s", want, logs)
		}
	})
}

func TestDashboardBrowserReadOnly(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		newStream(t, b.drv, "orders", 1, "billing")
		ev := deadLetter(t, b.drv, "orders", "billing", `{"type": "order.placed"}`, "rejected")
		bn := setup(t, b.drv, nil)
		tab := newTab(t)
		browse(t, tab, chromedp.Navigate(bn.base+"/streams/orders/groups/billing"))
		waitFor(t, tab, `document.querySelectorAll("tr[data-event-id]").length === 1`)
		n := eval[int](t, tab, `document.querySelectorAll("form[method=post], button, input[name=csrf]").length`)
		assert.Zero(t, n, "the read-only group page has %d action controls", n)
		mode := eval[string](t, tab, `document.querySelector(".mode").textContent`)
		assert.Equal(t, "read-only", mode, "the page says %q, want read-only", mode)
		// A POST from the page itself, with a made-up token, is refused.
		for _, action := range []string{"reopen", "replay", "reset"} {
			status := evalAwait[int](t, tab, `fetch(`+jsString(bn.base+"/streams/orders/groups/billing/"+action)+`, {method: "POST",
				body: new URLSearchParams({event_id: `+jsString(ev.ID)+`, csrf: "x", step: "confirm", mode: "sequence",
				from_sequence: "0", confirm_group: "billing"})}).then(r => r.status)`)
			assert.Equal(t, http.StatusForbidden, status, "POST %s from the read-only page: %d, want 403", action, status)
		}
		for _, action := range []string{"reopen", "replay", "reset"} {
			resp, _ := bn.post(t, "/streams/orders/groups/billing/"+action, url.Values{
				"event_id": {ev.ID}, "step": {"confirm"}, "mode": {"sequence"}, "from_sequence": {"0"}, "confirm_group": {"billing"},
			})
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "POST %s on a read-only dashboard: %d, want 403", action, resp.StatusCode)
		}
		info, err := b.drv.GroupInfo(context.Background(), "orders", "billing")
		require.NoError(t, err)
		assert.EqualValues(t, 1, info.DeadLetters, "the refused POSTs changed the group: %+v", info)
	})
}

func TestDashboardBrowserReplayAndReset(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		newStream(t, b.drv, "orders", 1, "billing")
		for range 4 {
			_, err := b.drv.Append(ctx, "orders", json.RawMessage(`{"type": "x"}`), nil)
			require.NoError(t, err)
		}
		leases, err := b.drv.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 10})
		require.NoError(t, err)
		for _, l := range leases {
			require.NoError(t, b.drv.Ack(ctx, l.LeaseID))
		}
		bn := setup(t, b.drv, &dashboard.Options{AllowActions: true})
		tab := newTab(t)
		browse(t, tab, chromedp.Navigate(bn.base+"/streams/orders/groups/billing"))
		waitFor(t, tab, `document.getElementById("total-lag").textContent === "0"`)

		// The replay's first step counts and changes nothing.
		browse(t, tab, chromedp.Click(chromedp.CSS(`form[data-action="replay"] button`)))
		waitFor(t, tab, `(document.getElementById("replay-count") || {textContent: ""}).textContent.includes("would make 4 ")`)
		lag, _ := b.drv.Lag(ctx, "orders", "billing", nil)
		require.Zero(t, lag.Total, "the count changed the lag to %d", lag.Total)
		browse(t, tab, chromedp.Click(chromedp.CSS(`form[data-action="replay-confirm"] button`)))
		waitFor(t, tab, `(document.getElementById("flash") || {textContent: ""}).textContent.includes("Replayed 4 events")`)
		waitFor(t, tab, `document.getElementById("total-lag").textContent === "4"`)

		// The reset asks for the group's name.
		browse(t, tab, chromedp.SetValue(chromedp.CSS(`form[data-action="reset"] input[name="start_after"]`), "3"),
			chromedp.Click(chromedp.CSS(`form[data-action="reset"] button`)))
		waitFor(t, tab, `document.querySelector('form[data-action="reset-confirm"]') !== null`)
		browse(t, tab, chromedp.SetValue(chromedp.CSS(`input[name="confirm_group"]`), "billin"),
			chromedp.Click(chromedp.CSS(`form[data-action="reset-confirm"] button`)))
		waitFor(t, tab, `(document.getElementById("error-message") || {textContent: ""}).textContent.includes("Nothing was changed")`)
		lag, _ = b.drv.Lag(ctx, "orders", "billing", nil)
		require.EqualValues(t, 4, lag.Total, "a reset with the wrong name changed the lag to %d", lag.Total)
		browse(t, tab, chromedp.SetValue(chromedp.CSS(`input[name="confirm_group"]`), "billing"),
			chromedp.Click(chromedp.CSS(`form[data-action="reset-confirm"] button`)))
		waitFor(t, tab, `(document.getElementById("flash") || {textContent: ""}).textContent.includes("Reset group billing")`)
		waitFor(t, tab, `document.getElementById("total-lag").textContent === "1"`)
	})
}
