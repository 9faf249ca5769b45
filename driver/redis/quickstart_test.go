package redis_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/worker"
)

// TestQuickstart runs the README's quickstart (example_test.go at the
// root) unchanged but for its URL, on a Redis server of its own: the
// program only imports this package to open redis:// URLs.
func TestQuickstart(t *testing.T) {
	srv := privateServer(t, "everysec")
	ctx := context.Background()
	var out []string
	printf := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	drv, err := connect.Open(ctx, srv.URL(), &connect.Options{Migrate: true})
	require.NoError(t, err)
	defer drv.Close()

	require.NoError(t, drv.CreateStream(ctx, "orders", 4))
	require.NoError(t, drv.CreateGroup(ctx, "orders", "billing", &rheo.CreateGroupOptions{MaxAttempts: 3}))

	type OrderPlaced struct {
		Type     string `json:"type"`
		Customer string `json:"customer"`
		Total    int    `json:"total"`
	}
	for _, order := range []OrderPlaced{{"order.placed", "ana", 42}, {"order.placed", "ben", 7}, {"order.placed", "ana", 13}} {
		ev, err := driver.AppendJSON(ctx, drv, "orders", order, &rheo.AppendOptions{Key: order.Customer})
		require.NoError(t, err)
		printf("appended %s to partition %d at sequence %d", order.Customer, ev.Partition, ev.Sequence)
	}

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
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the worker did not handle the three orders")
	}
	require.NoError(t, w.Stop(ctx))

	slices.Sort(billed)
	printf("billed: %v", billed)
	lag, err := drv.Lag(ctx, "orders", "billing", nil)
	require.NoError(t, err)
	printf("lag: %d", lag.Total)

	require.Equal(t, []string{
		"appended ana to partition 2 at sequence 1",
		"appended ben to partition 0 at sequence 1",
		"appended ana to partition 2 at sequence 2",
		"billed: [ana 13 ana 42 ben 7]",
		"lag: 0",
	}, out)
}
