package worker_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/worker"
)

// exampleStream opens an in-memory database with a stream "orders", a
// group "billing" and three events.
func exampleStream(ctx context.Context) *sqlite.Driver {
	drv, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Migrate: true})
	if err != nil {
		panic(err)
	}
	if err := drv.CreateStream(ctx, "orders", 1); err != nil {
		panic(err)
	}
	if err := drv.CreateGroup(ctx, "orders", "billing", nil); err != nil {
		panic(err)
	}
	for _, p := range []string{
		`{"type": "order.placed", "order": 1}`,
		`{"type": "order.placed", "order": 2}`,
		`{"type": "order.cancelled", "order": 1}`,
	} {
		if _, err := drv.Append(ctx, "orders", json.RawMessage(p), nil); err != nil {
			panic(err)
		}
	}
	return drv
}

func ExampleWorker() {
	ctx := context.Background()
	drv := exampleStream(ctx)
	defer drv.Close()

	done := make(chan struct{})
	handled := 0
	w, err := worker.New(drv, &worker.Config{
		Stream:      "orders",
		Group:       "billing",
		Concurrency: 1,
		Handler: func(ctx context.Context, lease rheo.Lease) error {
			fmt.Printf("%s #%d, attempt %d\n", lease.Event.Type, lease.Event.Sequence, lease.Attempt)
			if handled++; handled == 3 {
				close(done)
			}
			return nil // ack
		},
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	<-done
	if err := w.Stop(ctx); err != nil { // writes the pending acks
		panic(err)
	}

	lag, err := drv.Lag(ctx, "orders", "billing", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("lag:", lag.Total)
	// Output:
	// order.placed #1, attempt 1
	// order.placed #2, attempt 1
	// order.cancelled #3, attempt 1
	// lag: 0
}

func ExampleWorker_transactional() {
	ctx := context.Background()
	drv := exampleStream(ctx)
	defer drv.Close()
	err := drv.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
		_, err := tx.Native().(*sql.Tx).ExecContext(ctx, `CREATE TABLE invoices (payload text)`)
		return err
	})
	if err != nil {
		panic(err)
	}

	done := make(chan struct{})
	handled := 0
	w, err := worker.New(drv, &worker.Config{
		Stream:      "orders",
		Group:       "billing",
		Concurrency: 1,
		// The insert and the ack commit together, or not at all.
		TxHandler: func(ctx context.Context, tx driver.Tx, lease rheo.Lease) error {
			if lease.Event.Type == "order.placed" {
				_, err := tx.Native().(*sql.Tx).ExecContext(ctx,
					`INSERT INTO invoices (payload) VALUES (?)`, string(lease.Event.Payload))
				if err != nil {
					return err // rolled back and retried
				}
			}
			if handled++; handled == 3 {
				close(done)
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	<-done
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}

	var invoices int
	if err := drv.DB().QueryRowContext(ctx, `SELECT count(*) FROM invoices`).Scan(&invoices); err != nil {
		panic(err)
	}
	lag, err := drv.Lag(ctx, "orders", "billing", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("invoices:", invoices, "lag:", lag.Total)
	// Output:
	// invoices: 2 lag: 0
}

func ExampleConsumer_Leases() {
	ctx := context.Background()
	drv := exampleStream(ctx)
	defer drv.Close()

	c, err := worker.NewConsumer(drv, &worker.Config{Stream: "orders", Group: "billing", MaxDemand: 10})
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	for lease, err := range c.Leases(ctx) {
		if err != nil {
			continue // a fetch error; the iterator backs off and goes on
		}
		fmt.Println(lease.Event.Type, lease.Event.Sequence)
		if lease.Event.Type == "order.cancelled" {
			if err := lease.Reject(ctx, "cancelled orders are not billed"); err != nil {
				panic(err)
			}
			break
		}
		if err := lease.Ack(ctx); err != nil {
			panic(err)
		}
	}
	if err := c.Stop(ctx); err != nil {
		panic(err)
	}

	dls, err := drv.DeadLetters(ctx, "orders", "billing", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("dead letters:", len(dls), dls[0].Reason)
	// Output:
	// order.placed 1
	// order.placed 2
	// order.cancelled 3
	// dead letters: 1 cancelled orders are not billed
}

// OrderPlaced is the payload of an "order.placed" event.
type OrderPlaced struct {
	Order int `json:"order"`
}

// EventType makes rheo.JSON and driver.AppendJSON set the payload's
// "type", which is the event's type.
func (OrderPlaced) EventType() string { return "order.placed" }

func ExampleTyped() {
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Migrate: true})
	if err != nil {
		panic(err)
	}
	defer drv.Close()
	if err := drv.CreateStream(ctx, "orders", 1); err != nil {
		panic(err)
	}
	if err := drv.CreateGroup(ctx, "orders", "billing", nil); err != nil {
		panic(err)
	}
	// A payload that does not decode into an OrderPlaced, then two that do.
	if _, err := drv.Append(ctx, "orders", json.RawMessage(`{"type": "order.placed", "order": "zero"}`), nil); err != nil {
		panic(err)
	}
	for _, o := range []OrderPlaced{{Order: 1}, {Order: 2}} {
		if _, err := driver.AppendJSON(ctx, drv, "orders", o, nil); err != nil {
			panic(err)
		}
	}

	done := make(chan struct{})
	w, err := worker.New(drv, &worker.Config{
		Stream:      "orders",
		Group:       "billing",
		Concurrency: 1,
		Handler: worker.Typed(func(ctx context.Context, lease rheo.Lease, o OrderPlaced) error {
			fmt.Printf("%s: order %d\n", lease.Event.Type, o.Order)
			if o.Order == 2 {
				close(done)
			}
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	<-done
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}

	dls, err := drv.DeadLetters(ctx, "orders", "billing", nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("dead-lettered #%d at attempt %d: %s\n", dls[0].Event.Sequence, dls[0].Attempt, dls[0].Reason)
	// Output:
	// order.placed: order 1
	// order.placed: order 2
	// dead-lettered #1 at attempt 1: decode payload as worker_test.OrderPlaced: json: cannot unmarshal string into Go struct field OrderPlaced.order of type int
}

// Replay makes a group consume again what it has consumed: here, after a
// bug fix, the billing group bills every order again.
func Example_replay() {
	ctx := context.Background()
	drv := exampleStream(ctx)
	defer drv.Close()

	// run consumes the group's three events, each in turn.
	run := func() {
		c, err := worker.NewConsumer(drv, &worker.Config{Stream: "orders", Group: "billing", MaxDemand: 1})
		if err != nil {
			panic(err)
		}
		if err := c.Start(ctx); err != nil {
			panic(err)
		}
		defer c.Stop(ctx)
		seen := 0
		for lease, err := range c.Leases(ctx) {
			if err != nil {
				continue
			}
			fmt.Printf("#%d attempt %d\n", lease.Event.Sequence, lease.Attempt)
			if err := lease.Ack(ctx); err != nil {
				panic(err)
			}
			if seen++; seen == 3 {
				break
			}
		}
	}
	run()

	// Every event after sequence 0 is claimable again, from attempt 1.
	from := int64(0)
	n, err := drv.Replay(ctx, "orders", "billing", &rheo.ReplayOptions{FromSequence: &from})
	if err != nil {
		panic(err)
	}
	fmt.Println("replayed:", n)
	run()
	// Output:
	// #1 attempt 1
	// #2 attempt 1
	// #3 attempt 1
	// replayed: 3
	// #1 attempt 1
	// #2 attempt 1
	// #3 attempt 1
}
