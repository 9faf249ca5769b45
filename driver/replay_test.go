package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/sqlite"
)

// opsOnly hides the Transactor of the driver it wraps.
type opsOnly struct{ driver.Driver }

func TestReplayByPartition(t *testing.T) {
	setup := func(t *testing.T) driver.Driver {
		t.Helper()
		ctx := context.Background()
		d, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Migrate: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		require.NoError(t, d.CreateStream(ctx, "orders", 3))
		require.NoError(t, d.CreateGroup(ctx, "orders", "billing", nil))
		// 3, 2 and 0 events in partitions 0, 1 and 2, all acked.
		for i, p := range []int{0, 0, 0, 1, 1} {
			_, err := d.Append(ctx, "orders", json.RawMessage(`{"n": 1}`), &rheo.AppendOptions{Partition: &p, ID: string(rune('a' + i))})
			require.NoError(t, err)
		}
		leases, err := d.Fetch(ctx, "orders", "billing", &rheo.FetchOptions{MaxCount: 10})
		require.NoError(t, err)
		require.Len(t, leases, 5)
		for _, l := range leases {
			require.NoError(t, d.Ack(ctx, l.LeaseID))
		}
		return d
	}
	from := int64(0)
	replayAll := rheo.ReplayOptions{FromSequence: &from}
	ctx := context.Background()

	t.Run("a dry run counts every partition and changes nothing", func(t *testing.T) {
		d := setup(t)
		var seen []int
		counts, err := driver.ReplayByPartition(ctx, d, "orders", "billing", &replayAll, &driver.ReplayByPartitionOptions{
			DryRun:   true,
			Progress: func(i, n, p int) { require.Equal(t, 3, n); seen = append(seen, p) },
		})
		require.NoError(t, err)
		require.Equal(t, []driver.PartitionCount{{0, 3}, {1, 2}, {2, 0}}, counts)
		require.Equal(t, []int{0, 1, 2}, seen)
		lag, err := d.Lag(ctx, "orders", "billing", nil)
		require.NoError(t, err)
		require.Zero(t, lag.Total, "the dry run was rolled back")
	})
	t.Run("a replay of the partitions listed makes the counted events claimable", func(t *testing.T) {
		d := setup(t)
		counts, err := driver.ReplayByPartition(ctx, d, "orders", "billing", &replayAll, &driver.ReplayByPartitionOptions{Partitions: []int{1}})
		require.NoError(t, err)
		require.Equal(t, []driver.PartitionCount{{1, 2}}, counts)
		lag, err := d.Lag(ctx, "orders", "billing", nil)
		require.NoError(t, err)
		require.Equal(t, int64(2), lag.Total)
	})
	t.Run("a missing group is group_not_found, a bad partition invalid_partition", func(t *testing.T) {
		d := setup(t)
		_, err := driver.ReplayByPartition(ctx, d, "orders", "nope", &replayAll, nil)
		require.ErrorIs(t, err, rheo.ErrGroupNotFound)
		_, err = driver.ReplayByPartition(ctx, d, "orders", "billing", &replayAll, &driver.ReplayByPartitionOptions{Partitions: []int{7}, DryRun: true})
		require.ErrorIs(t, err, rheo.ErrInvalidPartition)
	})
	t.Run("a driver without transactions cannot count", func(t *testing.T) {
		_, err := driver.ReplayByPartition(ctx, opsOnly{setup(t)}, "orders", "billing", &replayAll, &driver.ReplayByPartitionOptions{DryRun: true})
		require.True(t, errors.Is(err, driver.ErrNoTransactions))
	})
}
