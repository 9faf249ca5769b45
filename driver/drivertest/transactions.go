package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

func transactionCases(t *testing.T, h Harness) {
	transactor := func(b *bundle) driver.Transactor {
		tr, ok := b.d.(driver.Transactor)
		if !ok || !b.caps.TransactionalSettle {
			b.t.Skip("the driver cannot settle inside a transaction (Capabilities.TransactionalSettle)")
		}
		return tr
	}
	errHandler := errors.New("handler failed")

	t.Run("an ack rolled back with its transaction leaves the lease held", func(t *testing.T) {
		b := setup(t, h)
		tr := transactor(b)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		l := b.fetchOne(s, g, time.Minute)
		err := tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			require.NotNil(t, tx.Native())
			if err := tx.Ack(ctx, l.LeaseID); err != nil {
				return err
			}
			return errHandler
		})
		require.ErrorIs(t, err, errHandler)
		require.Equal(t, int64(1), b.info(s, g).Inflight)
		require.NoError(t, b.d.Ack(b.ctx, l.LeaseID), "the lease is still held")
	})

	t.Run("an ack committed with its transaction settles the lease", func(t *testing.T) {
		b := setup(t, h)
		tr := transactor(b)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 2)
		leases := b.fetch(s, g, nil)
		err := tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			if err := tx.Ack(ctx, leases[0].LeaseID); err != nil {
				return err
			}
			results, err := tx.AckBatch(ctx, []string{leases[1].LeaseID})
			if err == nil && !results[0].OK {
				err = fmt.Errorf("ack_batch in the transaction settled nothing")
			}
			return err
		})
		require.NoError(t, err)
		require.ErrorIs(t, b.d.Ack(b.ctx, leases[0].LeaseID), rheo.ErrStaleLease)
		require.Equal(t, int64(0), b.lag(s, g, nil).Total)
	})

	t.Run("a stale ack inside a transaction reports stale_lease there", func(t *testing.T) {
		b := setup(t, h)
		tr := transactor(b)
		err := tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			return tx.Ack(ctx, neverIssued)
		})
		require.ErrorIs(t, err, rheo.ErrStaleLease)
	})

	t.Run("an append rolled back with its transaction writes nothing", func(t *testing.T) {
		b := setup(t, h)
		tr := transactor(b)
		s := b.stream(1)
		err := tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			if _, err := tx.Append(ctx, s, payload(1), &rheo.AppendOptions{ID: "rolled-back"}); err != nil {
				return err
			}
			return errHandler
		})
		require.ErrorIs(t, err, errHandler)
		events, err := b.d.Read(b.ctx, s, nil)
		require.NoError(t, err)
		require.Empty(t, events)
		ev := b.append(s, payload(2), &rheo.AppendOptions{ID: "rolled-back"})
		require.Equal(t, int64(1), ev.Sequence, "neither the sequence nor the id was kept")
	})

	t.Run("a panic inside a transaction rolls it back", func(t *testing.T) {
		b := setup(t, h)
		tr := transactor(b)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		l := b.fetchOne(s, g, time.Minute)
		require.PanicsWithValue(t, "handler panicked", func() {
			_ = tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
				if err := tx.Ack(ctx, l.LeaseID); err != nil {
					return err
				}
				panic("handler panicked")
			})
		})
		require.NoError(t, b.d.Ack(b.ctx, l.LeaseID), "the lease is still held")
	})
}

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
				t.Fatal("no wakeup within 10s of appending")
			}
		}
		select {
		case w := <-otherWakeups:
			t.Fatalf("a subscriber of %s was woken for %s", other, w.Stream)
		default:
		}
	})
}
