package drivertest

import (
	"testing"

	"github.com/rheo-go/rheo/driver/driverutil"
	"github.com/stretchr/testify/require"
)

func groupCases(t *testing.T, h Harness) {
	t.Run("every group sees every event independently", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		b.appendN(s, 3)
		g1 := b.group(s, nil)
		g2 := b.group(s, nil)
		require.Equal(t, []int64{1, 2, 3}, sequences(b.drain(s, g1)), "a group created after the events starts at the beginning")
		require.Equal(t, int64(0), b.lag(s, g1, nil).Total)
		require.Equal(t, int64(3), b.lag(s, g2, nil).Total, "the other group is untouched")
		leases := b.fetch(s, g2, nil)
		require.Equal(t, []int64{1, 2, 3}, sequences(leases))
		for _, l := range leases {
			require.Equal(t, 1, l.Attempt)
			require.Equal(t, g2, l.Group)
		}
		require.NoError(t, b.d.Reject(b.ctx, leases[0].LeaseID, ""))
		require.Empty(t, b.deadLetters(s, g1))
		require.Len(t, b.deadLetters(s, g2), 1)
	})

	t.Run("a group sees events appended after it was created", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		require.Empty(t, b.fetch(s, g, nil))
		b.appendN(s, 2)
		require.Equal(t, []int64{1, 2}, sequences(b.fetch(s, g, nil)))
	})

	t.Run("max attempts defaults to 20", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		groups, err := b.d.ListGroups(b.ctx, s)
		require.NoError(t, err)
		require.Len(t, groups, 1)
		require.Equal(t, g, groups[0].Name)
		require.Equal(t, driverutil.DefaultMaxAttempts, groups[0].MaxAttempts)
		require.Equal(t, 20, groups[0].MaxAttempts)
	})
}
