package metrics_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/metrics"
)

// open gives, on b, a driver that writes (as the installer) and one that
// the collector reads through: on PostgreSQL, a login role granted
// rheo_reader and nothing else.
func open(t testing.TB, b *testbackend.Backend, clock driver.Clock) (writer, reader driver.Driver) {
	t.Helper()
	writer = b.Open(t, clock)
	if b.Name != testbackend.NamePostgres {
		return writer, writer
	}
	ctx := context.Background()
	role := testdb.NewRole(t, "")
	conn, err := pgx.Connect(ctx, b.DSN)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "GRANT rheo_reader TO "+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	pool, err := pgxpool.New(ctx, testdb.AsRole(t, b.DSN, role))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reader = postgres.New(pool, &postgres.Options{Clock: clock})
	t.Cleanup(func() { _ = reader.Close() })
	return writer, reader
}

func TestCollector(t *testing.T) {
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		ctx := context.Background()
		clock := drivertest.NewClock()
		writer, reader := open(t, b, clock)

		// orders: 2 partitions. Partition 0 gets 3 events at Epoch,
		// partition 1 one event a minute later; then billing takes
		// two leases of partition 0 and acks one, rejects the event of
		// partition 1, and a new lease of partition 0's third event
		// expires. audit has not started.
		require.NoError(t, writer.CreateStream(ctx, "orders", 2))
		require.NoError(t, writer.CreateStream(ctx, "empty", 1))
		require.NoError(t, writer.CreateGroup(ctx, "orders", "billing", nil))
		require.NoError(t, writer.CreateGroup(ctx, "orders", "audit", nil))
		zero, one := 0, 1
		for range 3 {
			_, err := writer.Append(ctx, "orders", json.RawMessage(`{}`), &rheo.AppendOptions{Partition: &zero})
			require.NoError(t, err)
		}
		clock.Advance(time.Minute)
		_, err := writer.Append(ctx, "orders", json.RawMessage(`{}`), &rheo.AppendOptions{Partition: &one})
		require.NoError(t, err)
		leases, err := writer.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 2, Partitions: []int{0}, LeaseDuration: time.Hour})
		require.NoError(t, err)
		require.Len(t, leases, 2)
		require.NoError(t, writer.Ack(ctx, leases[0].LeaseID))
		leases, err = writer.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{Partitions: []int{1}})
		require.NoError(t, err)
		require.NoError(t, writer.Reject(ctx, leases[0].LeaseID, "bad"))
		_, err = writer.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{Partitions: []int{0}, LeaseDuration: time.Second})
		require.NoError(t, err)
		clock.Advance(time.Minute) // 2 minutes after Epoch: the 1 s lease expired

		c := metrics.NewCollector(reader, &metrics.Options{Clock: clock})
		want := `
# HELP rheo_group_dead_letters Dead letters of the group.
# TYPE rheo_group_dead_letters gauge
rheo_group_dead_letters{group="audit",stream="orders"} 0
rheo_group_dead_letters{group="billing",stream="orders"} 1
# HELP rheo_group_inflight Leases of the group that have not expired.
# TYPE rheo_group_inflight gauge
rheo_group_inflight{group="audit",stream="orders"} 0
rheo_group_inflight{group="billing",stream="orders"} 1
# HELP rheo_group_lag Events of the partition not yet settled by the group: high watermark minus frontier.
# TYPE rheo_group_lag gauge
rheo_group_lag{group="audit",partition="0",stream="orders"} 3
rheo_group_lag{group="audit",partition="1",stream="orders"} 1
rheo_group_lag{group="billing",partition="0",stream="orders"} 2
rheo_group_lag{group="billing",partition="1",stream="orders"} 0
# HELP rheo_group_oldest_unsettled_age_seconds Age, by its ts, of the oldest event the group has not settled; 0 when it has settled every event.
# TYPE rheo_group_oldest_unsettled_age_seconds gauge
rheo_group_oldest_unsettled_age_seconds{group="audit",stream="orders"} 120
rheo_group_oldest_unsettled_age_seconds{group="billing",stream="orders"} 120
# HELP rheo_group_pending_retry Deliveries of the group waiting for their retry delay, or whose lease expired.
# TYPE rheo_group_pending_retry gauge
rheo_group_pending_retry{group="audit",stream="orders"} 0
rheo_group_pending_retry{group="billing",stream="orders"} 1
# HELP rheo_scrape_success 1 when the scrape of Rheo's state read everything, else 0.
# TYPE rheo_scrape_success gauge
rheo_scrape_success 1
# HELP rheo_stream_high_watermark The last sequence allocated in the partition.
# TYPE rheo_stream_high_watermark gauge
rheo_stream_high_watermark{partition="0",stream="empty"} 0
rheo_stream_high_watermark{partition="0",stream="orders"} 3
rheo_stream_high_watermark{partition="1",stream="orders"} 1
# HELP rheo_stream_low_watermark The lowest sequence the partition retains.
# TYPE rheo_stream_low_watermark gauge
rheo_stream_low_watermark{partition="0",stream="empty"} 1
rheo_stream_low_watermark{partition="0",stream="orders"} 1
rheo_stream_low_watermark{partition="1",stream="orders"} 1
`
		names := []string{metrics.GroupLag, metrics.GroupInFlight, metrics.GroupPendingRetry, metrics.GroupDeadLetters,
			metrics.GroupOldestUnsettledAge, metrics.StreamHighWatermark, metrics.StreamLowWatermark, metrics.ScrapeSuccess}
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), names...))

		// Every figure is read anew at the first scrape after
		// CacheFor.
		clock.Advance(metrics.DefaultCacheFor)
		_, err = writer.Append(ctx, "orders", json.RawMessage(`{}`), &rheo.AppendOptions{Partition: &one})
		require.NoError(t, err)
		_, err = writer.DropStream(ctx, "empty", &rheo.DropOptions{Confirm: true})
		require.NoError(t, err)
		want = `
# HELP rheo_stream_high_watermark The last sequence allocated in the partition.
# TYPE rheo_stream_high_watermark gauge
rheo_stream_high_watermark{partition="0",stream="orders"} 3
rheo_stream_high_watermark{partition="1",stream="orders"} 2
`
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), metrics.StreamHighWatermark))
	})
}

