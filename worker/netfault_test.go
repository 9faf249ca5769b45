package worker_test

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/faultproxy"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/workertest"
	"github.com/rheo-go/rheo/worker"
)

// The lease sets the worker's call timeout (half the lease, in real
// time): blackHoleLease makes it short, so that a black-holed call ends
// quickly, and still long enough for the calls that pass on a loaded
// machine; faultLease leaves every call that reaches the server the
// longest call timeout. Leases expire by the fake clock, and a poll comes
// well before they do.
const (
	blackHoleLease = 4 * time.Second
	faultLease     = 20 * time.Second
	pollInterval   = 100 * time.Millisecond
)

// netBundle is a PostgreSQL bundle whose worker reaches the database
// through a fault proxy; bundle.drv goes directly, to look.
type netBundle struct {
	*bundle
	p   *faultproxy.Proxy
	drv driver.Driver // through the proxy, for the worker

	lease   time.Duration // the worker's LeaseDuration
	mu      sync.Mutex
	handled map[string][]int // attempts handled, by event id
}

// setupNet makes a bundle whose worker takes leases of faultLease.
func setupNet(t *testing.T) *netBundle {
	t.Helper()
	b := testbackend.Postgres(t)
	bd := setup(t, b, 5)
	u, err := url.Parse(b.DSN)
	require.NoError(t, err)
	p := faultproxy.New(t, u.Host)
	return &netBundle{bundle: bd, p: p, drv: openPostgres(t, p.URL(t, b.DSN), bd.clock), lease: faultLease,
		handled: map[string][]int{}}
}

// setupBlackHole is setupNet with leases of blackHoleLease.
func setupBlackHole(t *testing.T) *netBundle {
	t.Helper()
	nb := setupNet(t)
	nb.lease = blackHoleLease
	return nb
}

// config is a worker config of one handler slot and leases of nb.lease.
func (nb *netBundle) config(h worker.Handler) *worker.Config {
	cfg := nb.bundle.config(h)
	cfg.Concurrency = 1
	cfg.LeaseDuration = nb.lease
	cfg.PollInterval = pollInterval
	return cfg
}

// txConfig is config with a TxHandler that writes a side row and then
// returns what fail says for the attempt.
func (nb *netBundle) txConfig(fail func(l rheo.Lease) error) *worker.Config {
	cfg := nb.config(nil)
	cfg.TxHandler = func(ctx context.Context, tx driver.Tx, l rheo.Lease) error {
		nb.record(l)
		if err := execTx(ctx, tx, "INSERT INTO side (event_id) VALUES ($1)", l.Event.ID); err != nil {
			return err
		}
		return fail(l)
	}
	return cfg
}

func (nb *netBundle) record(l rheo.Lease) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	nb.handled[l.Event.ID] = append(nb.handled[l.Event.ID], l.Attempt)
}

func (nb *netBundle) attempts(id string) []int {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	return append([]int(nil), nb.handled[id]...)
}

func succeed(rheo.Lease) error { return nil }

// waitAbandoned waits until the server has ended the sessions left in a
// transaction: the client gave a black-holed connection up, but its
// transaction holds its locks (those of an ack sent before a black-holed
// commit) until the server sees the connection close.
func (nb *netBundle) waitAbandoned(t *testing.T) {
	t.Helper()
	eventually(t, "no transaction is left open", func() bool {
		var n int
		require.NoError(t, nb.bundle.drv.(driver.Transactor).InTx(context.Background(), func(ctx context.Context, tx driver.Tx) error {
			return tx.Native().(pgx.Tx).QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n)
		}))
		return n == 0
	})
}

func waitFired(t *testing.T, tr *faultproxy.Trigger) {
	t.Helper()
	workertest.Receive(t, "the fault", tr.Fired())
}

// expireUntil moves the clock past every lease the worker took, which
// also fires its poll, and waits until cond holds (pollUntil).
func (nb *netBundle) expireUntil(t *testing.T, what string, cond func(s recorded) bool) recorded {
	t.Helper()
	nb.clock.Advance(2 * nb.lease)
	return nb.pollUntil(t, what, cond)
}

