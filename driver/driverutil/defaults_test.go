package driverutil

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func TestWithDefaults(t *testing.T) {
	t.Run("nil options are the defaults", func(t *testing.T) {
		require.Equal(t, &rheo.CreateGroupOptions{MaxAttempts: 20, Ordering: rheo.OrderingNone},
			WithDefaults[rheo.CreateGroupOptions](nil))
		require.Equal(t, &rheo.ReadOptions{MaxCount: 100}, WithDefaults[rheo.ReadOptions](nil))
		require.Equal(t, &rheo.FetchOptions{MaxCount: 10, LeaseDuration: 30 * time.Second},
			WithDefaults[rheo.FetchOptions](nil))
		require.Equal(t, &rheo.DeadLetterOptions{MaxCount: 100}, WithDefaults[rheo.DeadLetterOptions](nil))
		require.Equal(t, &rheo.PruneOptions{MaxCount: 10000}, WithDefaults[rheo.PruneOptions](nil))
		require.Equal(t, &rheo.Query{MaxCount: 100}, WithDefaults[rheo.Query](nil))
		require.Equal(t, 100, LeaseCount(0))
	})

	t.Run("zero values become the defaults and the rest is kept", func(t *testing.T) {
		in := &rheo.FetchOptions{ConsumerID: "c", Partitions: []int{1}}
		require.Equal(t, &rheo.FetchOptions{MaxCount: 10, LeaseDuration: 30 * time.Second, ConsumerID: "c",
			Partitions: []int{1}}, WithDefaults(in))
		require.Equal(t, &rheo.FetchOptions{ConsumerID: "c", Partitions: []int{1}}, in, "the caller's options are left alone")
		after := int64(7)
		require.Equal(t, &rheo.CreateGroupOptions{MaxAttempts: 20, Ordering: rheo.OrderingNone, StartAfter: &after},
			WithDefaults(&rheo.CreateGroupOptions{StartAfter: &after}))
		require.Equal(t, &rheo.ReadOptions{MaxCount: 100, After: 3, Partition: 2},
			WithDefaults(&rheo.ReadOptions{After: 3, Partition: 2}))
		require.Equal(t, &rheo.PruneOptions{MaxCount: 10000, Force: true}, WithDefaults(&rheo.PruneOptions{Force: true}))
	})

	t.Run("values given, negative ones included, are passed on for the operation to check", func(t *testing.T) {
		require.Equal(t, &rheo.FetchOptions{MaxCount: -1, LeaseDuration: -time.Second},
			WithDefaults(&rheo.FetchOptions{MaxCount: -1, LeaseDuration: -time.Second}))
		require.Equal(t, &rheo.CreateGroupOptions{MaxAttempts: -3, Ordering: "sideways"},
			WithDefaults(&rheo.CreateGroupOptions{MaxAttempts: -3, Ordering: "sideways"}))
		require.Equal(t, &rheo.DeadLetterOptions{MaxCount: 3, After: "x"},
			WithDefaults(&rheo.DeadLetterOptions{MaxCount: 3, After: "x"}))
		require.Equal(t, &rheo.Query{MaxCount: -5}, WithDefaults(&rheo.Query{MaxCount: -5}))
		require.Equal(t, 7, LeaseCount(7))
		require.Equal(t, -1, LeaseCount(-1))
	})
}
