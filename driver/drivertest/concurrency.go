package drivertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func concurrencyCases(t *testing.T, h Harness) {
	t.Run("concurrent consumers of one group never share an event and ack each once", func(t *testing.T) {
		b := setup(t, h)
		partitions := 1
		if b.caps.Partitions {
			partitions = 4
		}
		s := b.stream(partitions)
		g := b.group(s, nil)
		const events = 200
		items := make([]rheo.BatchItem, events)
		for i := range items {
			items[i] = rheo.BatchItem{Payload: payload(i), Key: fmt.Sprintf("k%d", i)}
		}
		_, err := b.d.AppendBatch(b.ctx, s, items, nil)
		require.NoError(t, err)

		var mu sync.Mutex
		delivered := map[position]int{}
		const consumers = 4
		errs := make([]error, consumers)
		var wg sync.WaitGroup
		for c := range consumers {
			wg.Go(func() {
				errs[c] = consume(b, s, g, fmt.Sprintf("consumer-%d", c), func(l rheo.Lease) {
					mu.Lock()
					defer mu.Unlock()
					delivered[position{l.Event.Partition, l.Event.Sequence}]++
				})
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, delivered, events)
		for pos, n := range delivered {
			require.Equal(t, 1, n, "event %v delivered %d times", pos, n)
		}
		require.Equal(t, int64(0), b.lag(s, g, nil).Total)
		require.Equal(t, rheo.GroupInfo{}, b.info(s, g))
	})

	t.Run("concurrent appends to one partition get contiguous sequences", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		const writers, each = 4, 10
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					if _, err := b.d.Append(b.ctx, s, payload(w*each+i), nil); err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, events, writers*each)
		for i, ev := range events {
			require.Equal(t, int64(i+1), ev.Sequence)
		}
	})
}

// consume fetches and acks until nothing is claimable, reporting each
// lease to seen.
func consume(b *bundle, stream, group, consumer string, seen func(rheo.Lease)) error {
	for {
		leases, err := b.d.Fetch(b.ctx, stream, group, &rheo.FetchOptions{MaxCount: 10, ConsumerID: consumer, LeaseDuration: time.Hour})
		if err != nil {
			return err
		}
		if len(leases) == 0 {
			return nil
		}
		ids := make([]string, len(leases))
		for i, l := range leases {
			seen(l)
			ids[i] = l.LeaseID
		}
		results, err := b.d.AckBatch(b.ctx, ids)
		if err != nil {
			return err
		}
		for _, r := range results {
			if !r.OK {
				return fmt.Errorf("%s: lease %s was not held at ack", consumer, r.LeaseID)
			}
		}
	}
}