// pollUntil waits until cond holds for what the recorder was told. A poll
// is missed when the fetch loop was fetching as the clock moved (it
// schedules the next one from the new time), so whenever the worker has
// made no progress for a while, the clock moves on by a poll interval.
func (nb *netBundle) pollUntil(t *testing.T, what string, cond func(s recorded) bool) recorded {
	t.Helper()
	var s recorded
	last, idle := -1, 0
	eventually(t, what, func() bool {
		s = nb.rec.Snapshot()
		if cond(s) {
			return true
		}
		n := len(s.Fetched) + len(s.FetchFailed) + len(s.Handled) + len(s.Acked) + len(s.Renewed) + len(s.SettleFailed)
		if n != last {
			last, idle = n, 0
		} else if idle++; idle == 10 {
			nb.clock.Advance(pollInterval)
			idle = 0
		}
		return false
	})
	return s
}

// nothingMore checks, once every lease has expired, that the worker's
// polls find nothing more to deliver.
func (nb *netBundle) nothingMore(t *testing.T) {
	t.Helper()
	before := len(nb.rec.Snapshot().Fetched)
	s := nb.expireUntil(t, "two polls", func(s recorded) bool { return len(s.Fetched) >= before+2 })
	for _, f := range s.Fetched[before:] {
		assert.Zero(t, f.Count, "nothing is delivered again")
	}
}

// givenUp checks the settle failure of op on lease l: the lease was given
// up, left to expire, with an error matching each of want.
func givenUp(t *testing.T, f worker.SettleErrorInfo, op string, want ...error) {
	t.Helper()
	assert.Equal(t, op, f.Op)
	assert.Equal(t, worker.ActionLeftToExpire, f.Action)
	for _, w := range want {
		assert.ErrorIs(t, f.Err, w)
	}
}

// renewedAfter counts the renewals of lease id reported after the first
// n renewals.
func renewedAfter(s recorded, n int, id string) int {
	count := 0
	for _, r := range s.Renewed[n:] {
		if r.Lease.LeaseID == id {
			count++
		}
	}
	return count
}

// TestWorkerBoundsTransactionCalls black-holes the connection of a
// transactional handler at its begin, its ack and its commit: each call
// ends within the call timeout, the lease is given up (no longer renewed,
// its slot free, the failure logged and hooked), and the event comes back
// once the lease expires.
func TestWorkerBoundsTransactionCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		match faultproxy.Match
		op    string
		want  []error
		ran   bool // the handler ran on the first attempt
	}{
		{"a black-holed begin", faultproxy.Statement("begin"), "begin", []error{context.DeadlineExceeded}, false},
		{"a black-holed ack", faultproxy.Contains("rheo.ack("), "ack", []error{context.DeadlineExceeded, rheo.ErrFailed}, true},
		{"a black-holed commit", faultproxy.Statement("commit"), "ack", []error{context.DeadlineExceeded, rheo.ErrAmbiguous}, true},
	} {
		t.Run(tc.name+" gives the lease up and frees the slot", func(t *testing.T) {
			nb := setupBlackHole(t)
			createSideTable(t, nb.bundle.drv)
			events := appendN(t, nb.bundle.drv, nb.stream, 2)
			tr := nb.p.Arm(faultproxy.BlackHole, tc.match)
			start := time.Now()
			workertest.StartWorker(t, nb.drv, nb.txConfig(succeed))

			waitFired(t, tr)
			s := nb.rec.WaitFor(t, "the failed "+tc.op, func(s recorded) bool { return len(s.SettleFailed) == 1 })
			f := s.SettleFailed[0]
			givenUp(t, f, tc.op, tc.want...)
			assert.Equal(t, events[0].ID, f.Lease.Event.ID)
			assert.Less(t, time.Since(start), 10*time.Second, "bounded by the call timeout (2s), as the fault held")
			renewals := len(s.Renewed)

			// The only slot is free: the second event is handled.
			s = nb.rec.WaitFor(t, "the second event's ack", func(s recorded) bool { return len(s.Acked) == 1 })
			assert.Equal(t, events[1].ID, s.Acked[0].Lease.Event.ID)
			if tc.ran {
				assert.Equal(t, []int{1}, nb.attempts(events[0].ID))
			} else {
				assert.Empty(t, nb.attempts(events[0].ID), "the handler did not run")
			}

			// The lease given up is not renewed; once it expires, the
			// event is delivered again, and its first write rolled back.
			nb.waitAbandoned(t)
			s = nb.expireUntil(t, "the event again", func(s recorded) bool { return len(s.Acked) == 2 })
			assert.Equal(t, events[0].ID, s.Acked[1].Lease.Event.ID)
			assert.Equal(t, 2, s.Acked[1].Lease.Attempt)
			assert.Zero(t, renewedAfter(s, renewals, f.Lease.LeaseID), "renewal stopped")
			assert.Empty(t, s.LeaseLost)
			assert.Equal(t, 1, sideRows(t, nb.backend, nb.bundle.drv, events[0].ID))
			assert.Equal(t, int64(0), nb.info(t).Lag)
		})
	}
}

