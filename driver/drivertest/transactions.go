package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
		require.Equal(t, int64(1), b.info(s, g).InFlight)
		require.NoError(t, b.d.Ack(b.ctx, l.LeaseID), "the lease is still held")
	})

	t.Run("a failed call leaves the transaction usable, with what was written before it", func(t *testing.T) {
		b := setup(t, h)
		tr := transactor(b)
		s := b.stream(1)
		err := tr.InTx(b.ctx, func(ctx context.Context, tx driver.Tx) error {
			if _, err := tx.Append(ctx, s, json.RawMessage(`{"n": 1}`), &rheo.AppendOptions{ID: "order-1"}); err != nil {
				return err
			}
			_, err := tx.Append(ctx, s, json.RawMessage(`{"n": 2}`), &rheo.AppendOptions{ID: "order-1"})
			require.ErrorIs(t, err, rheo.ErrAlreadyExists, "an idempotent append with another payload")
			_, err = tx.Append(ctx, "no-such-stream-"+s, json.RawMessage(`{}`), nil)
			require.ErrorIs(t, err, rheo.ErrStreamNotFound)
			_, err = tx.Append(ctx, s, json.RawMessage(`{"n": 3}`), &rheo.AppendOptions{ID: "order-2"})
			return err
		})
		require.NoError(t, err, "the transaction commits after the failed calls")
		require.Equal(t, []int64{1, 2}, b.readAfter(s, 0, 0))
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
