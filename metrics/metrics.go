// Package metrics exports the state of Rheo's streams and groups as
// Prometheus metrics, read from the database at scrape time.
//
// Lag is a property of a group, not of one worker: a Collector asks the
// database, through any driver, for every stream's watermarks and every
// group's lag and summary, each scrape. Register it with a
// prometheus.Registerer and serve the registry, as `rheo serve` does on
// /metrics:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.NewCollector(drv, nil))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Every figure of a scrape costs index lookups whatever the length of the
// log (docs/design.md): two calls per stream and two per group, run a few
// at a time. A scrape's figures serve the scrapes of the next few seconds
// (Options.CacheFor), and scrapes that arrive while the database is read
// wait for that one read: however many scrapers there are, the database
// is read at most once per CacheFor. The role the driver logs in as needs
// rheo_reader.
//
// This package is the only one of Rheo's that imports
// github.com/prometheus/client_golang.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// The names of the metrics.
const (
	GroupLag                = "rheo_group_lag"
	GroupInFlight           = "rheo_group_inflight"
	GroupPendingRetry       = "rheo_group_pending_retry"
	GroupDeadLetters        = "rheo_group_dead_letters"
	GroupOldestUnsettledAge = "rheo_group_oldest_unsettled_age_seconds"
	StreamHighWatermark     = "rheo_stream_high_watermark"
	StreamLowWatermark      = "rheo_stream_low_watermark"
	ScrapeSuccess           = "rheo_scrape_success"
	ScrapeDuration          = "rheo_scrape_duration_seconds"
)

// The labels of the metrics.
const (
	LabelStream    = "stream"
	LabelGroup     = "group"
	LabelPartition = "partition"
)

// The defaults of Options.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 4
	// DefaultCacheFor is shorter than any scrape interval in use (15 s is
	// Prometheus's default), so that one scraper always sees fresh
	// figures, and long enough that several scrapers, or a scrape
	// retried, read the database once.
	DefaultCacheFor = 5 * time.Second
)

const logKeyError = "error"

// Options are the optional settings of a Collector. A nil *Options means
// the defaults.
type Options struct {
	// Timeout bounds one scrape. Defaults to DefaultTimeout, Prometheus's
	// default scrape timeout.
	Timeout time.Duration
	// Concurrency is how many streams or groups are read at once. Defaults
	// to DefaultConcurrency.
	Concurrency int
	// CacheFor is how long a scrape's figures, or its failure, answer the
	// scrapes that follow it, instead of reading the database again. A
	// negative CacheFor reads the database at every scrape. Defaults to
	// DefaultCacheFor.
	CacheFor time.Duration
	// Clock gives the time the oldest unsettled event's age is measured
	// against, and the age of the cached scrape. Defaults to
	// driver.SystemClock.
	Clock driver.Clock
	// Logger receives one Warn record per scrape that failed, with the
	// error. Defaults to slog.Default().
	Logger *slog.Logger
}

