package sqlite_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/migrate"
)

// TestConformance runs the driver conformance suite (driver/drivertest)
// against the SQLite driver on each database/sql driver it runs on:
// mattn's cgo driver and the pure-Go modernc.org/sqlite, with the same
// case names under each.
func TestConformance(t *testing.T) {
	for _, d := range sqliteDrivers {
		t.Run(d.label, func(t *testing.T) {
			drivertest.Exercise(t, sqliteHarness(d.name))
		})
	}
}

// BenchmarkDriver measures the driver's hot paths with the conformance
// harness on both database/sql drivers:
// go test -run '^$' -bench BenchmarkDriver ./driver/sqlite
func BenchmarkDriver(b *testing.B) {
	for _, d := range sqliteDrivers {
		b.Run(d.label, func(b *testing.B) {
			drivertest.Benchmark(b, sqliteHarness(d.name))
		})
	}
}

// sqliteHarness gives every case a private in-memory database, opened
// with the database/sql driver registered as driverName.
func sqliteHarness(driverName string) drivertest.Harness {
	return drivertest.Harness{
		NewDriver: func(tb testing.TB, clock driver.Clock) driver.Driver {
			ctx := context.Background()
			d, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Clock: clock, DriverName: driverName})
			require.NoError(tb, err)
			tb.Cleanup(func() { _ = d.Close() })
			require.NoError(tb, migrate.SQLite(ctx, d.DB()))
			return d
		},
		// SQLite's triggers refuse UPDATE and DELETE; it has no TRUNCATE,
		// and cannot tell the driver's INSERTs from others.
		RawWrites: func(ctx context.Context, tb testing.TB, d driver.Driver, stream string) map[string]error {
			db := d.(*sqlite.Driver).DB()
			errs := map[string]error{}
			for kind, sql := range map[string]string{
				"update": `UPDATE rheo_events SET payload = '{}' WHERE stream = ?`,
				"delete": `DELETE FROM rheo_events WHERE stream = ?`,
			} {
				_, err := db.ExecContext(ctx, sql, stream)
				if err != nil && strings.Contains(err.Error(), rheo.ErrImmutableEvent.Reason) {
					err = rheo.Errorf(rheo.ErrImmutableEvent, "%s", err)
				}
				errs[kind] = err
			}
			return errs
		},
	}
}
