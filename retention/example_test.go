package retention_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/retention"
)

// Keep a stream's events for 30 days: one pass of a Pruner deletes the
// older ones that every group has passed. An application calls Start
// instead, which makes a pass every Config.Interval until Stop.
func Example() {
	ctx := context.Background()
	d, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	if err := d.CreateStream(ctx, "audit", 1); err != nil {
		log.Fatal(err)
	}
	if err := d.SetRetention(ctx, "audit", 30*24*time.Hour); err != nil {
		log.Fatal(err)
	}
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, ts := range []*time.Time{&old, &old, nil} {
		if _, err := d.Append(ctx, "audit", json.RawMessage(`{"type": "login"}`), &rheo.AppendOptions{TS: ts}); err != nil {
			log.Fatal(err)
		}
	}

	pruner, err := retention.New(d, nil)
	if err != nil {
		log.Fatal(err)
	}
	infos, err := pruner.RunOnce(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, info := range infos {
		fmt.Println("pruned", info.Deleted, "events of", info.Stream)
	}
	r, err := d.StreamInfo(ctx, "audit")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retained from sequence", r.Partitions[0].LowWatermark, "to", r.Partitions[0].HighWatermark)
	// Output:
	// pruned 2 events of audit
	// retained from sequence 3 to 3
}
