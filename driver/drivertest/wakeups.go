package drivertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/driver"
)

func wakeupCases(t *testing.T, h Harness) {
	t.Run("an append wakes the subscribers of its stream only", func(t *testing.T) {
		b := setup(t, h)
		s, other := b.stream(1), b.stream(1)
		wakeups, stop := b.d.Wakeups(s)
		defer stop()
		otherWakeups, stopOther := b.d.Wakeups(other)
		defer stopOther()

		// A driver may start listening after Wakeups returns: append until
		// a hint arrives.
		var got driver.Wakeup
		deadline := time.After(10 * time.Second)
	wait:
		for {
			ev := b.append(s, payload(1), nil)
			select {
			case got = <-wakeups:
				require.Equal(t, s, got.Stream)
				require.Equal(t, 0, got.Partition)
				require.LessOrEqual(t, got.Sequence, ev.Sequence)
				require.Positive(t, got.Sequence)
				break wait
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				require.FailNow(t, "no wakeup within 10s of appending")
			}
		}
		select {
		case w := <-otherWakeups:
			require.FailNow(t, fmt.Sprintf("a subscriber of %s was woken for %s", other, w.Stream))
		default:
		}
	})
}
