package worker_test

import (
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testskip"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/rheotest"
	"github.com/rheo-go/rheo/worker"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(testskip.Wrap(m))
}

// leaseDuration is the lease of the tests that drive a fake clock.
const leaseDuration = 10 * time.Second

// bundle is what a worker test works with.
type bundle struct {
	backend *testbackend.Backend
	drv     driver.Driver
	clock   *rheotest.Clock
	rec     *recorder
	stream  string
	group   string
}

func setup(t *testing.T, b *testbackend.Backend, maxAttempts int) *bundle {
	t.Helper()
	clock := rheotest.NewClock(time.Time{})
	drv := b.Open(t, clock)
	stream, group := newStream(t, drv, 1, maxAttempts)
	return &bundle{backend: b, drv: drv, clock: clock, rec: &recorder{}, stream: stream, group: group}
}

// config is a worker config on the bundle's stream with a fake clock.
func (bd *bundle) config(h worker.Handler) *worker.Config {
	return &worker.Config{
		Stream:        bd.stream,
		Group:         bd.group,
		Handler:       h,
		LeaseDuration: leaseDuration,
		PollInterval:  time.Second,
		Clock:         bd.clock,
		Hooks:         []any{bd.rec},
	}
}

func (bd *bundle) info(t *testing.T) rheo.GroupInfo {
	t.Helper()
	return groupInfo(t, bd.drv, bd.stream, bd.group)
}

// TestWorkerBehaviour runs the worker's behavioural cases
// (internal/workertest), which every driver's module runs on its own
// database too, on SQLite and PostgreSQL.
func TestWorkerBehaviour(t *testing.T) {
	t.Parallel()
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		workertest.Run(t, func(t *testing.T, clock driver.Clock) driver.Driver {
			return b.Open(t, clock)
		})
	})
}
