// Command olddriver is the application TestOldDriver builds against the
// previous release's module (its go.mod replaces github.com/rheo-go/rheo
// with that release's source): a producer on that release's PostgreSQL
// driver and two of its workers (package worker, each on a driver of its
// own, as two instances of an application), whose TxHandler writes the
// effect in the ack's transaction.
//
// It connects to RHEO_URL, creates its stream, groups and effects table,
// and runs the workload. It prints "ready" once events have been
// appended and handled, and goes on until a line arrives on stdin (the
// test has upgraded the schema meanwhile). Then it appends more events,
// one by one and in a batch, re-appends an event of before the upgrade,
// lets the workers handle everything, reads the log through a second
// group (fetch, ack_batch), replays a few events to it, and prints a
// report as JSON on stdout.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/worker"
)

// report is what the program prints.
type report struct {
	AppendedBefore int64    `json:"appended_before"` // appended before the line on stdin
	Appended       int64    `json:"appended"`        // appended in all
	Handled        int64    `json:"handled"`         // TxHandler calls of the workers
	Reappended     bool     `json:"reappended"`      // the re-append returned the stored event
	AuditAcked     int64    `json:"audit_acked"`     // acked through ack_batch by the second group
	Replayed       int64    `json:"replayed"`        // events replay made due again
	ReplayAcked    int64    `json:"replay_acked"`    // of those, fetched and acked again
	Lag            int64    `json:"lag"`             // the workers' lag at the end
	Errors         []string `json:"errors"`
}

const (
	stream     = "orders"
	afterCount = 1000 // events appended one by one after the upgrade
	readyAfter = 1000 // events appended before "ready"
	batchSize  = 100  // then in one batch
	replayed   = 10
)

func main() {
	// A bound for a stuck run, not a budget: on a loaded machine the
	// upgrade it spans can take a minute or more.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var r report
	if err := run(ctx, &r); err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		os.Exit(1)
	}
}

type app struct {
	d        *postgres.Driver
	appended atomic.Int64
	handled  atomic.Int64
	mu       sync.Mutex
	errs     []string
}

// Enabled, Handle, WithAttrs and WithGroup make app the workers' slog
// handler: what they log at Warn and above (a failed fetch, ack, renew
// or commit) is an error of the run.
func (a *app) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (a *app) Handle(_ context.Context, r slog.Record) error {
	msg := "worker: " + r.Message
	r.Attrs(func(at slog.Attr) bool {
		msg += " " + at.String()
		return true
	})
	a.fail(errors.New(msg))
	return nil
}

func (a *app) WithAttrs([]slog.Attr) slog.Handler { return a }
func (a *app) WithGroup(string) slog.Handler      { return a }

func (a *app) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.errs) < 20 {
		a.errs = append(a.errs, err.Error())
	}
}