// Collector is a prometheus.Collector of Rheo's state in one database:
//
//   - rheo_group_lag{stream,group,partition}: high watermark minus frontier;
//   - rheo_group_inflight{stream,group}: leases not expired;
//   - rheo_group_pending_retry{stream,group}: deliveries waiting for their
//     retry delay or with an expired lease;
//   - rheo_group_dead_letters{stream,group};
//   - rheo_group_oldest_unsettled_age_seconds{stream,group}: how long ago
//     the oldest event not settled by the group (offered or not) was
//     appended, by its ts; 0 when every event is settled;
//   - rheo_stream_high_watermark{stream,partition}: the last sequence
//     allocated;
//   - rheo_stream_low_watermark{stream,partition}: the lowest sequence
//     retained (reference §7.3);
//   - rheo_scrape_success: 1 when the scrape read everything, else 0;
//   - rheo_scrape_duration_seconds: how long the scrape took (the read
//     of the database whose figures a cached scrape repeats).
//
// A stream or group dropped during a scrape is left out of it. Any other
// error fails the scrape's Rheo figures (rheo_scrape_success 0), and the
// metrics read before it are left out too, so that a partial scrape never
// passes for a whole one.
type Collector struct {
	ops         driver.Ops
	timeout     time.Duration
	concurrency int
	clock       driver.Clock
	logger      *slog.Logger
	cacheFor    time.Duration

	// mu guards last, the latest scrape, and running, closed when the
	// scrape in progress ends.
	mu      sync.Mutex
	last    *scrapeResult
	running chan struct{}

	lag, inflight, pending, deadLetters, oldestAge *prometheus.Desc
	high, low, success, duration                   *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector reading through ops. opts may be nil.
func NewCollector(ops driver.Ops, opts *Options) *Collector {
	if opts == nil {
		opts = &Options{}
	}
	c := &Collector{
		ops:         ops,
		timeout:     opts.Timeout,
		concurrency: opts.Concurrency,
		clock:       opts.Clock,
		logger:      opts.Logger,
		cacheFor:    opts.CacheFor,
	}
	if c.cacheFor == 0 {
		c.cacheFor = DefaultCacheFor
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.concurrency <= 0 {
		c.concurrency = DefaultConcurrency
	}
	if c.clock == nil {
		c.clock = driver.SystemClock
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	group := []string{LabelStream, LabelGroup}
	c.lag = prometheus.NewDesc(GroupLag, "Events of the partition not yet settled by the group: high watermark minus frontier.",
		[]string{LabelStream, LabelGroup, LabelPartition}, nil)
	c.inflight = prometheus.NewDesc(GroupInFlight, "Leases of the group that have not expired.", group, nil)
	c.pending = prometheus.NewDesc(GroupPendingRetry,
		"Deliveries of the group waiting for their retry delay, or whose lease expired.", group, nil)
	c.deadLetters = prometheus.NewDesc(GroupDeadLetters, "Dead letters of the group.", group, nil)
	c.oldestAge = prometheus.NewDesc(GroupOldestUnsettledAge,
		"Age, by its ts, of the oldest event the group has not settled; 0 when it has settled every event.", group, nil)
	c.high = prometheus.NewDesc(StreamHighWatermark, "The last sequence allocated in the partition.",
		[]string{LabelStream, LabelPartition}, nil)
	c.low = prometheus.NewDesc(StreamLowWatermark, "The lowest sequence the partition retains.",
		[]string{LabelStream, LabelPartition}, nil)
	c.success = prometheus.NewDesc(ScrapeSuccess, "1 when the scrape of Rheo's state read everything, else 0.", nil, nil)
	c.duration = prometheus.NewDesc(ScrapeDuration, "How long the scrape of Rheo's state took.", nil, nil)
	return c
}

// Describe sends the descriptors of every metric the Collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lag, c.inflight, c.pending, c.deadLetters, c.oldestAge,
		c.high, c.low, c.success, c.duration} {
		ch <- d
	}
}

// scrapeResult is one read of the database: its metrics, or its error.
type scrapeResult struct {
	metrics []prometheus.Metric
	err     error
	took    time.Duration
	at      time.Time
}

// Collect sends the metrics of the latest scrape, reading the database
// when that scrape is older than CacheFor.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	res := c.result()
	success := 1.0
	if res.err != nil {
		success = 0
	}
	for _, m := range res.metrics {
		ch <- m
	}
	ch <- prometheus.MustNewConstMetric(c.success, prometheus.GaugeValue, success)
	ch <- prometheus.MustNewConstMetric(c.duration, prometheus.GaugeValue, res.took.Seconds())
}

// result returns the latest scrape when it is younger than CacheFor, else
// waits for the scrape in progress, or makes one.
func (c *Collector) result() *scrapeResult {
	if c.cacheFor < 0 {
		return c.read()
	}
	c.mu.Lock()
	if c.last != nil && c.clock.Now().Sub(c.last.at) < c.cacheFor {
		defer c.mu.Unlock()
		return c.last
	}
	if running := c.running; running != nil {
		c.mu.Unlock()
		<-running
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.last
	}
	running := make(chan struct{})
	c.running = running
	c.mu.Unlock()
	res := c.read()
	c.mu.Lock()
	c.last, c.running = res, nil
	c.mu.Unlock()
	close(running)
	return res
}