func TestCollectorFailure(t *testing.T) {
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		writer, reader := open(t, b, nil)
		require.NoError(t, writer.CreateStream(context.Background(), "s", 1))
		// The database goes away: a closed pool or driver.
		if pg, ok := reader.(*postgres.Driver); ok {
			pg.Pool().Close()
		}
		require.NoError(t, reader.Close())
		c := metrics.NewCollector(reader, nil)
		want := `
# HELP rheo_scrape_success 1 when the scrape of Rheo's state read everything, else 0.
# TYPE rheo_scrape_success gauge
rheo_scrape_success 0
`
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), metrics.ScrapeSuccess, metrics.StreamHighWatermark),
			"a failed scrape reports 0 and none of the figures it read")
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(c), "the collector describes what it collects")
	})
}

// countingOps counts the scrapes that reach the database.
type countingOps struct {
	driver.Ops
	mu    sync.Mutex
	reads int
}

func (o *countingOps) ListStreams(ctx context.Context) ([]rheo.StreamSummary, error) {
	o.mu.Lock()
	o.reads++
	o.mu.Unlock()
	return o.Ops.ListStreams(ctx)
}

func (o *countingOps) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads
}

// TestCollectorCache checks that scrapes within CacheFor of a read, one
// after the other or at once, read the database once, and that the
// first after it reads it again.
func TestCollectorCache(t *testing.T) {
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		clock := drivertest.NewClock()
		writer, reader := open(t, b, clock)
		require.NoError(t, writer.CreateStream(context.Background(), "s", 1))
		ops := &countingOps{Ops: reader}
		c := metrics.NewCollector(ops, &metrics.Options{Clock: clock, CacheFor: 3 * time.Second})
		for range 3 {
			require.Equal(t, 4, testutil.CollectAndCount(c))
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { testutil.CollectAndCount(c) })
		}
		wg.Wait()
		require.Equal(t, 1, ops.count(), "scrapes within CacheFor of the first read the database")
		clock.Advance(3 * time.Second)
		testutil.CollectAndCount(c)
		require.Equal(t, 2, ops.count(), "the first scrape after CacheFor reads the database again")

		uncached := &countingOps{Ops: reader}
		c = metrics.NewCollector(uncached, &metrics.Options{CacheFor: -1})
		testutil.CollectAndCount(c)
		testutil.CollectAndCount(c)
		require.Equal(t, 2, uncached.count(), "a negative CacheFor reads the database at every scrape")
	})
}

// BenchmarkCollect scrapes 100 streams of 2 partitions with 10 groups
// each, a few events behind, as the role granted rheo_reader: one scrape
// per iteration.
func BenchmarkCollect(b *testing.B) {
	testbackend.Run(b, func(b *testing.B, backend *testbackend.Backend) {
		ctx := context.Background()
		writer, reader := open(b, backend, nil)
		for s := range 100 {
			stream := "s" + strconv.Itoa(s)
			require.NoError(b, writer.CreateStream(ctx, stream, 2))
			items := make([]rheo.BatchItem, 20)
			for i := range items {
				items[i] = rheo.BatchItem{Payload: json.RawMessage(`{}`), Key: strconv.Itoa(i)}
			}
			_, err := writer.AppendBatch(ctx, stream, items, nil)
			require.NoError(b, err)
			for g := range 10 {
				require.NoError(b, writer.CreateGroup(ctx, stream, "g"+strconv.Itoa(g), nil))
			}
		}
		c := metrics.NewCollector(reader, &metrics.Options{CacheFor: -1})
		b.ResetTimer()
		for b.Loop() {
			require.Equal(b, 100*(2*2)+1000*(2+4)+2, testutil.CollectAndCount(c), "metrics")
		}
	})
}

// TestDocs checks that the Grafana dashboard of docs/ is valid JSON whose
// queries use only metrics the collector exports, and that the
// documentation lists every metric.
func TestDocs(t *testing.T) {
	exported := []string{metrics.GroupLag, metrics.GroupInFlight, metrics.GroupPendingRetry, metrics.GroupDeadLetters,
		metrics.GroupOldestUnsettledAge, metrics.StreamHighWatermark, metrics.StreamLowWatermark,
		metrics.ScrapeSuccess, metrics.ScrapeDuration}

	raw, err := os.ReadFile(filepath.Join("..", "docs", "grafana-dashboard.json"))
	require.NoError(t, err)
	var dashboard struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dashboard), "the dashboard is JSON")
	require.NotEmpty(t, dashboard.Panels)
	for _, p := range dashboard.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has queries", p.Title)
		for _, target := range p.Targets {
			names := regexp.MustCompile(`rheo_[a-z_]+`).FindAllString(target.Expr, -1)
			require.NotEmpty(t, names, "panel %q queries a Rheo metric: %s", p.Title, target.Expr)
			for _, name := range names {
				require.Contains(t, exported, name, "panel %q", p.Title)
			}
		}
	}

	doc, err := os.ReadFile(filepath.Join("..", "docs", "observability.md"))
	require.NoError(t, err)
	for _, name := range exported {
		require.Contains(t, string(doc), "`"+name+"`", "docs/observability.md lists %s", name)
	}
}
