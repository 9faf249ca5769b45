package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

// TestWorkerOrderedGroup drains groups ordered by key and by partition
// on a clock that never moves, so that no poll ever fires: each settle
// makes the next event claimable, which no wakeup announces, and the
// worker must fetch again on its own.
func TestWorkerOrderedGroup(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for _, o := range []rheo.Ordering{rheo.OrderingKey, rheo.OrderingPartition} {
				t.Run(string(o), func(t *testing.T) {
					bd := setup(t, b, 5)
					bd.group = "ordered-" + string(o)
					require.NoError(t, bd.drv.CreateGroup(context.Background(), bd.stream, bd.group,
						&rheo.CreateGroupOptions{Ordering: o}))
					items := make([]rheo.BatchItem, 4)
					for i := range items {
						items[i] = rheo.BatchItem{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), Key: "k"}
					}
					_, err := bd.drv.AppendBatch(context.Background(), bd.stream, items, nil)
					require.NoError(t, err)
					startWorker(t, bd.drv, bd.config(func(context.Context, rheo.Lease) error { return nil }))

					s := bd.rec.waitFor(t, "4 acks", func(s recorded) bool { return len(s.acked) == 4 })
					for i, l := range s.acked {
						assert.Equal(t, i, payloadN(t, l.Lease), "in sequence order")
					}
				})
			}
		})
	}
}
