package redis_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/redis"
	"github.com/rheo-go/rheo/driver/redis/redistest"
)

// privateServer starts a Redis server of the test's own, which the test
// may kill and restart, or skips (fails under CI=true) without
// redis-server.
func privateServer(t *testing.T, fsync string) *redistest.Server {
	t.Helper()
	redistest.RequireServer(t)
	s, err := redistest.StartServer(&redistest.ServerOptions{Fsync: fsync})
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return s
}

// untilUp retries op while the server is coming back: each try either
// succeeds or fails backend_unavailable (a connection of the pool that
// the restart broke), never with a raw error.
func untilUp(t *testing.T, op func() error) {
	t.Helper()
	for range 50 {
		err := op()
		if err == nil {
			return
		}
		require.True(t, errors.Is(err, rheo.ErrBackendUnavailable) || errors.Is(err, rheo.ErrAmbiguous),
			"a call across the restart fails backend_unavailable or ambiguous, got %v", err)
		time.Sleep(20 * time.Millisecond)
	}
	require.FailNow(t, "the server did not come back")
}

// TestRestartMidDrain kills a Redis server with appendfsync always in the
// middle of a drain and starts it again on its append-only file: every
// acked event stays acked, the leases in flight come back (they expire
// and are claimed again, attempt 2), and no settle of a lease that was
// settled or re-leased succeeds.
func TestRestartMidDrain(t *testing.T) {
	srv := privateServer(t, "always")
	ctx := context.Background()
	clock := drivertest.NewClock()
	d, err := redis.Open(ctx, srv.URL(), &redis.Options{Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })

	require.NoError(t, d.CreateStream(ctx, "restart", 4))
	require.NoError(t, d.CreateGroup(ctx, "restart", "g", nil))
	items := make([]rheo.BatchItem, 200)
	for i := range items {
		items[i] = rheo.BatchItem{Payload: []byte(`{"n": 1}`), Key: string(rune('a' + i%26))}
	}
	_, err = d.AppendBatch(ctx, "restart", items, nil)
	require.NoError(t, err)

	leases, err := d.Fetch(ctx, "restart", "g", &rheo.FetchOptions{MaxCount: 50, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, leases, 50)
	acked := map[string]bool{}
	for _, l := range leases[:30] {
		require.NoError(t, d.Ack(ctx, l.LeaseID))
		acked[l.Event.ID] = true
	}
	inFlight := leases[30:]

	require.NoError(t, srv.Kill())
	err = d.Ack(ctx, inFlight[0].LeaseID)
	require.Error(t, err)
	require.True(t, errors.Is(err, rheo.ErrBackendUnavailable) || errors.Is(err, rheo.ErrAmbiguous),
		"an ack while the server is down fails backend_unavailable or ambiguous, got %v", err)
	require.NoError(t, srv.Restart())

	var lag rheo.Lag
	untilUp(t, func() error {
		var err error
		lag, err = d.Lag(ctx, "restart", "g", nil)
		return err
	})
	require.Equal(t, int64(200-30), lag.Total, "the acks made before the kill survived it")
	info, err := d.GroupInfo(ctx, "restart", "g")
	require.NoError(t, err)
	require.Equal(t, int64(20), info.InFlight, "the leases in flight came back")

	// A lease acked before the kill stays settled.
	require.ErrorIs(t, d.Ack(ctx, leases[0].LeaseID), rheo.ErrStaleLease)

	// The leases in flight expire and are claimed again.
	clock.Advance(2 * time.Minute)
	seen := map[string]int{}
	for {
		batch, err := d.Fetch(ctx, "restart", "g", &rheo.FetchOptions{MaxCount: 100, LeaseDuration: time.Minute})
		require.NoError(t, err)
		if len(batch) == 0 {
			break
		}
		for _, l := range batch {
			require.False(t, acked[l.Event.ID], "an acked event is never delivered again")
			seen[l.Event.ID] = l.Attempt
			require.NoError(t, d.Ack(ctx, l.LeaseID))
		}
	}
	require.Len(t, seen, 200-30, "every event not acked before the kill is delivered")
	for _, l := range inFlight {
		require.Equal(t, 2, seen[l.Event.ID], "a lease in flight at the kill is claimed again as attempt 2")
		require.ErrorIs(t, d.Ack(ctx, l.LeaseID), rheo.ErrStaleLease, "the lease from before the kill is stale")
	}
	lag, err = d.Lag(ctx, "restart", "g", nil)
	require.NoError(t, err)
	require.Zero(t, lag.Total)
}

// cutProxy relays TCP between the driver and Redis, and, once cut is
// set, forwards the next request it receives and closes the connection
// before any reply: the command ran, and its caller cannot know.
type cutProxy struct {
	l      net.Listener
	target string
	cut    atomic.Bool
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{l: l, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = l.Close()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := s.Write(buf[:n]); werr != nil {
						break
					}
					if p.cut.CompareAndSwap(true, false) {
						// Break the driver's side before the reply can be
						// relayed, and let the server run the command.
						_ = c.Close()
						time.Sleep(50 * time.Millisecond)
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = c.Close()
			_ = s.Close()
		}()
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(c, s)
			_ = c.Close()
		}()
	}
}

// TestLostConnectionIsAmbiguous breaks the connection after an ack's
// script was sent: the driver reports *rheo.AmbiguousError, not a
// failure, and indeed the ack took effect.
func TestLostConnectionIsAmbiguous(t *testing.T) {
	srv := privateServer(t, "everysec")
	proxy := newCutProxy(t, srv.Addr)
	ctx := context.Background()
	d, err := redis.Open(ctx, "redis://"+proxy.l.Addr().String()+"/0", &redis.Options{Clock: drivertest.NewClock()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })

	require.NoError(t, d.CreateStream(ctx, "cut", 1))
	require.NoError(t, d.CreateGroup(ctx, "cut", "g", nil))
	_, err = d.AppendBatch(ctx, "cut", []rheo.BatchItem{{Payload: []byte(`{"n": 1}`)}, {Payload: []byte(`{"n": 2}`)}}, nil)
	require.NoError(t, err)
	leases, err := d.Fetch(ctx, "cut", "g", nil)
	require.NoError(t, err)
	require.Len(t, leases, 2)
	// The first ack loads the script, so that the cut one runs it.
	require.NoError(t, d.Ack(ctx, leases[1].LeaseID))

	proxy.cut.Store(true)
	err = d.Ack(ctx, leases[0].LeaseID)
	var ambiguous *rheo.AmbiguousError
	require.ErrorAs(t, err, &ambiguous, "a connection lost after the script was sent")
	require.False(t, errors.Is(err, rheo.ErrFailed))

	untilUp(t, func() error { return d.Ping(ctx) })
	require.ErrorIs(t, d.Ack(ctx, leases[0].LeaseID), rheo.ErrStaleLease, "the ambiguous ack had settled the lease")
}

// TestUnreachableServer: a server that cannot be reached is
// backend_unavailable, for reads and writes alike: nothing was sent.
func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = redis.Open(context.Background(), "redis://"+addr+"/0", nil)
	require.ErrorIs(t, err, rheo.ErrBackendUnavailable)
}
