package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

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
