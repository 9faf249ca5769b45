package drivertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// Benchmark measures the hot paths of the drivers h makes: single
// appends, batches of 100, and fetch plus ack_batch of 100 leases. Each
// sub-benchmark reports events/s.
func Benchmark(b *testing.B, h Harness) {
	ctx := b.Context()
	items := make([]rheo.BatchItem, 100)
	for i := range items {
		items[i] = rheo.BatchItem{Payload: payload(i), Key: fmt.Sprintf("k%d", i)}
	}
	b.Run("append", func(b *testing.B) {
		d, s := benchStream(b, h)
		p := payload(1)
		for b.Loop() {
			_, err := d.Append(ctx, s, p, nil)
			require.NoError(b, err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})

	b.Run("append_batch_100", func(b *testing.B) {
		d, s := benchStream(b, h)
		for b.Loop() {
			_, err := d.AppendBatch(ctx, s, items, nil)
			require.NoError(b, err)
		}
		b.ReportMetric(float64(b.N*len(items))/b.Elapsed().Seconds(), "events/s")
	})

	b.Run("fetch_ack_batch_100", func(b *testing.B) {
		d, s := benchStream(b, h)
		g := uniqueName("bench")
		require.NoError(b, d.CreateGroup(ctx, s, g, nil))
		opts := &rheo.FetchOptions{MaxCount: len(items), LeaseDuration: time.Hour}
		ids := make([]string, 0, len(items))
		for b.Loop() {
			// Refill outside the measurement: one batch per iteration.
			b.StopTimer()
			_, err := d.AppendBatch(ctx, s, items, nil)
			require.NoError(b, err)
			b.StartTimer()
			leases, err := d.Fetch(ctx, s, g, opts)
			require.NoError(b, err)
			// Equalf, not Len: Len would print every lease.
			require.Equalf(b, len(items), len(leases), "fetched %d leases, want %d", len(leases), len(items))
			ids = ids[:0]
			for _, l := range leases {
				ids = append(ids, l.LeaseID)
			}
			_, err = d.AckBatch(ctx, ids)
			require.NoError(b, err)
		}
		b.ReportMetric(float64(b.N*len(items))/b.Elapsed().Seconds(), "events/s")
	})
}

// benchStream returns a fresh driver and a one-partition stream on it.
func benchStream(b *testing.B, h Harness) (driver.Driver, string) {
	b.Helper()
	d := h.NewDriver(b, NewClock())
	s := uniqueName("bench")
	require.NoError(b, d.CreateStream(b.Context(), s, 1))
	return d, s
}
