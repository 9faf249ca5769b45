package rheo_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sync"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/worker"
)

// Example is the quickstart of the README: a stream, a consumer group, a
// producer and a worker. It runs on an in-memory SQLite database; point
// connect.Open at postgres://… to run it on PostgreSQL.
func Example() {
	ctx := context.Background()

	// Open a database by URL. Migrate installs Rheo's schema; in
	// production run rheo-migrate in the release step instead.
	drv, err := connect.Open(ctx, "sqlite::memory:", &connect.Options{Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()

	// A stream with 4 partitions, and a consumer group that reads it.
	if err := drv.CreateStream(ctx, "orders", 4); err != nil {
		log.Fatal(err)
	}
	if err := drv.CreateGroup(ctx, "orders", "billing", &rheo.CreateGroupOptions{MaxAttempts: 3}); err != nil {
		log.Fatal(err)
	}

	// "type" is the event's type, as queries and the dashboard show it.
	type OrderPlaced struct {
		Type     string `json:"type"`
		Customer string `json:"customer"`
		Total    int    `json:"total"`
	}

	// Producers append events. The key picks the partition, so all the
	// events of one customer keep their order.
	for _, order := range []OrderPlaced{{"order.placed", "ana", 42}, {"order.placed", "ben", 7}, {"order.placed", "ana", 13}} {
		ev, err := driver.AppendJSON(ctx, drv, "orders", order, &rheo.AppendOptions{Key: order.Customer})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("appended %s to partition %d at sequence %d\n", order.Customer, ev.Partition, ev.Sequence)
	}

	// A worker runs the handler for every event of the group, decoded
	// into an OrderPlaced: returning nil acks the event, an error
	// retries it after a back-off (1s doubling to 5 minutes),
	// worker.Reject(err) dead-letters it.
	var (
		mu     sync.Mutex
		billed []string
		all    = make(chan struct{})
	)
	w, err := worker.New(drv, &worker.Config{
		Stream:      "orders",
		Group:       "billing",
		Concurrency: 2,
		Handler: worker.Typed(func(ctx context.Context, lease rheo.Lease, order OrderPlaced) error {
			mu.Lock()
			defer mu.Unlock()
			billed = append(billed, fmt.Sprintf("%s %d", order.Customer, order.Total))
			if len(billed) == 3 {
				close(all)
			}
			return nil
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-all
	// Stop waits for the handlers and writes their acks.
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	slices.Sort(billed)
	fmt.Println("billed:", billed)
	lag, err := drv.Lag(ctx, "orders", "billing", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("lag:", lag.Total)

	// Output:
	// appended ana to partition 2 at sequence 1
	// appended ben to partition 0 at sequence 1
	// appended ana to partition 2 at sequence 2
	// billed: [ana 13 ana 42 ben 7]
	// lag: 0
}
