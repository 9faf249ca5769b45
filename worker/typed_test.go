package worker_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/worker"
)

// counted is the payload of appendN's events.
type counted struct {
	N int `json:"n"`
}

// appendRaw appends one event with payload to the bundle's stream.
func appendRaw(t *testing.T, bd *bundle, payload string) rheo.Event {
	t.Helper()
	ev, err := bd.drv.Append(context.Background(), bd.stream, json.RawMessage(payload), nil)
	require.NoError(t, err)
	return ev
}

func TestTypedHandlers(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("TypedTx writes and acks in one transaction, and dead-letters what does not decode", func(t *testing.T) {
			bd := setup(t, b, 5)
			createSideTable(t, bd.drv)
			good := appendRaw(t, bd, `{"n": 7}`)
			bad := appendRaw(t, bd, `{"n": [7]}`)
			cfg := bd.config(nil)
			cfg.TxHandler = worker.TypedTx(func(ctx context.Context, tx driver.Tx, l rheo.Lease, c counted) error {
				assert.Equal(t, 7, c.N, "decoded %d, want 7", c.N)
				return execTx(ctx, tx, "INSERT INTO side (event_id) VALUES ("+b.Placeholder+")", l.Event.ID)
			})
			workertest.StartWorker(t, bd.drv, cfg)
			bd.rec.WaitFor(t, "the ack and the dead letter", func(s recorded) bool {
				return len(s.Acked) == 1 && len(s.DeadLettered) == 1
			})
			assert.Equal(t, 1, sideRows(t, b, bd.drv, good.ID))
			assert.Equal(t, 0, sideRows(t, b, bd.drv, bad.ID))
			dls := workertest.DeadLetters(t, bd.drv, bd.stream, bd.group)
			require.Len(t, dls, 1)
			assert.Equal(t, bad.ID, dls[0].Event.ID)
			assert.Contains(t, dls[0].Reason, "decode payload as worker_test.counted")
		})
	})
}
