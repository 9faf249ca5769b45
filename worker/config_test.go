package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/worker"
)

// Drivers for validation only: New and NewConsumer never call them.
type (
	plainDriver struct{ driver.Driver }
	txDriver    struct {
		driver.Driver
		driver.Transactor
	}
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	nop := func(ctx context.Context, l rheo.Lease) error { return nil }
	txNop := func(ctx context.Context, tx driver.Tx, l rheo.Lease) error { return nil }
	valid := func() *worker.Config { return &worker.Config{Stream: "s", Group: "g", Handler: nop} }

	for _, tc := range []struct {
		name   string
		drv    driver.Driver
		modify func(*worker.Config)
		want   string
	}{
		{"a nil driver", nil, func(*worker.Config) {}, "driver is nil"},
		{"no stream", txDriver{}, func(c *worker.Config) { c.Stream = "" }, "Stream is required"},
		{"no group", txDriver{}, func(c *worker.Config) { c.Group = "" }, "Group is required"},
		{"no handler", txDriver{}, func(c *worker.Config) { c.Handler = nil }, "one of Handler and TxHandler"},
		{"both handlers", txDriver{}, func(c *worker.Config) { c.TxHandler = txNop }, "Handler and TxHandler are exclusive"},
		{"a TxHandler on a driver that is not a Transactor", plainDriver{}, func(c *worker.Config) { c.Handler, c.TxHandler = nil, txNop }, "TxHandler needs a driver that implements driver.Transactor"},
		{"negative concurrency", txDriver{}, func(c *worker.Config) { c.Concurrency = -1 }, "Concurrency must not be negative"},
		{"demand below concurrency", txDriver{}, func(c *worker.Config) { c.Concurrency, c.MaxDemand = 8, 4 }, "MaxDemand (4) must be at least Concurrency (8)"},
		{"negative lease", txDriver{}, func(c *worker.Config) { c.LeaseDuration = -time.Second }, "LeaseDuration must not be negative"},
		{"a lease under a millisecond", txDriver{}, func(c *worker.Config) { c.LeaseDuration = time.Microsecond }, "LeaseDuration must be at least 1ms"},
		{"a lease beyond lease_ms", txDriver{}, func(c *worker.Config) { c.LeaseDuration = 1000 * time.Hour }, "LeaseDuration must be at most"},
		{"negative poll interval", txDriver{}, func(c *worker.Config) { c.PollInterval = -time.Second }, "PollInterval must not be negative"},
		{"empty partitions", txDriver{}, func(c *worker.Config) { c.Partitions = []int{} }, "Partitions must not be empty"},
		{"a negative partition", txDriver{}, func(c *worker.Config) { c.Partitions = []int{0, -1} }, "Partitions[1] must not be negative"},
		{"a repeated partition", txDriver{}, func(c *worker.Config) { c.Partitions = []int{2, 2} }, "Partitions[1] repeats partition 2"},
		{"negative ack batch", txDriver{}, func(c *worker.Config) { c.AckBatchSize = -1 }, "AckBatchSize must not be negative"},
		{"negative ack flush interval", txDriver{}, func(c *worker.Config) { c.AckFlushInterval = -time.Second }, "AckFlushInterval must not be negative"},
		{"a hook that implements nothing", txDriver{}, func(c *worker.Config) { c.Hooks = []any{&recorder{}, "hook"} }, "Hooks[1] (string) implements none"},
		{"a nil hook", txDriver{}, func(c *worker.Config) { c.Hooks = []any{nil} }, "Hooks[0] (<nil>) is nil"},
		{"a hook method of the wrong signature", txDriver{}, func(c *worker.Config) { c.Hooks = []any{wrongAcked{}} },
			"Hooks[0] (worker_test.wrongAcked) has a method Acked (worker.AckInfo), not the Acked of worker.AckedHook: Acked (context.Context, worker.AckInfo)"},
		{"a hook with one method right and one wrong", txDriver{}, func(c *worker.Config) { c.Hooks = []any{halfRight{}} },
			"has a method Retried (context.Context, *worker.RetryInfo), not the Retried of worker.RetriedHook"},
		{"a hook given as a value whose methods are on the pointer", txDriver{}, func(c *worker.Config) { c.Hooks = []any{recorder{}} },
			"implements worker.FetchedHook only as a pointer: give &value"},
	} {
		t.Run("New refuses "+tc.name, func(t *testing.T) {
			cfg := valid()
			tc.modify(cfg)
			_, err := worker.New(tc.drv, cfg)
			require.ErrorIs(t, err, rheo.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("New refuses a nil config", func(t *testing.T) {
		_, err := worker.New(txDriver{}, nil)
		assert.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})

	t.Run("New accepts a TxHandler on a Transactor", func(t *testing.T) {
		_, err := worker.New(txDriver{}, &worker.Config{Stream: "s", Group: "g", TxHandler: txNop})
		assert.NoError(t, err)
	})

	for _, tc := range []struct {
		name   string
		modify func(*worker.Config)
		want   string
	}{
		{"a handler", func(c *worker.Config) { c.Handler = nop }, "Handler and TxHandler must be nil for a Consumer"},
		{"a TxHandler", func(c *worker.Config) { c.TxHandler = txNop }, "Handler and TxHandler must be nil for a Consumer"},
		{"a concurrency", func(c *worker.Config) { c.Concurrency = 4 }, "Concurrency applies to workers only"},
		{"a retry policy", func(c *worker.Config) { c.RetryPolicy = worker.DefaultRetryPolicy }, "RetryPolicy applies to workers only"},
		{"a negative demand", func(c *worker.Config) { c.MaxDemand = -1 }, "MaxDemand must not be negative"},
	} {
		t.Run("NewConsumer refuses "+tc.name, func(t *testing.T) {
			cfg := &worker.Config{Stream: "s", Group: "g"}
			tc.modify(cfg)
			_, err := worker.NewConsumer(txDriver{}, cfg)
			require.ErrorIs(t, err, rheo.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestOutcomeHelpers(t *testing.T) {
	t.Parallel()
	t.Run("Retry counts a negative delay as zero", func(t *testing.T) {
		var r *worker.RetryError
		require.ErrorAs(t, worker.Retry(-time.Second, nil), &r)
		assert.Equal(t, time.Duration(0), r.Delay)
	})
	t.Run("outcomes wrap their reason", func(t *testing.T) {
		reason := rheo.Errorf(rheo.ErrFailed, "x")
		assert.ErrorIs(t, worker.Retry(time.Second, reason), rheo.ErrFailed)
		assert.ErrorIs(t, worker.Reject(reason), rheo.ErrFailed)
	})
}

// wrongAcked has an Acked method without the context: a hook that would
// never be called.
type wrongAcked struct{}

func (wrongAcked) Acked(worker.AckInfo) {}

// halfRight implements AckedHook, and has a Retried of another signature.
type halfRight struct{}

func (halfRight) Acked(context.Context, worker.AckInfo)      {}
func (halfRight) Retried(context.Context, *worker.RetryInfo) {}