// TestWorkerAmbiguousSettles cuts the worker's connection after a settle
// reached the server, which ran it, and before the answer came back: the
// worker is told ambiguous, leaves the lease to expire, and at-least-once
// holds either way (a settle that committed stands; an event whose fate
// is unknown comes back).
func TestWorkerAmbiguousSettles(t *testing.T) {
	t.Parallel()
	t.Run("an ack whose answer was lost stands, and the event is not delivered again", func(t *testing.T) {
		nb := setupNet(t)
		events := appendN(t, nb.bundle.drv, nb.stream, 1)
		tr := nb.p.Arm(faultproxy.CutAfterSend, faultproxy.Contains("rheo.ack_batch("))
		workertest.StartWorker(t, nb.drv, nb.config(func(ctx context.Context, l rheo.Lease) error { nb.record(l); return nil }))

		waitFired(t, tr)
		s := nb.rec.WaitFor(t, "the failed ack", func(s recorded) bool { return len(s.SettleFailed) == 1 })
		givenUp(t, s.SettleFailed[0], "ack", rheo.ErrAmbiguous)
		assert.Empty(t, s.Acked, "the worker does not know that the ack committed")
		assert.Equal(t, int64(0), nb.info(t).Lag, "it did")

		nb.nothingMore(t)
		assert.Equal(t, []int{1}, nb.attempts(events[0].ID))
	})

	t.Run("a transactional commit whose answer was lost stands, with the handler's writes", func(t *testing.T) {
		nb := setupNet(t)
		createSideTable(t, nb.bundle.drv)
		events := appendN(t, nb.bundle.drv, nb.stream, 1)
		tr := nb.p.Arm(faultproxy.CutAfterSend, faultproxy.Statement("commit"))
		workertest.StartWorker(t, nb.drv, nb.txConfig(succeed))

		waitFired(t, tr)
		s := nb.rec.WaitFor(t, "the failed commit", func(s recorded) bool { return len(s.SettleFailed) == 1 })
		givenUp(t, s.SettleFailed[0], "ack", rheo.ErrAmbiguous)
		assert.Equal(t, int64(0), nb.info(t).Lag)

		nb.nothingMore(t)
		assert.Equal(t, []int{1}, nb.attempts(events[0].ID))
		assert.Equal(t, 1, sideRows(t, nb.backend, nb.bundle.drv, events[0].ID))
	})

	t.Run("a transactional ack whose answer was lost rolls back, and the event is retried at once", func(t *testing.T) {
		nb := setupNet(t)
		createSideTable(t, nb.bundle.drv)
		events := appendN(t, nb.bundle.drv, nb.stream, 1)
		tr := nb.p.Arm(faultproxy.CutAfterSend, faultproxy.Contains("rheo.ack("))
		workertest.StartWorker(t, nb.drv, nb.txConfig(succeed))

		waitFired(t, tr)
		// The ack ran in a transaction that cannot commit any more: a
		// definite failure, so the event is retried at once.
		s := nb.rec.WaitFor(t, "the ack of the retried event", func(s recorded) bool { return len(s.Acked) == 1 })
		require.Len(t, s.SettleFailed, 1)
		assert.Equal(t, "ack", s.SettleFailed[0].Op)
		assert.Equal(t, worker.ActionRetried, s.SettleFailed[0].Action)
		assert.ErrorIs(t, s.SettleFailed[0].Err, rheo.ErrFailed)
		assert.Equal(t, 2, s.Acked[0].Lease.Attempt)
		assert.Equal(t, []int{1, 2}, nb.attempts(events[0].ID))
		assert.Equal(t, 1, sideRows(t, nb.backend, nb.bundle.drv, events[0].ID), "the first attempt's write rolled back")
	})

	t.Run("a retry whose answer was lost stands, and the event comes back", func(t *testing.T) {
		nb := setupNet(t)
		events := appendN(t, nb.bundle.drv, nb.stream, 1)
		tr := nb.p.Arm(faultproxy.CutAfterSend, faultproxy.Contains("rheo.retry("))
		workertest.StartWorker(t, nb.drv, nb.config(func(ctx context.Context, l rheo.Lease) error {
			nb.record(l)
			if l.Attempt == 1 {
				return errors.New("try again")
			}
			return nil
		}))

		waitFired(t, tr)
		s := nb.rec.WaitFor(t, "the failed retry", func(s recorded) bool { return len(s.SettleFailed) == 1 })
		givenUp(t, s.SettleFailed[0], "retry", rheo.ErrAmbiguous)
		// The retry committed: the event is claimable now, and a poll
		// delivers it (if the worker's fetch right after the slot freed
		// did not already); the lease's expiry is not waited for.
		s = nb.pollUntil(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
		assert.Equal(t, 2, s.Acked[0].Lease.Attempt)
		assert.Equal(t, []int{1, 2}, nb.attempts(events[0].ID))
		assert.Empty(t, workertest.DeadLetters(t, nb.bundle.drv, nb.stream, nb.group))
	})

	t.Run("a fetch whose answer was lost: its claims expire and the events come back", func(t *testing.T) {
		nb := setupNet(t)
		events := appendN(t, nb.bundle.drv, nb.stream, 1)
		tr := nb.p.Arm(faultproxy.CutAfterSend, faultproxy.Contains("rheo.fetch("))
		workertest.StartWorker(t, nb.drv, nb.config(func(ctx context.Context, l rheo.Lease) error { nb.record(l); return nil }))

		waitFired(t, tr)
		s := nb.rec.WaitFor(t, "the failed fetch", func(s recorded) bool { return len(s.FetchFailed) == 1 })
		assert.ErrorIs(t, s.FetchFailed[0].Err, rheo.ErrAmbiguous)
		assert.Equal(t, int64(1), nb.info(t).InFlight, "the claim committed, for no one")

		s = nb.expireUntil(t, "the ack", func(s recorded) bool { return len(s.Acked) == 1 })
		assert.Equal(t, 2, s.Acked[0].Lease.Attempt)
		assert.Equal(t, []int{2}, nb.attempts(events[0].ID))
	})
}

func TestConsumerSettlesAreBounded(t *testing.T) {
	t.Parallel()
	nb := setupBlackHole(t)
	appendN(t, nb.bundle.drv, nb.stream, 1)
	cfg := nb.config(nil)
	cfg.Concurrency = 0
	c, err := worker.NewConsumer(nb.drv, cfg)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = c.Stop(ctx)
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for lease, err := range c.Leases(ctx) {
		require.NoError(t, err)
		tr := nb.p.Arm(faultproxy.BlackHole, faultproxy.Contains("rheo.retry("))
		done := make(chan error, 1)
		go func() {
			_, err := lease.Retry(context.Background(), 0, "again")
			done <- err
		}()
		waitFired(t, tr)
		err := workertest.Receive(t, "the retry, bounded by the call timeout and not by the caller's context", done)
		require.ErrorIs(t, err, rheo.ErrAmbiguous)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		break
	}
	s := nb.rec.WaitFor(t, "the failed retry", func(s recorded) bool { return len(s.SettleFailed) == 1 })
	givenUp(t, s.SettleFailed[0], "retry", rheo.ErrAmbiguous)
}
