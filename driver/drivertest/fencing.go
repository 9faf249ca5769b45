package drivertest

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func fencingCases(t *testing.T, h Harness) {
	t.Run("fetch returns leases with their event", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		at := Epoch.Add(-time.Hour)
		ev := b.append(s, []byte(`{"type": "t", "key": "k", "v": true}`), &rheo.AppendOptions{ID: "e-1", TS: &at,
			Metadata: []byte(`{"producer": "x"}`)})
		now := b.clock.Advance(time.Minute)
		leases := b.fetch(s, g, &rheo.FetchOptions{ConsumerID: "worker-1", LeaseDuration: 90 * time.Second})
		require.Len(t, leases, 1)
		l := leases[0]
		require.Regexp(t, uuidPattern, l.LeaseID)
		require.Equal(t, l.LeaseID, l.Receipt)
		require.Equal(t, g, l.Group)
		require.Equal(t, "worker-1", l.ConsumerID)
		require.Equal(t, 1, l.Attempt)
		requireSameTime(t, now, l.LeasedAt)
		requireSameTime(t, now.Add(90*time.Second), l.ExpiresAt)
		require.Equal(t, s, l.Event.Stream)
		require.Equal(t, ev.ID, l.Event.ID)
		require.Equal(t, 0, l.Event.Partition)
		require.Equal(t, int64(1), l.Event.Sequence)
		require.Equal(t, "k", l.Event.Key)
		require.Equal(t, "t", l.Event.Type)
		requireJSONEq(t, `{"type": "t", "key": "k", "v": true}`, l.Event.Payload)
		requireJSONEq(t, `{"producer": "x"}`, l.Event.Metadata)
		requireSameTime(t, at, l.Event.TS)
	})

	t.Run("fetch defaults to 10 leases of 30 seconds for a generated consumer", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 12)
		leases := b.fetch(s, g, nil)
		require.Len(t, leases, 10)
		require.NotEmpty(t, leases[0].ConsumerID)
		requireSameTime(t, b.clock.Now().Add(30*time.Second), leases[0].ExpiresAt)
		ids := map[string]bool{}
		for _, l := range leases {
			ids[l.LeaseID] = true
		}
		require.Len(t, ids, 10, "one fresh lease id per event")
	})

	t.Run("fetch returns nothing when nothing is claimable", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		require.Empty(t, b.fetch(s, g, nil))
		b.appendN(s, 1)
		require.Len(t, b.fetch(s, g, nil), 1)
		require.Empty(t, b.fetch(s, g, nil))
	})

	t.Run("a leased event is not handed out again before it expires", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		b.fetchOne(s, g, 10*time.Second)
		b.clock.Advance(10*time.Second - time.Millisecond)
		require.Empty(t, b.fetch(s, g, nil))
	})

	t.Run("an expired lease is re-leased with the next attempt", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		first := b.fetchOne(s, g, 10*time.Second)
		b.clock.Advance(10 * time.Second) // expires_at <= clock: claimable
		second := b.fetchOne(s, g, 10*time.Second)
		require.Equal(t, int64(1), second.Event.Sequence)
		require.Equal(t, 2, second.Attempt)
		require.NotEqual(t, first.LeaseID, second.LeaseID)
		b.clock.Advance(time.Minute)
		require.Equal(t, 3, b.fetchOne(s, g, 10*time.Second).Attempt)
	})

	t.Run("settling a lease that was re-leased reports stale_lease", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		old := b.fetchOne(s, g, 10*time.Second)
		b.clock.Advance(11 * time.Second)
		current := b.fetchOne(s, g, 10*time.Second)
		require.ErrorIs(t, b.d.Ack(b.ctx, old.LeaseID), rheo.ErrStaleLease)
		_, err := b.d.Retry(b.ctx, old.LeaseID, nil)
		require.ErrorIs(t, err, rheo.ErrStaleLease)
		require.ErrorIs(t, b.d.Reject(b.ctx, old.LeaseID, ""), rheo.ErrStaleLease)
		_, err = b.d.Renew(b.ctx, old.LeaseID, time.Minute)
		require.ErrorIs(t, err, rheo.ErrStaleLease)
		results, err := b.d.AckBatch(b.ctx, []string{old.LeaseID})
		require.NoError(t, err)
		require.False(t, results[0].OK)
		// The stale settles changed nothing for the holder.
		require.Equal(t, int64(1), b.info(s, g).InFlight)
		require.NoError(t, b.d.Ack(b.ctx, current.LeaseID))
		require.Equal(t, int64(0), b.lag(s, g, nil).Total)
	})

	t.Run("a second settle of the same lease reports stale_lease", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, &rheo.CreateGroupOptions{MaxAttempts: 3})
		b.appendN(s, 3)
		leases := b.fetch(s, g, nil)
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
		require.ErrorIs(t, b.d.Ack(b.ctx, leases[0].LeaseID), rheo.ErrStaleLease, "ack after ack")
		_, err := b.d.Retry(b.ctx, leases[1].LeaseID, &rheo.RetryOptions{Delay: time.Hour})
		require.NoError(t, err)
		require.ErrorIs(t, b.d.Ack(b.ctx, leases[1].LeaseID), rheo.ErrStaleLease, "ack after retry")
		_, err = b.d.Renew(b.ctx, leases[1].LeaseID, time.Minute)
		require.ErrorIs(t, err, rheo.ErrStaleLease, "renew after retry")
		require.NoError(t, b.d.Reject(b.ctx, leases[2].LeaseID, ""))
		_, err = b.d.Retry(b.ctx, leases[2].LeaseID, nil)
		require.ErrorIs(t, err, rheo.ErrStaleLease, "retry after reject")
		require.ErrorIs(t, b.d.Reject(b.ctx, leases[2].LeaseID, ""), rheo.ErrStaleLease, "reject after reject")
	})

	t.Run("a lease id that was never issued reports stale_lease", func(t *testing.T) {
		b := setup(t, h)
		for _, id := range []string{neverIssued, "not-a-uuid", ""} {
			require.ErrorIs(t, b.d.Ack(b.ctx, id), rheo.ErrStaleLease, "ack %q", id)
			_, err := b.d.Retry(b.ctx, id, nil)
			require.ErrorIs(t, err, rheo.ErrStaleLease, "retry %q", id)
			require.ErrorIs(t, b.d.Reject(b.ctx, id, ""), rheo.ErrStaleLease, "reject %q", id)
			_, err = b.d.Renew(b.ctx, id, time.Minute)
			require.ErrorIs(t, err, rheo.ErrStaleLease, "renew %q", id)
		}
	})

	t.Run("renew extends the lease to the clock plus the duration", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 1)
		l := b.fetchOne(s, g, 10*time.Second)
		now := b.clock.Advance(8 * time.Second)
		expires, err := b.d.Renew(b.ctx, l.LeaseID, time.Minute)
		require.NoError(t, err)
		requireSameTime(t, now.Add(time.Minute), expires)
		b.clock.Advance(59 * time.Second)
		require.Empty(t, b.fetch(s, g, nil), "the renewed lease is still held")
		require.Equal(t, int64(1), b.info(s, g).InFlight)
		b.clock.Advance(time.Second)
		next := b.fetchOne(s, g, 10*time.Second)
		require.Equal(t, 2, next.Attempt, "renewal does not count as an attempt")
	})

	t.Run("an expired lease that no one claimed again can still be settled", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, nil)
		b.appendN(s, 3)
		leases := b.fetch(s, g, &rheo.FetchOptions{LeaseDuration: 10 * time.Second})
		require.Len(t, leases, 3)
		now := b.clock.Advance(time.Hour)
		require.NoError(t, b.d.Ack(b.ctx, leases[0].LeaseID))
		expires, err := b.d.Renew(b.ctx, leases[1].LeaseID, time.Minute)
		require.NoError(t, err)
		requireSameTime(t, now.Add(time.Minute), expires)
		require.NoError(t, b.d.Reject(b.ctx, leases[2].LeaseID, "late"))
		require.Empty(t, b.fetch(s, g, nil), "the renewed lease is held again")
		require.Equal(t, []int64{1}, b.frontiers(s, g))
	})

	t.Run("a lease dead-lettered on expiry is stale", func(t *testing.T) {
		b := setup(t, h)
		s := b.stream(1)
		g := b.group(s, &rheo.CreateGroupOptions{MaxAttempts: 1})
		b.appendN(s, 1)
		l := b.fetchOne(s, g, 10*time.Second)
		b.clock.Advance(10 * time.Second)
		require.Empty(t, b.fetch(s, g, nil))
		require.ErrorIs(t, b.d.Ack(b.ctx, l.LeaseID), rheo.ErrStaleLease)
	})
}
