package driverutil

import (
	"math"
	"testing"

	"github.com/rheo-go/rheo"
	"github.com/stretchr/testify/require"
)

// FuzzQueryAdvance checks that the positions a query page leaves behind
// stay within 0 and the largest int64 whatever its bounds, and that the
// cursor made of them decodes to them, as a next page needs.
func FuzzQueryAdvance(f *testing.F) {
	f.Add(int64(math.MaxInt64), int64(-1), int64(3), int64(4), true, 100, 0)
	f.Add(int64(math.MaxInt64-1), int64(math.MaxInt64), int64(0), int64(1), true, 1, 1)
	f.Add(int64(0), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), false, 1, 1)
	f.Add(int64(5), int64(2), int64(10), int64(3), false, 2, 2)
	f.Fuzz(func(t *testing.T, after, until, hwm, pos int64, descending bool, maxCount, pageLen int) {
		if after < 0 || hwm < 0 || pos < 0 || maxCount < 1 {
			return // the checks before refuse these, or no page is read
		}
		eq := QueryScan{Query: rheo.Query{AfterSequence: after, Descending: descending}, MaxCount: maxCount, Scope: []int{0, 1}}
		if until >= 0 {
			eq.UntilSequence = &until
		}
		// A page of at most maxCount events, the last one at
		// (min(pos, hwm), partition 0), as a page read below or above
		// pos would end.
		pageLen = int(uint(pageLen) % uint(maxCount+1))
		page := make([]rheo.Event, pageLen)
		for i := range page {
			page[i] = rheo.Event{Partition: 0, Sequence: max(1, min(pos, hwm))}
		}
		positions := []int64{pos, pos}
		eq.Advance(positions, []int64{hwm, hwm}, page)
		for _, p := range positions {
			require.GreaterOrEqual(t, p, int64(0), "advance left a negative position %d (after %d, until %d, hwm %d, pos %d)", p, after, until, hwm, pos)
		}
		cursor := EncodeQueryCursor("0123456789abcdef", positions)
		back, err := DecodeQueryCursor(cursor, "0123456789abcdef", 2)
		require.NoError(t, err, "cursor %q of %v", cursor, positions)
		require.Equal(t, positions, back[:2], "cursor %q of %v decodes to %v", cursor, positions, back)
		_, err = DecodeQueryCursor(cursor, "fedcba9876543210", 2)
		require.ErrorIs(t, err, rheo.ErrCursorNotFound, "a cursor of another query: %v", err)
	})
}
