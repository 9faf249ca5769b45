package worker_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testcitus"
	"github.com/rheo-go/rheo/worker"
)

// moveRecorder records what a worker handled and which settles failed.
type moveRecorder struct {
	mu      sync.Mutex
	handled map[string]int // handler runs by event id
	failed  []worker.SettleErrorInfo
	acked   int
}

func (r *moveRecorder) SettleFailed(_ context.Context, info worker.SettleErrorInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, info)
}

func (r *moveRecorder) Acked(context.Context, worker.AckInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked++
}

func (r *moveRecorder) handle(_ context.Context, l rheo.Lease) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handled[l.Event.ID]++
	return nil
}

func (r *moveRecorder) ackedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

// TestCitusShardMoveWhileDraining moves the shard of a stream to the
// other worker (citus_move_shard_placement) while a worker drains it and
// while leases taken before the move are held: no event is lost, every
// one is handled and acknowledged, and a settle of a lease taken before
// the move either succeeds or fails stale_lease, whose event comes back.
func TestCitusShardMoveWhileDraining(t *testing.T) {
	t.Parallel()
	c := testcitus.Start(t)
	adminURL, appURL := c.NewRheo(t)
	ctx := context.Background()
	drv := openPostgres(t, appURL, nil)
	stream, group := newStream(t, drv, 4, 5)
	require.NoError(t, drv.CreateGroup(ctx, stream, "held", nil))
	const n = 3000
	events := appendN(t, drv, stream, n)

	// Leases held across the move, settled after it.
	held, err := drv.Fetch(ctx, stream, "held", &rheo.FetchOptions{MaxCount: 20, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, held, 20)

	rec := &moveRecorder{handled: map[string]int{}}
	cfg := &worker.Config{Stream: stream, Group: group, Handler: rec.handle, Concurrency: 8,
		PollInterval: 50 * time.Millisecond, Hooks: []any{rec}}
	w, err := worker.New(drv, cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, waitTimeout)
		defer cancel()
		_ = w.StopAndCancel(stopCtx)
	}()
	eventually(t, "a quarter of the stream acknowledged", func() bool { return rec.ackedCount() >= n/4 })

	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	var from, to string
	var fromPort, toPort int
	require.NoError(t, admin.QueryRow(ctx, `
SELECT s.nodename, s.nodeport, o.nodename, o.nodeport
  FROM citus_shards s
  JOIN pg_dist_node o ON o.noderole = 'primary' AND o.shouldhaveshards AND o.nodeport <> s.nodeport
 WHERE s.table_name = 'rheo.events'::regclass
   AND s.shardid = get_shard_id_for_distribution_column('rheo.events', $1::text)
 LIMIT 1`, stream).Scan(&from, &fromPort, &to, &toPort))
	_, err = admin.Exec(ctx, `SELECT citus_move_shard_placement(get_shard_id_for_distribution_column('rheo.events', $1::text),
		$2, $3, $4, $5, shard_transfer_mode => 'block_writes')`, stream, from, fromPort, to, toPort)
	require.NoError(t, err, "move the stream's shard from %s:%d to %s:%d", from, fromPort, to, toPort)
	ackedAtMove := rec.ackedCount()
	require.Less(t, ackedAtMove, n, "the worker was still draining when the move ended")
	streams, err := drv.ListStreams(ctx)
	require.NoError(t, err)
	require.Len(t, streams, 1)
	require.Equal(t, to+":"+strconv.Itoa(toPort), streams[0].Node, "the stream moved")

	// The leases taken before the move.
	var settled, stale int
	for _, l := range held {
		err := drv.Ack(ctx, l.LeaseID)
		switch {
		case err == nil:
			settled++
		case errors.Is(err, rheo.ErrStaleLease):
			stale++
		default:
			require.NoError(t, err, "the settle of a lease taken before the move")
		}
	}
	t.Logf("%d of %d events acknowledged when the move ended; of %d leases taken before it, %d settled after it and %d were stale",
		ackedAtMove, n, len(held), settled, stale)

	eventually(t, "every event acknowledged", func() bool {
		info, err := drv.GroupInfo(ctx, stream, group)
		require.NoError(t, err)
		return info.Lag == 0 && info.InFlight == 0
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range events {
		assert.Positive(t, rec.handled[e.ID], "event %s was handled", e.ID)
	}
	for _, f := range rec.failed {
		assert.ErrorIs(t, f.Err, rheo.ErrStaleLease, "a settle across the move fails only stale_lease: %s %v", f.Op, f.Err)
	}
	if stale > 0 {
		// Their events come back once the leases expire.
		var again int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM rheo.fetch($1, 'held', max_count => $2,
			clock => now() + interval '2 minutes') WHERE attempt = 2`, stream, n).Scan(&again))
		assert.Equal(t, stale, again, "the events of stale leases are delivered again")
	}
}
