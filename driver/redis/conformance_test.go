package redis_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/redis"
	"github.com/rheo-go/rheo/driver/redis/redistest"
)

// TestMain stops the servers the tests started, and fails a run that
// leaves goroutines behind (a Driver's wakeup listeners end with it).
func TestMain(m *testing.M) {
	code := m.Run()
	redistest.StopShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// deployments are the Redis deployments the tests run on, by subtest
// name.
var deployments = []struct {
	name string
	url  func(tb testing.TB) string
}{
	{"standalone", redistest.StandaloneURL},
	{"cluster", redistest.ClusterURL},
}

// TestConformance runs the driver conformance suite (driver/drivertest)
// against one Redis server and a Redis Cluster. Drivers of one run share
// the server: every case uses streams of its own, and so keys of its own.
func TestConformance(t *testing.T) {
	for _, dep := range deployments {
		t.Run(dep.name, func(t *testing.T) {
			drivertest.Exercise(t, harness(dep.url(t)))
		})
	}
}

func harness(url string) drivertest.Harness {
	return drivertest.Harness{
		NewDriver: func(tb testing.TB, clock driver.Clock) driver.Driver {
			d, err := redis.Open(context.Background(), url, &redis.Options{Clock: clock})
			require.NoError(tb, err)
			tb.Cleanup(func() { _ = d.Close() })
			return d
		},
	}
}
