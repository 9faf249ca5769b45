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

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/rheo-go/rheo/dashboard"
	"github.com/rheo-go/rheo/worker"
)

// screenshots, when set, is the folder TestDashboardScreenshots writes the
// screenshots of docs/ into:
//
//	go test ./dashboard -run TestDashboardScreenshots -screenshots ../docs/images
var screenshots = flag.String("screenshots", "", "write screenshots of the dashboard's pages into this `folder`")

// TestDashboardScreenshots runs the demo on SQLite, keeps a worker busy on
// it for a few seconds so the charts and rates have something to show,
// and captures the main pages. It runs only with -screenshots.
func TestDashboardScreenshots(t *testing.T) {
	t.Parallel()
	if *screenshots == "" {
		t.Skip("pass -screenshots FOLDER to capture the dashboard's pages")
	}
	ctx := context.Background()
	dbURL := "sqlite://" + filepath.Join(t.TempDir(), "demo.db")
	b := openBackend(t, "sqlite", dbURL)
	if code := cli.Run(ctx, []string{"demo", "--database-url", dbURL, "--keep"}, nil, io.Discard, os.Stderr); code != cli.ExitOK {
		t.Fatalf("rheo demo exited %d", code)
	}
	streams, err := b.drv.ListStreams(ctx)
	if err != nil || len(streams) != 1 {
		t.Fatalf("streams after the demo: %v %v", streams, err)
	}
	stream := streams[0].Name

	// A group that a slow worker drains while quotes keep arriving.
	if err := b.drv.CreateGroup(ctx, stream, "analytics", nil); err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	bn := setup(t, b.drv, &dashboard.Options{AllowActions: true, SampleInterval: 250 * time.Millisecond, SampleWindow: 10 * time.Second})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	symbols := []string{"AAPL", "MSFT", "NVDA", "AMD"}
	for i := range 120 {
		payload := fmt.Sprintf(`{"type": "quote", "key": %q, "bid": %d.10, "ask": %d.20}`, symbols[i%4], 100+i%7, 100+i%7)
		if _, err := b.drv.Append(ctx, stream, json.RawMessage(payload), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)

	page, err := b.drv.Query(ctx, stream, rheo.Query{Metadata: rheo.Lineage{CorrelationID: "order-007"}.Metadata()})
	if err != nil || len(page.Events) < 2 {
		t.Fatalf("the demo's order-007: %v %v", page.Events, err)
	}
	trade := page.Events[len(page.Events)-1]

	if err := os.MkdirAll(*screenshots, 0o755); err != nil {
		t.Fatal(err)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*screenshots, shot.file), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", shot.file, len(png))
	}
}
