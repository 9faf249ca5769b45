package tests

import (
	"testing"

	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/sqlite"
)

// BenchmarkDriver measures the drivers' hot paths with the conformance
// harnesses: go test -run '^$' -bench BenchmarkDriver ./tests/go
func BenchmarkDriver(b *testing.B) {
	b.Run("postgres", func(b *testing.B) {
		drivertest.Benchmark(b, postgresHarness(b))
	})
	b.Run("sqlite", func(b *testing.B) {
		drivertest.Benchmark(b, sqliteHarness(sqlite.DriverMattn))
	})
	b.Run("sqlite_modernc", func(b *testing.B) {
		drivertest.Benchmark(b, sqliteHarness(sqlite.DriverModernc))
	})
}
