package redis_test

import (
	"context"
	"testing"

	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/redis/redistest"
	"github.com/rheo-go/rheo/internal/workertest"
)

// TestWorkerCases runs the worker's behavioural cases (internal/workertest,
// which the worker package runs on SQLite and PostgreSQL) on Redis, as
// the subtests standalone and cluster: on the deployments of
// RHEO_TEST_REDIS_URL and RHEO_TEST_REDIS_CLUSTER, else on the private
// ones redistest starts. The driver is opened by URL through package
// connect, as a program that blank-imports it does; every case works on
// a stream of its own.
func TestWorkerCases(t *testing.T) {
	for _, dep := range []struct {
		name string
		url  func(tb testing.TB) string
	}{
		{"standalone", redistest.StandaloneURL},
		{"cluster", redistest.ClusterURL},
	} {
		t.Run(dep.name, func(t *testing.T) {
			url := dep.url(t)
			workertest.Run(t, func(t *testing.T, clock driver.Clock) driver.Driver {
				drv, err := connect.Open(context.Background(), url, &connect.Options{Clock: clock, Migrate: true})
				if err != nil {
					t.Fatalf("open %s: %v", url, err)
				}
				t.Cleanup(func() { _ = drv.Close() })
				return drv
			})
		})
	}
}