// read scrapes the database once; a failed scrape keeps none of the
// figures it read.
func (c *Collector) read() *scrapeResult {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	metrics, err := c.scrape(ctx)
	if err != nil {
		metrics = nil
		c.logger.WarnContext(ctx, "rheo metrics: scrape failed", logKeyError, err)
	}
	return &scrapeResult{metrics: metrics, err: err, took: time.Since(start), at: c.clock.Now()}
}

// scrape reads every stream and group, c.concurrency at a time, and
// returns their metrics, or the first error that is not a stream or group
// dropped meanwhile.
func (c *Collector) scrape(ctx context.Context) ([]prometheus.Metric, error) {
	streams, err := c.ops.ListStreams(ctx)
	if err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		metrics []prometheus.Metric
		first   error
		wg      sync.WaitGroup
	)
	work := make(chan func() ([]prometheus.Metric, error))
	for range c.concurrency {
		wg.Go(func() {
			for job := range work {
				ms, err := job()
				mu.Lock()
				if err != nil && first == nil && !dropped(err) {
					first = err
				}
				metrics = append(metrics, ms...)
				mu.Unlock()
			}
		})
	}
	queue := func(job func() ([]prometheus.Metric, error)) bool {
		select {
		case work <- job:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, s := range streams {
		if !queue(func() ([]prometheus.Metric, error) { return c.stream(ctx, s.Name) }) {
			break
		}
		groups, err := c.ops.ListGroups(ctx, s.Name)
		if err != nil {
			if dropped(err) {
				continue
			}
			mu.Lock()
			first = err
			mu.Unlock()
			break
		}
		for _, g := range groups {
			if !queue(func() ([]prometheus.Metric, error) { return c.group(ctx, s.Name, g.Name) }) {
				break
			}
		}
	}
	close(work)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return metrics, first
}

// stream returns the watermarks of a stream's partitions.
func (c *Collector) stream(ctx context.Context, stream string) ([]prometheus.Metric, error) {
	info, err := c.ops.StreamInfo(ctx, stream)
	if err != nil {
		return nil, err
	}
	metrics := make([]prometheus.Metric, 0, 2*len(info.Partitions))
	for _, p := range info.Partitions {
		partition := partitionLabel(p.Partition)
		metrics = append(metrics,
			prometheus.MustNewConstMetric(c.high, prometheus.GaugeValue, float64(p.HighWatermark), stream, partition),
			prometheus.MustNewConstMetric(c.low, prometheus.GaugeValue, float64(p.LowWatermark), stream, partition))
	}
	return metrics, nil
}

// group returns a group's lag per partition and its summary.
func (c *Collector) group(ctx context.Context, stream, group string) ([]prometheus.Metric, error) {
	lag, err := c.ops.Lag(ctx, stream, group, nil)
	if err != nil {
		return nil, err
	}
	info, err := c.ops.GroupInfo(ctx, stream, group)
	if err != nil {
		return nil, err
	}
	metrics := make([]prometheus.Metric, 0, len(lag.Partitions)+4)
	for _, p := range lag.Partitions {
		metrics = append(metrics, prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(p.Lag),
			stream, group, partitionLabel(p.Partition)))
	}
	var age float64
	if info.OldestUnsettledTS != nil {
		age = max(0, c.clock.Now().Sub(*info.OldestUnsettledTS).Seconds())
	}
	return append(metrics,
		prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(info.InFlight), stream, group),
		prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(info.PendingRetry), stream, group),
		prometheus.MustNewConstMetric(c.deadLetters, prometheus.GaugeValue, float64(info.DeadLetters), stream, group),
		prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, age, stream, group),
	), nil
}

// dropped reports whether err says a stream or group no longer exists:
// it was dropped while the scrape ran.
func dropped(err error) bool {
	return errors.Is(err, rheo.ErrStreamNotFound) || errors.Is(err, rheo.ErrGroupNotFound)
}

func partitionLabel(p int) string { return strconv.Itoa(p) }