func run(ctx context.Context, r *report) error {
	d, err := postgres.Open(ctx, os.Getenv("RHEO_URL"), &postgres.Options{PollOnly: true})
	if err != nil {
		return err
	}
	defer d.Close()
	a := &app{d: d}
	defer func() {
		r.Appended, r.Handled = a.appended.Load(), a.handled.Load()
		r.Errors = a.errs
	}()
	if _, err := d.Pool().Exec(ctx, `CREATE TABLE effects (event_id text PRIMARY KEY)`); err != nil {
		return err
	}
	if err := d.CreateStream(ctx, stream, 4); err != nil {
		return err
	}
	for _, g := range []string{"workers", "audit"} {
		if err := d.CreateGroup(ctx, stream, g, &rheo.CreateGroupOptions{MaxAttempts: 5}); err != nil {
			return err
		}
	}
	first, err := d.Append(ctx, stream, json.RawMessage(`{"type": "placed"}`), &rheo.AppendOptions{Key: "k0", ID: "p-0"})
	if err != nil {
		return err
	}
	a.appended.Add(1)

	var (
		workers []*worker.Worker
		drivers []*postgres.Driver
	)
	stopWorkers := func() {
		for _, w := range workers {
			if err := w.Stop(ctx); err != nil {
				a.fail(fmt.Errorf("stop worker: %w", err))
			}
		}
		for _, wd := range drivers {
			_ = wd.Close()
		}
		workers, drivers = nil, nil
	}
	defer stopWorkers()
	for c := range 2 {
		wd, err := postgres.Open(ctx, os.Getenv("RHEO_URL"), &postgres.Options{PollOnly: true})
		if err != nil {
			return err
		}
		drivers = append(drivers, wd)
		w, err := worker.New(wd, &worker.Config{
			Stream: stream, Group: "workers", TxHandler: a.handle,
			ConsumerID: "worker-" + strconv.Itoa(c), PollInterval: 20 * time.Millisecond,
			Logger: slog.New(a),
		})
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		workers = append(workers, w)
	}

	// The producer runs until the line on stdin, then afterCount more.
	upgraded := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(upgraded)
	}()
	ready := false
	after := 0
	for i := 1; after < afterCount; i++ {
		select {
		case <-upgraded:
			if r.AppendedBefore == 0 {
				r.AppendedBefore = a.appended.Load()
			}
			after++
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if _, err := d.Append(ctx, stream, json.RawMessage(`{"type": "placed"}`),
			&rheo.AppendOptions{Key: "k" + strconv.Itoa(i%97), ID: "p-" + strconv.Itoa(i)}); err != nil {
			a.fail(fmt.Errorf("append: %w", err))
		} else {
			a.appended.Add(1)
		}
		if !ready && a.appended.Load() >= readyAfter && a.handled.Load() >= readyAfter/2 {
			ready = true
			fmt.Println("ready")
		}
		if i%50 == 0 {
			if _, err := d.Lag(ctx, stream, "workers", nil); err != nil {
				a.fail(fmt.Errorf("lag: %w", err))
			}
		}
		time.Sleep(time.Millisecond)
	}
	items := make([]rheo.BatchItem, batchSize)
	for i := range items {
		items[i] = rheo.BatchItem{Payload: json.RawMessage(`{"type": "batched"}`), Key: "b" + strconv.Itoa(i), ID: "b-" + strconv.Itoa(i)}
	}
	if events, err := d.AppendBatch(ctx, stream, items, nil); err != nil {
		a.fail(fmt.Errorf("append_batch: %w", err))
	} else {
		a.appended.Add(int64(len(events)))
	}
	again, err := d.Append(ctx, stream, json.RawMessage(`{"type": "placed"}`), &rheo.AppendOptions{Key: "k0", ID: "p-0"})
	if err != nil {
		a.fail(fmt.Errorf("re-append: %w", err))
	}
	r.Reappended = err == nil && again.ID == first.ID && again.Sequence == first.Sequence && again.Partition == first.Partition

	// The workers handle everything.
	for {
		lag, err := d.Lag(ctx, stream, "workers", nil)
		if err != nil {
			return fmt.Errorf("lag: %w", err)
		}
		r.Lag = lag.Total
		if lag.Total == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the workers did not catch up: lag %d", lag.Total)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stopWorkers()

	// The second group reads the whole log, then gets a few events again.
	var firstIDs []string
	if r.AuditAcked, err = drain(ctx, d, "audit", func(l rheo.Lease) {
		if len(firstIDs) < replayed {
			firstIDs = append(firstIDs, l.Event.ID)
		}
	}); err != nil {
		return err
	}
	if r.Replayed, err = d.Replay(ctx, stream, "audit", &rheo.ReplayOptions{EventIDs: firstIDs}); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if r.ReplayAcked, err = drain(ctx, d, "audit", func(rheo.Lease) {}); err != nil {
		return err
	}
	return nil
}

// handle is the workers' TxHandler: the effect, in the transaction in
// which the worker acks the event.
func (a *app) handle(ctx context.Context, tx driver.Tx, l rheo.Lease) error {
	a.handled.Add(1)
	if _, err := tx.Native().(pgx.Tx).Exec(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, l.Event.ID); err != nil {
		a.fail(fmt.Errorf("effect of %s: %w", l.Event.ID, err))
		return err
	}
	return nil
}

// drain fetches the group's due events and acks them in batches until
// none is due, and returns how many it acked.
func drain(ctx context.Context, d *postgres.Driver, group string, seen func(rheo.Lease)) (int64, error) {
	var n int64
	for {
		leases, err := d.Fetch(ctx, stream, group, &rheo.FetchOptions{MaxCount: 500, ConsumerID: "reader", LeaseDuration: 30 * time.Second})
		if err != nil {
			return n, fmt.Errorf("fetch %s: %w", group, err)
		}
		if len(leases) == 0 {
			return n, nil
		}
		ids := make([]string, len(leases))
		for i, l := range leases {
			seen(l)
			ids[i] = l.LeaseID
		}
		results, err := d.AckBatch(ctx, ids)
		if err != nil {
			return n, fmt.Errorf("ack_batch %s: %w", group, err)
		}
		for _, res := range results {
			if !res.OK {
				return n, fmt.Errorf("ack_batch %s: lease %s stale", group, res.LeaseID)
			}
		}
		n += int64(len(results))
	}
}
