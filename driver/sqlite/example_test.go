package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/sqlite"
)

// Open an in-memory database, create a stream and a group, append an
// event, fetch it as a lease and ack it.
func Example() {
	ctx := context.Background()
	d, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	if err := d.CreateStream(ctx, "orders", 1); err != nil {
		log.Fatal(err)
	}
	if err := d.CreateGroup(ctx, "orders", "billing", nil); err != nil {
		log.Fatal(err)
	}
	ev, err := d.Append(ctx, "orders", json.RawMessage(`{"type": "order.placed", "total": 42}`), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended", ev.Type, "at sequence", ev.Sequence)

	leases, err := d.Fetch(ctx, "orders", "billing", nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range leases {
		fmt.Println("leased", l.Event.Type, "attempt", l.Attempt, string(l.Event.Payload))
		if err := d.Ack(ctx, l.LeaseID); err != nil {
			log.Fatal(err)
		}
	}

	lag, err := d.Lag(ctx, "orders", "billing", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("lag", lag.Total)
	// Output:
	// appended order.placed at sequence 1
	// leased order.placed attempt 1 {"type":"order.placed","total":42}
	// lag 0
}

// A group ordered by key hands out each key's events one at a time, in
// sequence order, while other keys go on: the second event of "ana"
// waits until her first is acked.
func Example_orderingByKey() {
	ctx := context.Background()
	d, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	if err := d.CreateStream(ctx, "orders", 1); err != nil {
		log.Fatal(err)
	}
	if err := d.CreateGroup(ctx, "orders", "shipping", &rheo.CreateGroupOptions{Ordering: rheo.OrderingKey}); err != nil {
		log.Fatal(err)
	}
	for _, customer := range []string{"ana", "ana", "ben"} {
		if _, err := d.Append(ctx, "orders", json.RawMessage(`{"type": "order.placed"}`),
			&rheo.AppendOptions{Key: customer}); err != nil {
			log.Fatal(err)
		}
	}
	fetch := func() []rheo.Lease {
		leases, err := d.Fetch(ctx, "orders", "shipping", nil)
		if err != nil {
			log.Fatal(err)
		}
		for _, l := range leases {
			fmt.Printf("leased %s's event %d\n", l.Event.Key, l.Event.Sequence)
		}
		return leases
	}
	first := fetch()
	fmt.Println("then", len(fetch()), "leases")
	if err := d.Ack(ctx, first[0].LeaseID); err != nil {
		log.Fatal(err)
	}
	fetch()
	// Output:
	// leased ana's event 1
	// leased ben's event 3
	// then 0 leases
	// leased ana's event 2
}
