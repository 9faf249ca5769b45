package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/dburl"
	"github.com/rheo-go/rheo/worker"
)

// The demo's scenario.
const (
	demoPartitions      = 4
	demoOrders          = 40
	demoQuotes          = 80
	demoRiskAttempts    = 3
	demoSurveilAttempts = 5
	demoConcurrency     = 4
	demoReplayAfter     = 10
	demoLargeTradeQty   = 5000
	demoPollInterval    = 50 * time.Millisecond
	demoStepTimeout     = 30 * time.Second
	demoHandlerWork     = time.Millisecond
	// demoCorrelationQuery is the order the demo looks up by lineage.
	demoCorrelationQuery = "order-007"
)

var (
	// Two symbols route to each of the four partitions.
	demoSymbols = []string{"AAPL", "MSFT", "NVDA", "AMD", "WMT", "TSLA", "AMZN", "IBM"}
	demoTraders = []string{"ana", "ben", "chloe", "dev"}
)

func demoCommand() *command {
	return &command{
		name:     "demo",
		synopsis: "[--database-url URL]",
		summary:  "run a guided scenario: partitioned stream, two groups, a poison event, replay, history queries",
		noDB:     true,
		noOutput: true,
		details: `Without --database-url or $DATABASE_URL the demo runs on an SQLite
database in a temporary directory, removed at the end: nothing to
install. With a database URL it runs on that database, in a stream of its
own named market-<time>-<random>, so it can run again, and drops that
stream at the end unless --keep is given (or a step failed: the stream is
then left for inspection). A database where Rheo was never installed gets
it first, as rheo-migrate up would install it (the schema rheo, and the
roles where the user may create them); one at an older schema version is
left alone, and the demo says how to upgrade it. Every step checks its
outcome; the exit status is 0 only when all did what they printed.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			databaseURL := fs.String("database-url", "", "run on the database at `URL` instead of a temporary SQLite file: "+
				connect.Forms()+"; defaults to $"+EnvDatabaseURL)
			keep := fs.Bool("keep", false, "keep the demo's stream on the database at the end (needs a database URL)")
			return func(c *call) error {
				c.databaseURL = *databaseURL
				if *keep && c.databaseURL == "" && os.Getenv(EnvDatabaseURL) == "" {
					return usagef("--keep keeps the demo's stream on the database of --database-url or $%s, and neither is set: "+
						"without them the demo runs on a temporary SQLite file, removed at the end", EnvDatabaseURL)
				}
				return c.runDemo(*keep)
			}
		},
	}
}

// demo is one run of the scenario.
type demo struct {
	ctx    context.Context
	drv    driver.Driver
	w      io.Writer
	stream string
	// created is set once the stream exists.
	created bool
	// events are the appended events in append order; poison is the one
	// the risk group cannot handle.
	events []rheo.Event
	poison rheo.Event
	risk   *riskBook
}

func (c *call) runDemo(keep bool) error {
	d := &demo{ctx: c.ctx, w: c.stdout, risk: &riskBook{notional: map[string]riskEntry{}}}
	temporary := c.databaseURL == "" && os.Getenv(EnvDatabaseURL) == ""
	if temporary {
		if sqlite.DefaultDriverName() == "" {
			return failf("the demo runs on embedded SQLite by default, and this build of rheo has no SQLite driver: %s; "+
				"or run the demo on PostgreSQL: rheo demo --database-url postgres://…", sqlite.BuildHint)
		}
		dir, err := os.MkdirTemp("", "rheo-demo-")
		if err != nil {
			return failf("create a temporary directory: %v", err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "rheo.db")
		u := (&url.URL{Scheme: "sqlite", Path: path}).String()
		fmt.Fprintf(d.w, "Rheo demo on SQLite at %s (a temporary file, removed at the end)\n", path)
		drv, err := connect.Open(c.ctx, u, &connect.Options{Migrate: true})
		if err != nil {
			return err
		}
		d.drv, d.stream = drv, "market"
	} else {
		drv, installed, err := c.openDemo()
		if err != nil {
			return err
		}
		from := ""
		if c.urlFromEnv {
			from = " (from $" + EnvDatabaseURL + ")"
		}
		fmt.Fprintf(d.w, "Rheo demo on %s at %s%s\n", c.databaseName(), c.target.Redacted(), from)
		if installed {
			fmt.Fprintf(d.w, "Rheo was not installed in this database: installed it, as rheo-migrate up does\n")
		}
		d.drv, d.stream = drv, "market-"+time.Now().UTC().Format("20060102-150405")+"-"+randomHex(2)
	}
	defer d.drv.Close()

	steps := []struct {
		title string
		run   func() error
	}{
		{"A partitioned stream of market events, appended by instrument key", d.appendEvents},
		{"Two independent consumer groups", d.createGroups},
		{"Workers consume both groups concurrently; a poison event is retried, then dead-lettered", d.consume},
		{"Replay the risk group from a sequence", d.replay},
		{"History queries over the log", d.query},
	}
	for i, step := range steps {
		fmt.Fprintf(d.w, "\n== %d. %s\n", i+1, step.title)
		if err := step.run(); err != nil {
			if !temporary && d.created {
				fmt.Fprintf(d.w, "\nThe demo's stream %q is left for inspection; remove it with: rheo drop-stream %s --confirm\n",
					d.stream, d.stream)
			}
			var f *failure
			if errors.As(err, &f) {
				return failf("demo step %d failed: %s", i+1, f.msg)
			}
			return err
		}
	}
	switch {
	case temporary:
	case keep:
		fmt.Fprintf(d.w, "\nThe demo's stream %q is kept (--keep); remove it with: rheo drop-stream %s --confirm\n", d.stream, d.stream)
	default:
		n, err := d.drv.DropStream(d.ctx, d.stream, &rheo.DropOptions{Confirm: true})
		if err != nil {
			return err
		}
		fmt.Fprintf(d.w, "\nDropped the demo's stream %q with its groups and %d events (--keep keeps it).\n", d.stream, n)
		if err := check(n == int64(len(d.events)), "drop_stream deleted %d events, want the %d appended", n, len(d.events)); err != nil {
			return err
		}
	}
	fmt.Fprintf(d.w, "\nDemo complete: every step did what it printed.\n")
	return nil
}

// openDemo opens the demo's database, installing Rheo first where it was
// never installed, and reports whether it did. A schema at an older
// version is the operator's to upgrade: that error is returned.
func (c *call) openDemo() (driver.Driver, bool, error) {
	drv, err := c.open()
	var schemaErr *connect.SchemaError
	switch {
	case errors.As(err, &schemaErr) && schemaErr.Applied == 0,
		rheo.KindOf(err) == rheo.KindDatabaseNotFound && c.target.Kind == dburl.SQLite:
		drv, err = connect.Open(c.ctx, c.databaseURL, &connect.Options{Migrate: true})
		if err != nil {
			return nil, false, err
		}
		if c.wrap != nil {
			drv = c.wrap(drv)
		}
		return drv, true, nil
	case err != nil:
		return nil, false, err
	}
	return drv, false, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// check fails the step unless ok.
func check(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return failf(format, args...)
}

// trade is the payload of order.placed and trade.executed events.
type trade struct {
	Type    string  `json:"type"`
	Key     string  `json:"key"`
	OrderID string  `json:"order_id"`
	Trader  string  `json:"trader"`
	Side    string  `json:"side,omitempty"`
	Qty     int     `json:"qty"`
	Price   float64 `json:"price"`
}

// quote is the payload of quote events.
type quote struct {
	Type string  `json:"type"`
	Key  string  `json:"key"`
	Bid  float64 `json:"bid"`
	Ask  float64 `json:"ask"`
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the demo's own types always marshal
	}
	return b
}

// appendEvents creates the stream and appends orders with their trades
// one by one (each with its lineage metadata), quotes in one batch, and
// last a malformed trade.
func (d *demo) appendEvents() error {
	if err := d.drv.CreateStream(d.ctx, d.stream, demoPartitions); err != nil {
		return err
	}
	d.created = true
	fmt.Fprintf(d.w, "created stream %q with %d partitions\n", d.stream, demoPartitions)

	for i := 1; i <= demoOrders; i++ {
		order := trade{
			Type:    "order.placed",
			Key:     demoSymbols[i%len(demoSymbols)],
			OrderID: fmt.Sprintf("o-%03d", i),
			Trader:  demoTraders[(i/3)%len(demoTraders)],
			Side:    []string{"buy", "sell"}[i%2],
			Qty:     100 * (1 + (i*37)%60),
			Price:   float64(100+(i*13)%400) + 0.25,
		}
		correlation := fmt.Sprintf("order-%03d", i)
		placed, err := d.drv.Append(d.ctx, d.stream, mustJSON(order), &rheo.AppendOptions{
			ID:       order.OrderID + ".placed",
			Metadata: rheo.Lineage{CorrelationID: correlation, Producer: "demo-gateway"}.Metadata(),
		})
		if err != nil {
			return err
		}
		fill := order
		fill.Type, fill.Side = "trade.executed", ""
		// The trade carries the order's correlation id, and the order's
		// id as its cause.
		fillMeta, err := rheo.CausedBy(placed, rheo.Lineage{Producer: "demo-exchange"}.Metadata())
		if err != nil {
			return err
		}
		executed, err := d.drv.Append(d.ctx, d.stream, mustJSON(fill), &rheo.AppendOptions{
			ID:       order.OrderID + ".trade",
			Metadata: fillMeta,
		})
		if err != nil {
			return err
		}
		d.events = append(d.events, placed, executed)
	}

	quotes := make([]rheo.BatchItem, demoQuotes)
	for j := range quotes {
		mid := float64(100 + (j*29)%400)
		quotes[j] = rheo.BatchItem{Payload: mustJSON(quote{Type: "quote", Key: demoSymbols[j%len(demoSymbols)], Bid: mid - 0.05, Ask: mid + 0.05})}
	}
	batch, err := d.drv.AppendBatch(d.ctx, d.stream, quotes, &rheo.AppendBatchOptions{
		Metadata: rheo.Lineage{Producer: "demo-feed"}.Metadata(),
	})
	if err != nil {
		return err
	}
	d.events = append(d.events, batch...)

	bad := trade{Type: "trade.executed", Key: "TSLA", OrderID: "o-999", Trader: "dev", Qty: -500, Price: 251.25}
	d.poison, err = d.drv.Append(d.ctx, d.stream, mustJSON(bad), &rheo.AppendOptions{
		ID:       "o-999.trade",
		Metadata: rheo.Lineage{CorrelationID: "order-999", Producer: "demo-exchange"}.Metadata(),
	})
	if err != nil {
		return err
	}
	d.events = append(d.events, d.poison)

	fmt.Fprintf(d.w, "appended %d events: %d orders and their trades one by one with lineage metadata,\n"+
		"%d quotes in one batch, and one malformed trade (qty %d, id %s)\n",
		len(d.events), demoOrders, demoQuotes, bad.Qty, d.poison.ID)
	t := newTable("PARTITION", "KEYS", "EVENTS", "SEQUENCES")
	for p := range demoPartitions {
		var keys []string
		var n int64
		for _, ev := range d.events {
			if ev.Partition != p {
				continue
			}
			n++
			if !slices.Contains(keys, ev.Key) {
				keys = append(keys, ev.Key)
			}
			if err := check(ev.Sequence == n, "event %s has sequence %d in partition %d, want %d (contiguous, in append order)",
				ev.ID, ev.Sequence, p, n); err != nil {
				return err
			}
			if err := check(rheo.PartitionForKey(ev.Key, demoPartitions) == p, "event %s with key %s is in partition %d, want %d",
				ev.ID, ev.Key, p, rheo.PartitionForKey(ev.Key, demoPartitions)); err != nil {
				return err
			}
		}
		sort.Strings(keys)
		t.add(p, strings.Join(keys, " "), n, fmt.Sprintf("1..%d", n))
	}
	return t.write(d.w)
}

// createGroups creates the two groups and shows that both start with the
// whole stream as lag.
func (d *demo) createGroups() error {
	if err := d.drv.CreateGroup(d.ctx, d.stream, "risk", &rheo.CreateGroupOptions{MaxAttempts: demoRiskAttempts}); err != nil {
		return err
	}
	if err := d.drv.CreateGroup(d.ctx, d.stream, "surveillance", &rheo.CreateGroupOptions{MaxAttempts: demoSurveilAttempts}); err != nil {
		return err
	}
	fmt.Fprintf(d.w, "created group \"risk\" (at most %d attempts per event) and \"surveillance\" (at most %d);\n"+
		"each sees every event, independently of the other\n", demoRiskAttempts, demoSurveilAttempts)
	fmt.Fprintln(d.w, "lag before consuming:")
	risk, surveillance, err := d.lagTable()
	if err != nil {
		return err
	}
	total := int64(len(d.events))
	return check(risk == total && surveillance == total, "lag is %d (risk) and %d (surveillance), want %d each", risk, surveillance, total)
}

// lagTable prints both groups' lag per partition and returns their totals.
func (d *demo) lagTable() (risk, surveillance int64, err error) {
	riskLag, err := d.drv.Lag(d.ctx, d.stream, "risk", nil)
	if err != nil {
		return 0, 0, err
	}
	survLag, err := d.drv.Lag(d.ctx, d.stream, "surveillance", nil)
	if err != nil {
		return 0, 0, err
	}
	t := newTable("PARTITION", "HIGH_WATERMARK", "RISK_FRONTIER", "RISK_LAG", "SURVEILLANCE_FRONTIER", "SURVEILLANCE_LAG")
	for i, p := range riskLag.Partitions {
		s := survLag.Partitions[i]
		t.add(p.Partition, p.HighWatermark, p.Frontier, p.Lag, s.Frontier, s.Lag)
	}
	t.add("total", blank{}, blank{}, riskLag.Total, blank{}, survLag.Total)
	return riskLag.Total, survLag.Total, t.write(d.w)
}

// riskEntry is the notional of one trade in the risk book.
type riskEntry struct {
	trader   string
	notional float64
}

// riskBook is the risk group's state: the notional of every trade, kept
// by event id so that a redelivered event changes nothing (delivery is
// at-least-once; handlers must be idempotent).
type riskBook struct {
	mu       sync.Mutex
	notional map[string]riskEntry
}

func (b *riskBook) handle(ctx context.Context, lease rheo.Lease) error {
	time.Sleep(demoHandlerWork) // stands for a call to a pricing service
	var t trade
	if err := json.Unmarshal(lease.Event.Payload, &t); err != nil {
		return worker.Reject(err)
	}
	if t.Type != "trade.executed" {
		return nil
	}
	if t.Qty <= 0 {
		// Not a permanent verdict in a real system (a fix may be
		// deployed), so it is retried until the attempts are used up.
		return fmt.Errorf("invalid quantity %d in trade %s", t.Qty, t.OrderID)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notional[lease.Event.ID] = riskEntry{trader: t.Trader, notional: float64(t.Qty) * t.Price}
	return nil
}

// exposure is the notional per trader.
func (b *riskBook) exposure() map[string]float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]float64{}
	for _, e := range b.notional {
		out[e.trader] += e.notional
	}
	return out
}

// surveillance flags large trades.
type surveillance struct {
	mu      sync.Mutex
	flagged map[string]bool
}

func (s *surveillance) handle(ctx context.Context, lease rheo.Lease) error {
	time.Sleep(demoHandlerWork) // stands for a rules engine
	var t trade
	if err := json.Unmarshal(lease.Event.Payload, &t); err != nil {
		return worker.Reject(err)
	}
	if t.Type == "trade.executed" && (t.Qty >= demoLargeTradeQty || t.Qty <= -demoLargeTradeQty) {
		s.mu.Lock()
		s.flagged[lease.Event.ID] = true
		s.mu.Unlock()
	}
	return nil
}

// tally counts a worker's settles through its hooks and the most handlers
// seen running at once.
type tally struct {
	acked, retried, deadLettered atomic.Int64
	running, peak                atomic.Int64
	changed                      chan struct{}
}

func newTally() *tally { return &tally{changed: make(chan struct{}, 1)} }

func (t *tally) signal() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *tally) Acked(context.Context, worker.AckInfo) { t.acked.Add(1); t.signal() }

func (t *tally) Retried(context.Context, worker.RetryInfo) { t.retried.Add(1) }

func (t *tally) DeadLettered(context.Context, worker.DeadLetterInfo) {
	t.deadLettered.Add(1)
	t.signal()
}

// wrap counts the handlers running at once around h.
func (t *tally) wrap(h worker.Handler) worker.Handler {
	return func(ctx context.Context, lease rheo.Lease) error {
		n := t.running.Add(1)
		defer t.running.Add(-1)
		for {
			peak := t.peak.Load()
			if n <= peak || t.peak.CompareAndSwap(peak, n) {
				break
			}
		}
		return h(ctx, lease)
	}
}

// runWorker runs a worker for group until want events are settled (acked
// or dead-lettered), then stops it.
func (d *demo) runWorker(group string, h worker.Handler, want int64) (*tally, error) {
	t := newTally()
	w, err := worker.New(d.drv, &worker.Config{
		Stream:       d.stream,
		Group:        group,
		Handler:      t.wrap(h),
		Concurrency:  demoConcurrency,
		PollInterval: demoPollInterval,
		Hooks:        []any{t},
	})
	if err != nil {
		return nil, err
	}
	if err := w.Start(d.ctx); err != nil {
		return nil, err
	}
	timeout := time.NewTimer(demoStepTimeout)
	defer timeout.Stop()
	var waitErr error
	for t.acked.Load()+t.deadLettered.Load() < want && waitErr == nil {
		select {
		case <-t.changed:
		case <-timeout.C:
			waitErr = failf("group %s settled %d of %d events within %s", group, t.acked.Load()+t.deadLettered.Load(), want, demoStepTimeout)
		case <-d.ctx.Done():
			waitErr = d.ctx.Err()
		}
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), demoStepTimeout)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil && waitErr == nil {
		waitErr = failf("stop the %s worker: %v", group, err)
	}
	return t, waitErr
}

// consume runs both groups' workers at the same time until each has
// settled every event, and checks the outcome in the database.
func (d *demo) consume() error {
	total := int64(len(d.events))
	surv := &surveillance{flagged: map[string]bool{}}
	var riskTally, survTally *tally
	var riskErr, survErr error
	var wg sync.WaitGroup
	wg.Go(func() { riskTally, riskErr = d.runWorker("risk", d.risk.handle, total) })
	wg.Go(func() { survTally, survErr = d.runWorker("surveillance", surv.handle, total) })
	wg.Wait()
	if err := errors.Join(riskErr, survErr); err != nil {
		return err
	}

	var trades, large int
	for _, ev := range d.events {
		var t trade
		if json.Unmarshal(ev.Payload, &t) == nil && t.Type == "trade.executed" {
			trades++
			if t.Qty >= demoLargeTradeQty || t.Qty <= -demoLargeTradeQty {
				large++
			}
		}
	}
	fmt.Fprintf(d.w, "risk:         up to %d handlers at once; %d acked, %d retries of %s, then dead-lettered at attempt %d\n",
		riskTally.peak.Load(), riskTally.acked.Load(), riskTally.retried.Load(), d.poison.ID, demoRiskAttempts)
	fmt.Fprintf(d.w, "surveillance: up to %d handlers at once; %d acked, %d large trades flagged (qty >= %d)\n",
		survTally.peak.Load(), survTally.acked.Load(), len(surv.flagged), demoLargeTradeQty)
	if err := errors.Join(
		check(riskTally.acked.Load() == total-1 && riskTally.deadLettered.Load() == 1,
			"risk acked %d and dead-lettered %d events, want %d and 1", riskTally.acked.Load(), riskTally.deadLettered.Load(), total-1),
		check(riskTally.retried.Load() == demoRiskAttempts-1,
			"risk retried %d times, want %d", riskTally.retried.Load(), demoRiskAttempts-1),
		check(survTally.acked.Load() == total && survTally.deadLettered.Load() == 0,
			"surveillance acked %d and dead-lettered %d events, want %d and 0", survTally.acked.Load(), survTally.deadLettered.Load(), total),
		check(len(surv.flagged) == large, "surveillance flagged %d trades, want %d", len(surv.flagged), large),
		check(len(d.risk.notional) == trades-1, "the risk book holds %d trades, want %d", len(d.risk.notional), trades-1),
	); err != nil {
		return failf("%s", oneLine(err.Error()))
	}

	fmt.Fprintln(d.w, "exposure by trader (risk book):")
	if err := d.exposureTable(d.risk.exposure()); err != nil {
		return err
	}
	fmt.Fprintln(d.w, "lag after consuming:")
	risk, survLag, err := d.lagTable()
	if err != nil {
		return err
	}
	if err := check(risk == 0 && survLag == 0, "lag is %d (risk) and %d (surveillance), want 0", risk, survLag); err != nil {
		return err
	}
	return d.checkDeadLetter()
}

// checkDeadLetter shows the risk group's dead letters: the poison event,
// at the last attempt, with the handler's error as the reason.
func (d *demo) checkDeadLetter() error {
	dls, err := d.drv.DeadLetters(d.ctx, d.stream, "risk", nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(d.w, "dead letters of risk:")
	t := newTable("EVENT_ID", "PARTITION", "SEQUENCE", "ATTEMPT", "REASON", "PAYLOAD")
	for _, dl := range dls {
		t.add(dl.Event.ID, dl.Event.Partition, dl.Event.Sequence, dl.Attempt, dl.Reason, dl.Event.Payload)
	}
	if err := t.write(d.w); err != nil {
		return err
	}
	return check(len(dls) == 1 && dls[0].Event.ID == d.poison.ID && dls[0].Attempt == demoRiskAttempts &&
		strings.Contains(dls[0].Reason, "invalid quantity"),
		"risk has %d dead letters, want only %s at attempt %d with the handler's error", len(dls), d.poison.ID, demoRiskAttempts)
}

func (d *demo) exposureTable(exposure map[string]float64) error {
	t := newTable("TRADER", "NOTIONAL")
	for _, trader := range demoTraders {
		t.add(trader, fmt.Sprintf("%.2f", exposure[trader]))
	}
	return t.write(d.w)
}

// replay rewinds the risk group to demoReplayAfter in every partition,
// checks the count and the lag, and runs the risk worker again: the book
// must come out the same, and surveillance must not have moved.
func (d *demo) replay() error {
	lag, err := d.drv.Lag(d.ctx, d.stream, "risk", nil)
	if err != nil {
		return err
	}
	var want int64
	for _, p := range lag.Partitions {
		want += max(0, p.HighWatermark-demoReplayAfter)
	}
	before := d.risk.exposure()
	from := int64(demoReplayAfter)
	n, err := d.drv.Replay(d.ctx, d.stream, "risk", &rheo.ReplayOptions{FromSequence: &from})
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "replay risk from sequence %d: %d events are claimable again (nothing is copied)\n", demoReplayAfter, n)
	if err := check(n == want, "replay returned %d, want %d", n, want); err != nil {
		return err
	}
	fmt.Fprintln(d.w, "lag after the replay (surveillance is untouched):")
	risk, surv, err := d.lagTable()
	if err != nil {
		return err
	}
	if err := check(risk == want && surv == 0, "lag is %d (risk) and %d (surveillance), want %d and 0", risk, surv, want); err != nil {
		return err
	}

	poisonAgain := int64(0)
	if d.poison.Sequence > demoReplayAfter {
		poisonAgain = 1
	}
	t, err := d.runWorker("risk", d.risk.handle, want)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "risk worker ran again: %d acked, %d dead-lettered; the risk book is unchanged because it is keyed by event id\n",
		t.acked.Load(), t.deadLettered.Load())
	after := d.risk.exposure()
	if err := check(t.acked.Load() == want-poisonAgain && t.deadLettered.Load() == poisonAgain,
		"the replay was settled as %d acks and %d dead letters, want %d and %d", t.acked.Load(), t.deadLettered.Load(), want-poisonAgain, poisonAgain); err != nil {
		return err
	}
	for _, trader := range demoTraders {
		if err := check(before[trader] == after[trader], "exposure of %s changed from %.2f to %.2f", trader, before[trader], after[trader]); err != nil {
			return err
		}
	}
	if err := d.exposureTable(after); err != nil {
		return err
	}
	lagAfter, err := d.drv.Lag(d.ctx, d.stream, "risk", nil)
	if err != nil {
		return err
	}
	return check(lagAfter.Total == 0, "risk lag is %d after the rerun, want 0", lagAfter.Total)
}

// demoTrader is whose trades the demo looks up by payload.
const demoTrader = "ana"

// query searches the history three ways, each checked against what was
// appended: the trades of one trader by payload (paging with the cursor),
// one order's events by correlation id, and a symbol's latest quotes.
func (d *demo) query() error {
	byQueryOrder := func(a, b rheo.Event) int {
		if a.Sequence != b.Sequence {
			return int(a.Sequence - b.Sequence)
		}
		return a.Partition - b.Partition
	}

	var wantTrades []rheo.Event
	for _, ev := range d.events {
		var t trade
		if json.Unmarshal(ev.Payload, &t) == nil && t.Type == "trade.executed" && t.Trader == demoTrader {
			wantTrades = append(wantTrades, ev)
		}
	}
	slices.SortFunc(wantTrades, byQueryOrder)
	q := rheo.Query{Type: "trade.executed", Payload: mustJSON(map[string]string{"trader": demoTrader}), MaxCount: 4}
	var trades []rheo.Event
	pages := 0
	for {
		page, err := d.drv.Query(d.ctx, d.stream, q)
		if err != nil {
			return err
		}
		pages++
		trades = append(trades, page.Events...)
		if len(page.Events) < q.MaxCount {
			break
		}
		q.After = page.Cursor
	}
	fmt.Fprintf(d.w, "type trade.executed with payload {\"trader\": %q}: %d events, read in %d pages of at most %d:\n",
		demoTrader, len(trades), pages, q.MaxCount)
	t := newTable("PARTITION", "SEQUENCE", "ID", "KEY", "QTY", "PRICE")
	for _, ev := range trades {
		var tr trade
		if err := json.Unmarshal(ev.Payload, &tr); err != nil {
			return err
		}
		t.add(ev.Partition, ev.Sequence, ev.ID, ev.Key, tr.Qty, fmt.Sprintf("%.2f", tr.Price))
	}
	if err := t.write(d.w); err != nil {
		return err
	}
	if err := check(slices.EqualFunc(trades, wantTrades, func(a, b rheo.Event) bool { return a.ID == b.ID }),
		"the query returned %d trades of %s, want the %d appended, in (sequence, partition) order", len(trades), demoTrader, len(wantTrades)); err != nil {
		return err
	}

	page, err := d.drv.Query(d.ctx, d.stream, rheo.Query{Metadata: rheo.Lineage{CorrelationID: demoCorrelationQuery}.Metadata()})
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "correlation id %s: the order and the trade it caused\n", demoCorrelationQuery)
	t = newTable("PARTITION", "SEQUENCE", "ID", "TYPE", "CAUSATION_ID", "PRODUCER")
	lineages := make([]rheo.Lineage, len(page.Events))
	for i, ev := range page.Events {
		if lineages[i], err = rheo.LineageOf(ev.Metadata); err != nil {
			return err
		}
		t.add(ev.Partition, ev.Sequence, ev.ID, ev.Type, lineages[i].CausationID, lineages[i].Producer)
	}
	if err := t.write(d.w); err != nil {
		return err
	}
	order := strings.TrimPrefix(demoCorrelationQuery, "order-")
	if err := check(len(page.Events) == 2 && page.Events[0].ID == "o-"+order+".placed" && page.Events[1].ID == "o-"+order+".trade" &&
		lineages[1].CausationID == page.Events[0].ID,
		"correlation id %s found %d events, want o-%s.placed and the trade it caused", demoCorrelationQuery, len(page.Events), order); err != nil {
		return err
	}

	symbol := demoSymbols[2]
	var wantQuotes []rheo.Event
	for _, ev := range d.events {
		if ev.Type == "quote" && ev.Key == symbol {
			wantQuotes = append(wantQuotes, ev)
		}
	}
	slices.SortFunc(wantQuotes, func(a, b rheo.Event) int { return byQueryOrder(b, a) })
	page, err = d.drv.Query(d.ctx, d.stream, rheo.Query{Type: "quote", Key: symbol, MaxCount: 3, Descending: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "the latest 3 quotes of %s, newest first:\n", symbol)
	t = newTable("PARTITION", "SEQUENCE", "TS", "PAYLOAD")
	for _, ev := range page.Events {
		t.add(ev.Partition, ev.Sequence, ev.TS, ev.Payload)
	}
	if err := t.write(d.w); err != nil {
		return err
	}
	return check(slices.EqualFunc(page.Events, wantQuotes[:3], func(a, b rheo.Event) bool { return a.ID == b.ID }),
		"the latest quotes of %s are not the last 3 appended", symbol)
}
