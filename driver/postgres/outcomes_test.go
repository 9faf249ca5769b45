package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/faultproxy"
)

// scene is a database reached two ways: d through a fault proxy, admin
// directly, to look at what the server did. Both read the same clock.
type scene struct {
	d     *postgres.Driver
	admin *postgres.Driver
	p     *faultproxy.Proxy
	url   string // the database's own URL

	clock *drivertest.Clock
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newScene(t *testing.T) *scene {
	t.Helper()
	s := &scene{url: newDatabase(t), clock: drivertest.ClockAt(t0)}
	u, err := url.Parse(s.url)
	require.NoError(t, err)
	s.p = faultproxy.New(t, u.Host)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, s.p.URL(t, s.url))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s.d = postgres.New(pool, &postgres.Options{Clock: s.clock})
	t.Cleanup(func() { _ = s.d.Close() })
	s.admin, err = postgres.Open(ctx, s.url, &postgres.Options{Clock: s.clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.admin.Close() })
	return s
}

func (s *scene) setClock(at time.Time) { s.clock.Set(at) }

var streamSeq atomic.Int64

// stream is one case's stream, with group g, its events on partition 0
// and the id of a lease of the first one when the case took one.
type stream struct {
	name, group string
	events      []rheo.Event
	leaseID     string
}

func (s *scene) newStream(t *testing.T, group bool, events int) *stream {
	t.Helper()
	ctx := context.Background()
	st := &stream{name: fmt.Sprintf("s%d", streamSeq.Add(1)), group: "g"}
	require.NoError(t, s.admin.CreateStream(ctx, st.name, 1))
	if group {
		require.NoError(t, s.admin.CreateGroup(ctx, st.name, st.group, nil))
	}
	for i := range events {
		ev, err := s.admin.Append(ctx, st.name, json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), nil)
		require.NoError(t, err)
		st.events = append(st.events, ev)
	}
	return st
}

