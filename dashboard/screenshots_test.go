package dashboard_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/rheo-go/rheo/dashboard"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/worker"
)

// screenshots, when set, is the folder TestDashboardScreenshots writes the
// screenshots of docs/ into:
//
//	go test ./dashboard -run TestDashboardScreenshots -screenshots ../docs/images
var screenshots = flag.String("screenshots", "", "write screenshots of the dashboard's pages into this `folder`")

// TestDashboardScreenshots runs the demo on SQLite, keeps a worker busy on
// it over a few seconds of the dashboard's clock so the charts and rates
// have something to show, and captures the main pages. It runs only with
// -screenshots.
func TestDashboardScreenshots(t *testing.T) {
	t.Parallel()
	if *screenshots == "" {
		t.Skip("pass -screenshots FOLDER to capture the dashboard's pages")
	}
	ctx := context.Background()
	dbURL := "sqlite://" + filepath.Join(t.TempDir(), "demo.db")
	b := openBackend(t, "sqlite", dbURL)
	code := cli.Run(ctx, []string{"demo", "--database-url", dbURL, "--keep"}, nil, io.Discard, os.Stderr)
	require.Equal(t, cli.ExitOK, code, "rheo demo exited %d", code)
	streams, err := b.drv.ListStreams(ctx)
	require.NoError(t, err, "streams after the demo")
	require.Len(t, streams, 1, "streams after the demo: %v", streams)
	stream := streams[0].Name

	// A group that a slow worker drains while quotes keep arriving.
	require.NoError(t, b.drv.CreateGroup(ctx, stream, "analytics", nil))
	w, err := worker.New(b.drv, &worker.Config{
		Stream: stream, Group: "analytics", Concurrency: 1, PollInterval: 50 * time.Millisecond,
		Handler: func(ctx context.Context, l rheo.Lease) error {
			select {
			case <-time.After(15 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		},
	})
	require.NoError(t, err)
	// The dashboard samples on a clock of the test's: a round each time
	// the test moves it an interval on, the next one armed once the round
	// is taken.
	const interval = 250 * time.Millisecond
	clock := drivertest.ClockAt(time.Now())
	bn := setup(t, b.drv, &dashboard.Options{AllowActions: true, SampleInterval: interval, SampleWindow: 10 * time.Second, Clock: clock})
	clock.WaitTimer(t, 10*time.Second)
	sample := func() {
		clock.Advance(interval)
		clock.WaitTimer(t, 10*time.Second)
	}
	lagOf := func() (int64, error) {
		lag, err := b.drv.Lag(ctx, stream, "analytics", nil)
		return lag.Total, err
	}
	lag, err := lagOf()
	require.NoError(t, err)
	// drainTo waits until the worker has brought the group's lag down to
	// at most want.
	drainTo := func(want int64) {
		require.Eventually(t, func() bool {
			now, err := lagOf()
			return err == nil && now <= want
		}, 30*time.Second, 10*time.Millisecond, "the worker did not bring the lag of analytics down to %d", want)
	}
	require.NoError(t, w.Start(ctx))
	defer w.Stop(ctx)
	// Quotes arrive one every 40 ms of the clock, 6 a sampling interval,
	// and the worker handles twice as many in that time, until it has
	// caught up; then 6 more rounds of the drained group.
	symbols := []string{"AAPL", "MSFT", "NVDA", "AMD"}
	for i := range 120 {
		payload := fmt.Sprintf(`{"type": "quote", "key": %q, "bid": %d.10, "ask": %d.20}`, symbols[i%4], 100+i%7, 100+i%7)
		_, err := b.drv.Append(ctx, stream, json.RawMessage(payload), nil)
		require.NoError(t, err)
		if i%6 == 5 {
			lag = max(lag-6, 0)
			drainTo(lag)
			sample()
		}
	}
	drainTo(0)
	for range 6 {
		sample()
	}

	page, err := b.drv.Query(ctx, stream, rheo.Query{Metadata: rheo.Lineage{CorrelationID: "order-007"}.Metadata()})
	require.NoError(t, err, "the demo's order-007")
	require.GreaterOrEqual(t, len(page.Events), 2, "the demo's order-007: %v", page.Events)
	trade := page.Events[len(page.Events)-1]

	require.NoError(t, os.MkdirAll(*screenshots, 0o755))
	tab := newTab(t)
	for _, shot := range []struct{ file, path string }{
		{"dashboard-streams.png", "/"},
		{"dashboard-stream.png", "/streams/" + url.PathEscape(stream)},
		{"dashboard-group.png", "/streams/" + url.PathEscape(stream) + "/groups/risk"},
		{"dashboard-events.png", "/streams/" + url.PathEscape(stream) + "/events?correlation_id=order-007"},
		{"dashboard-event.png", fmt.Sprintf("/streams/%s/events/%d/%d", url.PathEscape(stream), trade.Partition, trade.Sequence)},
	} {
		browse(t, tab, chromedp.Navigate(bn.base+shot.path))
		waitFor(t, tab, `document.readyState === "complete"`)
		ctx, cancel := context.WithTimeout(tab, 30*time.Second)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(*screenshots, shot.file), png, 0o644))
		t.Logf("wrote %s (%d bytes)", shot.file, len(png))
	}
}
