package rheotest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/rheotest"
	"github.com/rheo-go/rheo/worker"
)

// exampleT stands in for the *testing.T of a test, which an example has
// not: it panics where the test would fail, and runs the cleanups at
// finish.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (*exampleT) Helper()                        {}
func (*exampleT) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
func (*exampleT) Errorf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
func (*exampleT) FailNow()                       { panic("the example failed") }
func (t *exampleT) Cleanup(f func())             { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) finish() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// OrderPlaced is the payload of an "order.placed" event.
type OrderPlaced struct {
	Customer string `json:"customer"`
	Total    int    `json:"total"`
}

func (OrderPlaced) EventType() string { return "order.placed" }

// InvoiceIssued is the payload of an "invoice.issued" event.
type InvoiceIssued struct {
	Customer string `json:"customer"`
	Total    int    `json:"total"`
}

func (InvoiceIssued) EventType() string { return "invoice.issued" }

// A handler's test: append an event, work it, check its outcome and what
// the handler appended. The first run of the handler fails; the retry
// comes back once the clock has passed its delay.
func Example() {
	t := &exampleT{} // in a test: the *testing.T
	defer t.finish()
	ctx := context.Background()

	clock := rheotest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	drv := rheotest.OpenClock(t, clock)
	for _, s := range []string{"orders", "invoices"} {
		require.NoError(t, drv.CreateStream(ctx, s, 1), "create stream")
	}
	require.NoError(t, drv.CreateGroup(ctx, "orders", "billing", nil), "create group")
	_, err := driver.AppendJSON(ctx, drv, "orders", OrderPlaced{Customer: "ana", Total: 42}, nil)
	require.NoError(t, err, "append")

	down := true // the payment service, on the first attempt
	bill := worker.Typed(func(ctx context.Context, lease rheo.Lease, o OrderPlaced) error {
		if down {
			down = false
			return errors.New("payment service down")
		}
		_, err := driver.AppendJSON(ctx, drv, "invoices", InvoiceIssued(o), nil)
		return err
	})

	res := rheotest.Work(ctx, t, drv, "orders", "billing", bill)
	fmt.Printf("attempt %d: %s (%v)\n", res.Lease.Attempt, res.Outcome, res.Err)
	clock.Advance(res.Delay) // the retry is due
	res = rheotest.Work(ctx, t, drv, "orders", "billing", bill)
	fmt.Printf("attempt %d: %s\n", res.Lease.Attempt, res.Outcome)

	inv := rheotest.RequireAppended(t, drv, "invoices", func(ev rheo.Event) bool { return ev.Type == "invoice.issued" })
	fmt.Println(string(inv.Payload))
	// Output:
	// attempt 1: retried (payment service down)
	// attempt 2: acked
	// {"type":"invoice.issued","customer":"ana","total":42}
}
