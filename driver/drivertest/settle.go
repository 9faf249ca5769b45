package drivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

func retryCases(t *testing.T, h Harness) {
	t.Run("retry makes the event claimable again after the delay", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		l := b.fetchOne(s, g, time.Minute)
		outcome, err := b.d.Retry(b.ctx, l.LeaseID, &rheo.RetryOptions{Delay: 10 * time.Second, Reason: "busy"})
		require.NoError(t, err)
		require.Equal(t, rheo.Retrying, outcome)
		b.clock.Advance(10*time.Second - time.Millisecond)
		require.Empty(t, b.fetch(s, g, nil))
		require.Equal(t, int64(1), b.info(s, g).PendingRetry)
		b.clock.Advance(time.Millisecond)
		again := b.fetchOne(s, g, time.Minute)
		require.Equal(t, int64(1), again.Event.Sequence)
		require.Equal(t, 2, again.Attempt)
	})

	t.Run("retry without a delay makes the event claimable at once", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		l := b.fetchOne(s, g, time.Minute)
		outcome, err := b.d.Retry(b.ctx, l.LeaseID, nil)
		require.NoError(t, err)
		require.Equal(t, rheo.Retrying, outcome)
		require.Equal(t, 2, b.fetchOne(s, g, time.Minute).Attempt)
	})

	t.Run("retry at max attempts dead-letters with the reason", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, &rheo.CreateGroupOptions{MaxAttempts: 2})
		b.appendN(s, 1)
		l := b.fetchOne(s, g, time.Minute)
		outcome, err := b.d.Retry(b.ctx, l.LeaseID, &rheo.RetryOptions{Reason: "first"})
		require.NoError(t, err)
		require.Equal(t, rheo.Retrying, outcome)
		l = b.fetchOne(s, g, time.Minute)
		require.Equal(t, 2, l.Attempt)
		now := b.clock.Advance(time.Second)
		outcome, err = b.d.Retry(b.ctx, l.LeaseID, &rheo.RetryOptions{Reason: "boom", Delay: time.Second})
		require.NoError(t, err)
		require.Equal(t, rheo.DeadLettered, outcome)
		letters := b.deadLetters(s, g)
		require.Len(t, letters, 1)
		require.Equal(t, "boom", letters[0].Reason)
		require.Equal(t, 2, letters[0].Attempt)
		requireSameTime(t, now, letters[0].DeadLetteredAt)
		b.clock.Advance(time.Hour)
		require.Empty(t, b.fetch(s, g, nil), "a dead letter is not delivered again")
		require.Equal(t, int64(0), b.lag(s, g, nil).Total, "a dead letter is terminal")
	})

	t.Run("an empty retry reason is stored as max_attempts", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, &rheo.CreateGroupOptions{MaxAttempts: 1})
		b.appendN(s, 1)
		outcome, err := b.d.Retry(b.ctx, b.fetchOne(s, g, time.Minute).LeaseID, nil)
		require.NoError(t, err)
		require.Equal(t, rheo.DeadLettered, outcome)
		require.Equal(t, "max_attempts", b.deadLetters(s, g)[0].Reason)
	})

	t.Run("reject dead-letters at once, with rejected as the default reason", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 2)
		leases := b.fetch(s, g, nil)
		now := b.clock.Advance(time.Second)
		require.NoError(t, b.d.Reject(b.ctx, leases[0].LeaseID, "malformed"))
		require.NoError(t, b.d.Reject(b.ctx, leases[1].LeaseID, ""))
		letters := b.deadLetters(s, g)
		require.Len(t, letters, 2)
		require.Equal(t, "malformed", letters[0].Reason)
		require.Equal(t, "rejected", letters[1].Reason)
		require.Equal(t, 1, letters[0].Attempt)
		requireSameTime(t, now, letters[1].DeadLetteredAt)
		b.clock.Advance(time.Hour)
		require.Empty(t, b.fetch(s, g, nil))
	})

	t.Run("a lease expiring at max attempts is dead-lettered as lease_expired", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, &rheo.CreateGroupOptions{MaxAttempts: 2})
		b.appendN(s, 2)
		b.fetchOne(s, g, 10*time.Second)
		b.clock.Advance(10 * time.Second)
		second := b.fetchOne(s, g, 10*time.Second)
		require.Equal(t, int64(1), second.Event.Sequence)
		require.Equal(t, 2, second.Attempt)
		now := b.clock.Advance(time.Minute)
		leases := b.fetch(s, g, nil)
		require.Equal(t, []int64{2}, sequences(leases), "the expired event is not leased a third time")
		letters := b.deadLetters(s, g)
		require.Len(t, letters, 1)
		require.Equal(t, int64(1), letters[0].Event.Sequence)
		require.Equal(t, "lease_expired", letters[0].Reason)
		require.Equal(t, 2, letters[0].Attempt)
		requireSameTime(t, now, letters[0].DeadLetteredAt, "dead-lettered at the fetch's clock")
		require.ErrorIs(t, b.d.Ack(b.ctx, second.LeaseID), rheo.ErrStaleLease)
	})
}

func ackBatchCases(t *testing.T, h Harness) {
	t.Run("ack batch settles each lease independently", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 4)
		leases := b.fetch(s, g, nil)
		require.NoError(t, b.d.Ack(b.ctx, leases[1].LeaseID))
		ids := []string{leases[0].LeaseID, leases[1].LeaseID, neverIssued, leases[2].LeaseID, "not-a-uuid"}
		results, err := b.d.AckBatch(b.ctx, ids)
		require.NoError(t, err)
		require.Len(t, results, len(ids))
		var oks []bool
		for i, r := range results {
			require.Equal(t, ids[i], r.LeaseID)
			oks = append(oks, r.OK)
		}
		require.Equal(t, []bool{true, false, false, true, false}, oks)
		require.Equal(t, []int64{3}, b.frontiers(s, g))
		require.Equal(t, int64(1), b.info(s, g).InFlight)
	})

	t.Run("a lease repeated in an ack batch settles once", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 2)
		leases := b.fetch(s, g, nil)
		a, c := leases[0].LeaseID, leases[1].LeaseID
		results, err := b.d.AckBatch(b.ctx, []string{a, a, c, a})
		require.NoError(t, err)
		require.Equal(t, []rheo.AckResult{{LeaseID: a, OK: true}, {LeaseID: a}, {LeaseID: c, OK: true}, {LeaseID: a}}, results)
		require.Equal(t, int64(0), b.lag(s, g, nil).Total)
	})

	t.Run("an empty ack batch returns no results", func(t *testing.T) {
		b := setup(t, h)
		results, err := b.d.AckBatch(b.ctx, []string{})
		require.NoError(t, err)
		require.Empty(t, results)
		results, err = b.d.AckBatch(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, results)
	})
}