// lease fetches the stream's first event through admin, for 30s.
func (s *scene) lease(t *testing.T, st *stream) rheo.Lease {
	t.Helper()
	leases, err := s.admin.Fetch(context.Background(), st.name, st.group, &rheo.FetchOptions{MaxCount: 1, LeaseDuration: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, leases, 1)
	return leases[0]
}

func (s *scene) info(t *testing.T, st *stream) rheo.GroupInfo {
	t.Helper()
	info, err := s.admin.GroupInfo(context.Background(), st.name, st.group)
	require.NoError(t, err)
	return info
}

func (s *scene) read(t *testing.T, st *stream) []rheo.Event {
	t.Helper()
	events, err := s.admin.Read(context.Background(), st.name, nil)
	require.NoError(t, err)
	return events
}

func waitFired(t *testing.T, tr *faultproxy.Trigger) {
	t.Helper()
	select {
	case <-tr.Fired():
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the fault did not fire")
	}
}

// TestOutcomes cuts the connection of each operation after its request
// went upstream and the server finished it, before the answer came back:
// every write that commits on its own has committed, and must say
// ambiguous, never backend_unavailable.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	ctx := t.Context()

	writes := []struct {
		name string
		op   string // the Op of the AmbiguousError
		sql  string // the text that triggers the cut
		// call runs the operation through the proxy, for a stream the
		// case prepared.
		prepare func(t *testing.T) *stream
		call    func(st *stream) error
		// committed checks, through admin, that the server did it.
		committed func(t *testing.T, st *stream)
	}{
		{
			name: "create_stream", op: "create_stream", sql: "rheo.create_stream(",
			prepare: func(t *testing.T) *stream { return &stream{name: fmt.Sprintf("s%d", streamSeq.Add(1))} },
			call:    func(st *stream) error { return s.d.CreateStream(ctx, st.name, 2) },
			committed: func(t *testing.T, st *stream) {
				streams, err := s.admin.ListStreams(ctx)
				require.NoError(t, err)
				require.Contains(t, streamNames(streams), st.name)
			},
		},
		{
			name: "create_group", op: "create_group", sql: "rheo.create_group(",
			prepare: func(t *testing.T) *stream { return s.newStream(t, false, 0) },
			call:    func(st *stream) error { return s.d.CreateGroup(ctx, st.name, "g", nil) },
			committed: func(t *testing.T, st *stream) {
				groups, err := s.admin.ListGroups(ctx, st.name)
				require.NoError(t, err)
				require.Len(t, groups, 1)
			},
		},
		{
			name: "append", op: "append", sql: "rheo.append(",
			prepare: func(t *testing.T) *stream { return s.newStream(t, false, 0) },
			call: func(st *stream) error {
				_, err := s.d.Append(ctx, st.name, json.RawMessage(`{"n": 1}`), &rheo.AppendOptions{ID: "e1"})
				return err
			},
			committed: func(t *testing.T, st *stream) {
				require.Len(t, s.read(t, st), 1)
				// What a host does about it: append again with the same
				// id, which is a repeat and writes nothing.
				ev, err := s.d.Append(ctx, st.name, json.RawMessage(`{"n": 1}`), &rheo.AppendOptions{ID: "e1"})
				require.NoError(t, err)
				require.Equal(t, int64(1), ev.Sequence)
				require.Len(t, s.read(t, st), 1)
			},
		},
		{
			name: "append_batch", op: "append_batch", sql: "rheo.append_batch(",
			prepare: func(t *testing.T) *stream { return s.newStream(t, false, 0) },
			call: func(st *stream) error {
				_, err := s.d.AppendBatch(ctx, st.name, []rheo.BatchItem{{Payload: json.RawMessage(`{}`)}, {Payload: json.RawMessage(`{}`)}}, nil)
				return err
			},
			committed: func(t *testing.T, st *stream) { require.Len(t, s.read(t, st), 2) },
		},
		{
			// The fetch of its own goes in one batch with the SET of
			// synchronous_commit; the cut comes after the batch's Sync.
			name: "fetch", op: "fetch", sql: "rheo.fetch(",
			prepare: func(t *testing.T) *stream { return s.newStream(t, true, 1) },
			call: func(st *stream) error {
				_, err := s.d.Fetch(ctx, st.name, st.group, &rheo.FetchOptions{MaxCount: 1})
				return err
			},
			committed: func(t *testing.T, st *stream) {
				require.Equal(t, int64(1), s.info(t, st).InFlight, "the claim committed")
			},
		},
		{
			name: "renew", op: "renew", sql: "rheo.renew(",
			prepare: leased(s),
			call: func(st *stream) error {
				_, err := s.d.Renew(ctx, st.leaseID, time.Minute)
				return err
			},
			committed: func(t *testing.T, st *stream) {
				s.setClock(t0.Add(45 * time.Second))
				defer s.setClock(t0)
				require.Equal(t, int64(1), s.info(t, st).InFlight, "the lease lasts a minute")
			},
		},
		{
			name: "ack", op: "ack", sql: "rheo.ack(",
			prepare: leased(s), call: func(st *stream) error { return s.d.Ack(ctx, st.leaseID) },
			committed: func(t *testing.T, st *stream) {
				info := s.info(t, st)
				require.Zero(t, info.Lag)
				require.Zero(t, info.InFlight)
			},
		},
		{
			name: "ack_batch", op: "ack_batch", sql: "rheo.ack_batch(",
			prepare: leased(s),
			call: func(st *stream) error {
				_, err := s.d.AckBatch(ctx, []string{st.leaseID})
				return err
			},
			committed: func(t *testing.T, st *stream) { require.Zero(t, s.info(t, st).Lag) },
		},
		{
			name: "retry", op: "retry", sql: "rheo.retry(",
			prepare: leased(s),
			call: func(st *stream) error {
				_, err := s.d.Retry(ctx, st.leaseID, &rheo.RetryOptions{Delay: time.Minute})
				return err
			},
			committed: func(t *testing.T, st *stream) {
				info := s.info(t, st)
				require.Equal(t, int64(1), info.PendingRetry)
				require.Zero(t, info.InFlight)
			},
		},
		{
			name: "reject", op: "reject", sql: "rheo.reject(",
			prepare: leased(s),
			call:    func(st *stream) error { return s.d.Reject(ctx, st.leaseID, "poison") },
			committed: func(t *testing.T, st *stream) {
				letters, err := s.admin.DeadLetters(ctx, st.name, st.group, nil)
				require.NoError(t, err)
				require.Len(t, letters, 1)
			},
		},
		{
			name: "replay", op: "replay", sql: "rheo.replay(",
			prepare: func(t *testing.T) *stream {
				st := s.newStream(t, true, 1)
				require.NoError(t, s.admin.Ack(ctx, s.lease(t, st).LeaseID))
				return st
			},
			call: func(st *stream) error {
				_, err := s.d.Replay(ctx, st.name, st.group, &rheo.ReplayOptions{FromSequence: new(int64(0))})
				return err
			},
			committed: func(t *testing.T, st *stream) { require.Equal(t, int64(1), s.info(t, st).Lag) },
		},
		{
			name: "reset_group", op: "reset_group", sql: "rheo.reset_group(",
			prepare: func(t *testing.T) *stream { return s.newStream(t, true, 1) },
			call: func(st *stream) error {
				return s.d.ResetGroup(ctx, st.name, st.group, &rheo.ResetOptions{Confirm: true, StartAfter: new(int64(1))})
			},
			committed: func(t *testing.T, st *stream) { require.Zero(t, s.info(t, st).Lag) },
		},
		{
			name: "the commit of InTx", op: "commit", sql: "commit",
			prepare: func(t *testing.T) *stream { return s.newStream(t, false, 0) },
			call: func(st *stream) error {
				return s.d.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
					_, err := tx.Append(ctx, st.name, json.RawMessage(`{}`), nil)
					return err
				})
			},
			committed: func(t *testing.T, st *stream) { require.Len(t, s.read(t, st), 1) },
		},
	}
	for _, c := range writes {
		t.Run(c.name+" whose answer was lost is ambiguous, and committed", func(t *testing.T) {
			st := c.prepare(t)
			match := faultproxy.Contains(c.sql)
			if c.sql == "commit" {
				match = faultproxy.Statement(c.sql)
			}
			tr := s.p.Arm(faultproxy.CutAfterSend, match)
			err := c.call(st)
			waitFired(t, tr)
			var ambiguous *rheo.AmbiguousError
			require.ErrorAs(t, err, &ambiguous)
			require.Equal(t, c.op, ambiguous.Op)
			require.NotErrorIs(t, err, rheo.ErrBackendUnavailable)
			c.committed(t, st)
		})
	}

	reads := []struct {
		name, sql string
		call      func(st *stream) error
	}{
		{"read", "rheo.read(", func(st *stream) error { _, err := s.d.Read(ctx, st.name, nil); return err }},
		{"lag", "rheo.lag(", func(st *stream) error { _, err := s.d.Lag(ctx, st.name, st.group, nil); return err }},
		{"list_streams", "rheo.list_streams(", func(st *stream) error { _, err := s.d.ListStreams(ctx); return err }},
		{"list_groups", "rheo.list_groups(", func(st *stream) error { _, err := s.d.ListGroups(ctx, st.name); return err }},
		{"dead_letters", "rheo.dead_letters(", func(st *stream) error {
			_, err := s.d.DeadLetters(ctx, st.name, st.group, nil)
			return err
		}},
		{"group_info", "rheo.group_info(", func(st *stream) error { _, err := s.d.GroupInfo(ctx, st.name, st.group); return err }},
		{"query", "rheo.query_page(", func(st *stream) error { _, err := s.d.Query(ctx, st.name, rheo.Query{}); return err }},
	}
	for _, c := range reads {
		t.Run(c.name+" whose answer was lost is backend_unavailable, never ambiguous", func(t *testing.T) {
			st := s.newStream(t, true, 1)
			tr := s.p.Arm(faultproxy.CutAfterSend, faultproxy.Contains(c.sql))
			err := c.call(st)
			waitFired(t, tr)
			require.ErrorIs(t, err, rheo.ErrBackendUnavailable)
			require.NotErrorIs(t, err, rheo.ErrAmbiguous)
		})
	}

	t.Run("a write in a host transaction whose answer was lost is failed, and nothing commits", func(t *testing.T) {
		st := s.newStream(t, false, 0)
		tx, err := s.d.Pool().Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		rtx := s.d.WithTx(tx)
		tr := s.p.Arm(faultproxy.CutAfterSend, faultproxy.Contains("rheo.append("))
		_, err = rtx.Append(ctx, st.name, json.RawMessage(`{}`), nil)
		waitFired(t, tr)
		require.ErrorIs(t, err, rheo.ErrFailed)
		require.NotErrorIs(t, err, rheo.ErrAmbiguous)

		_, err = rtx.Append(ctx, st.name, json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, rheo.ErrBackendUnavailable, "the next operation is not sent")
		require.Error(t, tx.Commit(ctx))
		require.Empty(t, s.read(t, st))
	})

	t.Run("a fetch in a host transaction whose answer was lost is failed, and claims nothing", func(t *testing.T) {
		st := s.newStream(t, true, 1)
		tr := s.p.Arm(faultproxy.CutAfterSend, faultproxy.Contains("rheo.fetch("))
		err := s.d.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
			_, err := tx.Fetch(ctx, st.name, st.group, nil)
			return err
		})
		waitFired(t, tr)
		require.ErrorIs(t, err, rheo.ErrFailed)
		require.Eventually(t, func() bool { return s.info(t, st).InFlight == 0 }, 10*time.Second, 10*time.Millisecond,
			"the claim rolls back when the server sees the connection close")
	})

	t.Run("an ack in InTx whose answer was lost is failed, and the lease is still held", func(t *testing.T) {
		st := leased(s)(t)
		tr := s.p.Arm(faultproxy.CutAfterSend, faultproxy.Contains("rheo.ack("))
		err := s.d.InTx(ctx, func(ctx context.Context, tx driver.Tx) error { return tx.Ack(ctx, st.leaseID) })
		waitFired(t, tr)
		require.ErrorIs(t, err, rheo.ErrFailed)
		require.NotErrorIs(t, err, rheo.ErrAmbiguous)
		require.Eventually(t, func() bool {
			info := s.info(t, st)
			return info.InFlight == 1 && info.Lag == 1
		}, 10*time.Second, 10*time.Millisecond)
		require.NoError(t, s.admin.Ack(ctx, st.leaseID), "the lease can still be settled")
	})

	t.Run("a begin whose answer was lost is backend_unavailable and runs nothing", func(t *testing.T) {
		tr := s.p.Arm(faultproxy.CutAfterSend, faultproxy.Statement("begin"))
		ran := false
		err := s.d.InTx(ctx, func(ctx context.Context, tx driver.Tx) error { ran = true; return nil })
		waitFired(t, tr)
		require.ErrorIs(t, err, rheo.ErrBackendUnavailable)
		require.False(t, ran)
	})

	t.Run("a black-holed begin ends with its context, failed, and runs nothing", func(t *testing.T) {
		tr := s.p.Arm(faultproxy.BlackHole, faultproxy.Statement("begin"))
		ran := false
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err := s.d.InTx(cctx, func(ctx context.Context, tx driver.Tx) error { ran = true; return nil })
		waitFired(t, tr)
		require.ErrorIs(t, err, rheo.ErrFailed)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.False(t, ran)
	})

	t.Run("a black-holed commit ends with its context, ambiguous", func(t *testing.T) {
		st := s.newStream(t, false, 0)
		tr := s.p.Arm(faultproxy.BlackHole, faultproxy.Statement("commit"))
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err := s.d.InTx(cctx, func(ctx context.Context, tx driver.Tx) error {
			_, err := tx.Append(ctx, st.name, json.RawMessage(`{}`), nil)
			return err
		})
		waitFired(t, tr)
		require.ErrorIs(t, err, rheo.ErrAmbiguous)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Eventually(t, func() bool { return len(s.read(t, st)) == 0 }, 10*time.Second, 10*time.Millisecond,
			"COMMIT never reached the server")
	})

	t.Run("a write that never left the client is backend_unavailable", func(t *testing.T) {
		st := s.newStream(t, false, 0)
		s.p.CutAll()
		defer s.p.Restore()
		pool, err := pgxpool.New(ctx, s.p.URL(t, s.url))
		require.NoError(t, err)
		defer pool.Close()
		d := postgres.New(pool, nil)
		defer d.Close()
		_, err = d.Append(ctx, st.name, json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, rheo.ErrBackendUnavailable)
		require.NotErrorIs(t, err, rheo.ErrAmbiguous)
		require.Empty(t, s.read(t, st))
	})
}

// leased prepares a stream with one event leased through admin.
func leased(s *scene) func(t *testing.T) *stream {
	return func(t *testing.T) *stream {
		st := s.newStream(t, true, 1)
		st.leaseID = s.lease(t, st).LeaseID
		return st
	}
}

func streamNames(streams []rheo.StreamSummary) []string {
	names := make([]string, len(streams))
	for i, s := range streams {
		names[i] = s.Name
	}
	return names
}
