package rheotest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/rheotest"
	"github.com/rheo-go/rheo/worker"
)

type orderPlaced struct {
	Customer string `json:"customer"`
	Total    int    `json:"total"`
}

func (orderPlaced) EventType() string { return "order.placed" }

type invoiceIssued struct {
	Customer string `json:"customer"`
}

func (invoiceIssued) EventType() string { return "invoice.issued" }

func TestWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		// The cases share the backend's database: each drops its streams
		// when it ends.
		setup := func(t *testing.T, maxAttempts int) (driver.Driver, *rheotest.Clock) {
			clock := rheotest.NewClock(time.Time{})
			d := b.Open(t, clock)
			require.NoError(t, d.CreateStream(ctx, "orders", 1))
			require.NoError(t, d.CreateStream(ctx, "invoices", 1))
			t.Cleanup(func() {
				_, _ = d.DropStream(context.WithoutCancel(ctx), "orders", &rheo.DropOptions{Confirm: true})
				_, _ = d.DropStream(context.WithoutCancel(ctx), "invoices", &rheo.DropOptions{Confirm: true})
			})
			require.NoError(t, d.CreateGroup(ctx, "orders", "billing", &rheo.CreateGroupOptions{MaxAttempts: maxAttempts}))
			_, err := driver.AppendJSON(ctx, d, "orders", orderPlaced{Customer: "ana", Total: 42}, nil)
			require.NoError(t, err)
			return d, clock
		}
		fail := func(ctx context.Context, l rheo.Lease) error { return errors.New("payment service down") }

		t.Run("a handler that returns nil is acked, and what it appends is found", func(t *testing.T) {
			d, _ := setup(t, 5)
			res := rheotest.Work(ctx, t, d, "orders", "billing", worker.Typed(func(ctx context.Context, l rheo.Lease, o orderPlaced) error {
				_, err := driver.AppendJSON(ctx, d, "invoices", invoiceIssued{Customer: o.Customer}, nil)
				return err
			}))
			assert.Equal(t, rheotest.Acked, res.Outcome)
			assert.NoError(t, res.Err)
			assert.Equal(t, "order.placed", res.Lease.Event.Type)
			info, err := d.GroupInfo(ctx, "orders", "billing")
			require.NoError(t, err)
			assert.Equal(t, int64(0), info.Lag)
			ev := rheotest.RequireAppended(t, d, "invoices", func(ev rheo.Event) bool { return ev.Type == "invoice.issued" })
			assert.JSONEq(t, `{"type": "invoice.issued", "customer": "ana"}`, string(ev.Payload))
		})

		t.Run("a failure is retried after the default back-off, and comes back when the clock passes it", func(t *testing.T) {
			d, clock := setup(t, 5)
			res := rheotest.Work(ctx, t, d, "orders", "billing", fail)
			assert.Equal(t, rheotest.Retried, res.Outcome)
			assert.EqualError(t, res.Err, "payment service down")
			assert.Equal(t, "payment service down", res.Reason)
			assert.InDelta(t, time.Second, res.Delay, float64(200*time.Millisecond), "attempt 1 waits 1s ±20%")
			leases, err := d.Fetch(ctx, "orders", "billing", nil)
			require.NoError(t, err)
			assert.Empty(t, leases, "not claimable before its delay")

			clock.Advance(res.Delay)
			res = rheotest.Work(ctx, t, d, "orders", "billing", worker.Typed(func(ctx context.Context, l rheo.Lease, o orderPlaced) error { return nil }))
			assert.Equal(t, rheotest.Acked, res.Outcome)
			assert.Equal(t, 2, res.Lease.Attempt)
		})

		t.Run("worker.Retry keeps its delay and a panic is retried", func(t *testing.T) {
			d, clock := setup(t, 5)
			res := rheotest.Work(ctx, t, d, "orders", "billing", func(ctx context.Context, l rheo.Lease) error {
				return worker.Retry(time.Minute, errors.New("later"))
			})
			assert.Equal(t, rheotest.Retried, res.Outcome)
			assert.Equal(t, time.Minute, res.Delay)
			assert.Equal(t, "later", res.Reason)

			clock.Advance(time.Minute)
			res = rheotest.Work(ctx, t, d, "orders", "billing", func(ctx context.Context, l rheo.Lease) error { panic("boom") })
			assert.Equal(t, rheotest.Retried, res.Outcome)
			var p *worker.PanicError
			require.ErrorAs(t, res.Err, &p)
			assert.Equal(t, "boom", p.Value)
		})

		t.Run("a payload that does not decode is dead-lettered at once", func(t *testing.T) {
			d, _ := setup(t, 5)
			res := rheotest.Work(ctx, t, d, "orders", "billing", worker.Typed(func(ctx context.Context, l rheo.Lease, total struct{ Total string }) error {
				return nil
			}))
			assert.Equal(t, rheotest.DeadLettered, res.Outcome)
			assert.Contains(t, res.Reason, "decode payload as struct { Total string }")
			var reject *worker.RejectError
			assert.ErrorAs(t, res.Err, &reject)
		})

		t.Run("a failure at the last attempt is dead-lettered", func(t *testing.T) {
			d, _ := setup(t, 1)
			res := rheotest.Work(ctx, t, d, "orders", "billing", fail)
			assert.Equal(t, rheotest.DeadLettered, res.Outcome)
			dls, err := d.DeadLetters(ctx, "orders", "billing", nil)
			require.NoError(t, err)
			require.Len(t, dls, 1)
			assert.Equal(t, "payment service down", dls[0].Reason)
		})
	})
}

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := rheotest.NewClock(start)
	var _ driver.Clock = clock
	fired, release := clock.At(start.Add(time.Minute))
	defer release()
	assert.Equal(t, start.Add(30*time.Second), clock.Advance(30*time.Second))
	select {
	case <-fired:
		require.FailNow(t, "the timer fired early")
	default:
	}
	clock.Advance(30 * time.Second)
	assert.Equal(t, start.Add(time.Minute), <-fired)

	now := rheotest.NewClock(time.Time{}).Now()
	assert.WithinDuration(t, time.Now(), now, time.Minute, "a zero start is now")
	assert.Equal(t, now, now.Truncate(time.Millisecond))
}
