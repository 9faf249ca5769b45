package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testcitus"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testlog"
	"github.com/rheo-go/rheo/migrate"
	"github.com/rheo-go/rheo/worker"
)

// citusWakeups is Rheo installed distributed on the Citus test cluster,
// with an application role and a superuser pool on every node.
type citusWakeups struct {
	cluster *testcitus.Cluster
	url     string // the coordinator's database, as the superuser
	app     string // the application role
	admin   *pgxpool.Pool
	workers map[testcitus.Node]*pgxpool.Pool
}

func newCitusWakeups(t *testing.T) *citusWakeups {
	t.Helper()
	ctx := context.Background()
	c := testcitus.Start(t)
	url := c.NewDatabase(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, migrate.Postgres(ctx, conn, nil))

	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	app := "rheo_test_role_" + hex.EncodeToString(suffix)
	ident := pgx.Identifier{app}.Sanitize()
	_, err = conn.Exec(ctx, "CREATE ROLE "+ident+" LOGIN; GRANT rheo_admin TO "+ident)
	require.NoError(t, err)
	admin, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.WithoutCancel(ctx), "DROP OWNED BY "+ident+"; DROP ROLE "+ident)
		assert.NoError(t, err, "drop the application role")
		admin.Close()
	})
	cw := &citusWakeups{cluster: c, url: url, app: app, admin: admin, workers: map[testcitus.Node]*pgxpool.Pool{}}
	for i, workerURL := range c.WorkerURLs(t, url) {
		pool, err := pgxpool.New(ctx, workerURL)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		cw.workers[c.Workers[i]] = pool
	}
	return cw
}

// driver returns a driver on a pool of the application role whose
// connections, the listener's included, carry application_name name,
// and the recorder of its logs.
func (cw *citusWakeups) driver(t *testing.T, name string, placementEvery time.Duration) (*postgres.Driver, *testlog.Recorder) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), withParams(t, testdb.AsRole(t, cw.url, cw.app), "application_name", name))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	logs := testlog.New()
	d := postgres.New(pool, &postgres.Options{Logger: logs.Logger()})
	if placementEvery > 0 {
		postgres.SetPlacementEvery(d, placementEvery)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, logs
}

// nodeOf returns the worker that holds stream's shard.
func (cw *citusWakeups) nodeOf(t *testing.T, stream string) testcitus.Node {
	t.Helper()
	var n testcitus.Node
	require.NoError(t, cw.admin.QueryRow(t.Context(), `SELECT n.nodename, n.nodeport
		  FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
		 WHERE p.shardid = get_shard_id_for_distribution_column('rheo.events', $1::text)`, stream).Scan(&n.Host, &n.Port))
	return n
}

// streamsOn creates, for each worker, a stream of one partition whose
// shard it holds, named with prefix.
func (cw *citusWakeups) streamsOn(t *testing.T, d *postgres.Driver, prefix string) map[testcitus.Node]string {
	t.Helper()
	streams := map[testcitus.Node]string{}
	for i := 0; len(streams) < len(cw.workers); i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		n := cw.nodeOf(t, name)
		if _, ok := streams[n]; !ok {
			streams[n] = name
			require.NoError(t, d.CreateStream(t.Context(), name, 1))
		}
	}
	return streams
}

// listeners counts the LISTEN connections of application name on node.
func (cw *citusWakeups) listeners(t *testing.T, node testcitus.Node, name string) int {
	t.Helper()
	pool := cw.workers[node]
	require.NotNil(t, pool, "worker %s", node.Addr())
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1 AND query = 'LISTEN rheo_events'`, name).Scan(&n))
	return n
}

func (cw *citusWakeups) waitListening(t *testing.T, node testcitus.Node, name string, want int) {
	t.Helper()
	require.Eventually(t, func() bool { return cw.listeners(t, node, name) == want }, 15*time.Second, 10*time.Millisecond,
		"%d LISTEN connections of %s on %s", want, name, node.Addr())
}

// receiveSequence waits up to 5s for the wakeup of stream's sequence,
// skipping earlier ones.
func receiveSequence(t *testing.T, ch <-chan driver.Wakeup, stream string, sequence int64) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case w, ok := <-ch:
			require.True(t, ok, "the channel is open")
			require.Equal(t, stream, w.Stream)
			if w.Sequence >= sequence {
				return
			}
		case <-deadline:
			require.FailNow(t, fmt.Sprintf("no wakeup for %s/%d within 5s", stream, sequence))
		}
	}
}

// TestCitusWakeups checks that the driver's wakeups reach consumers on
// Citus, where an append called outside a transaction notifies on the
// worker that holds its stream, and measures how soon.
func TestCitusWakeups(t *testing.T) {
	testcitus.Start(t)
	verifyNoLeaks(t) // the node connections end with their driver
	cw := newCitusWakeups(t)
	ctx := t.Context()

	t.Run("an append delegated to a worker wakes the subscribers, for streams on each worker", func(t *testing.T) {
		d, logs := cw.driver(t, "rheo-wakeups-delegated", 0)
		streams := cw.streamsOn(t, d, "delegated")
		// A listener on the coordinator alone, as before Citus: it hears
		// nothing of a delegated append.
		plain, err := pgx.Connect(ctx, cw.url)
		require.NoError(t, err)
		defer plain.Close(ctx)
		_, err = plain.Exec(ctx, "LISTEN rheo_events")
		require.NoError(t, err)

		for node, stream := range streams {
			wake, stop := d.Wakeups(stream)
			cw.waitListening(t, node, "rheo-wakeups-delegated", 1)
			ev, err := d.Append(ctx, stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)
			receiveSequence(t, wake, stream, ev.Sequence)
			stop()

			waitCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			for {
				n, err := plain.WaitForNotification(waitCtx)
				if err != nil {
					break
				}
				require.NotContains(t, n.Payload, stream, "the append ran on the worker, not on the coordinator")
			}
			cancel()
			require.False(t, plain.IsClosed())
		}
		for node := range streams {
			cw.waitListening(t, node, "rheo-wakeups-delegated", 0)
		}
		require.Zero(t, logs.Count(slog.LevelWarn, ""), "nothing went wrong")
	})

	t.Run("an append in a transaction, run on the coordinator, wakes the subscribers", func(t *testing.T) {
		d, _ := cw.driver(t, "rheo-wakeups-tx", 0)
		for node, stream := range cw.streamsOn(t, d, "tx") {
			wake, stop := d.Wakeups(stream)
			cw.waitListening(t, node, "rheo-wakeups-tx", 1)
			var ev int64
			require.NoError(t, d.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
				e, err := tx.Append(ctx, stream, json.RawMessage(`{}`), nil)
				ev = e.Sequence
				return err
			}))
			receiveSequence(t, wake, stream, ev)
			stop()
		}
	})

	t.Run("after the stream's shard moves to the other worker, its appends wake the subscribers", func(t *testing.T) {
		const every = 200 * time.Millisecond
		d, _ := cw.driver(t, "rheo-wakeups-move", every)
		streams := cw.streamsOn(t, d, "move")
		for from, stream := range streams {
			to := cw.cluster.Workers[0]
			if to == from {
				to = cw.cluster.Workers[1]
			}
			wake, stop := d.Wakeups(stream)
			cw.waitListening(t, from, "rheo-wakeups-move", 1)
			ev, err := d.Append(ctx, stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)
			receiveSequence(t, wake, stream, ev.Sequence)

			_, err = cw.admin.Exec(ctx, `SELECT citus_move_shard_placement(
				get_shard_id_for_distribution_column('rheo.events', $1::text), $2, $3, $4, $5,
				shard_transfer_mode => 'block_writes')`, stream, from.Host, from.Port, to.Host, to.Port)
			require.NoError(t, err)
			moved := time.Now()
			require.Equal(t, to, cw.nodeOf(t, stream))
			// Appends until one wakes the subscriber: what the listener
			// misses before it reads the placements again is found by polling.
			deadline := time.Now().Add(10 * time.Second)
			for {
				ev, err := d.Append(ctx, stream, json.RawMessage(`{}`), nil)
				require.NoError(t, err)
				select {
				case w := <-wake:
					require.Equal(t, stream, w.Stream)
					if w.Sequence < ev.Sequence {
						continue
					}
				case <-time.After(50 * time.Millisecond):
					require.True(t, time.Now().Before(deadline), "no wakeup within 10s of the move")
					continue
				}
				break
			}
			t.Logf("first wakeup %s after the move of %s from %s to %s (placements read every %s)",
				time.Since(moved).Round(time.Millisecond), stream, from.Addr(), to.Addr(), every)
			cw.waitListening(t, to, "rheo-wakeups-move", 1)
			cw.waitListening(t, from, "rheo-wakeups-move", 0)
			ev, err = d.Append(ctx, stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)
			receiveSequence(t, wake, stream, ev.Sequence)
			stop()
			cw.waitListening(t, to, "rheo-wakeups-move", 0)
		}
	})

	t.Run("a lost connection to a worker is made again", func(t *testing.T) {
		d, logs := cw.driver(t, "rheo-wakeups-lost", 0)
		for node, stream := range cw.streamsOn(t, d, "lost") {
			wake, stop := d.Wakeups(stream)
			cw.waitListening(t, node, "rheo-wakeups-lost", 1)
			var terminated bool
			require.NoError(t, cw.workers[node].QueryRow(ctx, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = 'rheo-wakeups-lost'`).Scan(&terminated))
			require.True(t, terminated)
			cw.waitListening(t, node, "rheo-wakeups-lost", 1)
			ev, err := d.Append(ctx, stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)
			receiveSequence(t, wake, stream, ev.Sequence)
			stop()
		}
		require.Positive(t, logs.Count(slog.LevelWarn, "listen connection to a Citus node lost"))
	})

	t.Run("a worker that polls once an hour handles an event appended on a worker at once", func(t *testing.T) {
		d, _ := cw.driver(t, "rheo-wakeups-worker", 0)
		for node, stream := range cw.streamsOn(t, d, "consumed") {
			require.NoError(t, d.CreateGroup(ctx, stream, "g", nil))
			handled := make(chan int64, 1)
			w, err := worker.New(d, &worker.Config{
				Stream: stream, Group: "g", Concurrency: 1, PollInterval: time.Hour,
				Handler: func(ctx context.Context, lease rheo.Lease) error {
					handled <- lease.Event.Sequence
					return nil
				},
			})
			require.NoError(t, err)
			require.NoError(t, w.Start(ctx))
			cw.waitListening(t, node, "rheo-wakeups-worker", 1)
			ev, err := d.Append(ctx, stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)
			select {
			case seq := <-handled:
				require.Equal(t, ev.Sequence, seq)
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the event was not handled within 10s")
			}
			require.NoError(t, w.Stop(ctx))
		}
	})

	t.Run("latency from an append to its wakeup", func(t *testing.T) {
		d, _ := cw.driver(t, "rheo-wakeups-latency", 0)
		streams := cw.streamsOn(t, d, "latency")
		names := make([]string, 0, len(streams))
		wakes := map[string]<-chan driver.Wakeup{}
		for node, stream := range streams {
			wake, stop := d.Wakeups(stream)
			defer stop()
			wakes[stream] = wake
			names = append(names, stream)
			cw.waitListening(t, node, "rheo-wakeups-latency", 1)
		}
		const appends = 200
		measure := func(inTx bool) (wakeup, call, after []time.Duration) {
			for i := range appends {
				stream := names[i%len(names)]
				start := time.Now()
				var seq int64
				if inTx {
					require.NoError(t, d.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
						e, err := tx.Append(ctx, stream, json.RawMessage(`{}`), nil)
						seq = e.Sequence
						return err
					}))
				} else {
					e, err := d.Append(ctx, stream, json.RawMessage(`{}`), nil)
					require.NoError(t, err)
					seq = e.Sequence
				}
				call = append(call, time.Since(start))
				receiveSequence(t, wakes[stream], stream, seq)
				wakeup = append(wakeup, time.Since(start))
				after = append(after, wakeup[i]-call[i])
			}
			return wakeup, call, after
		}
		for _, inTx := range []bool{false, true} {
			wakeup, call, after := measure(inTx)
			how := "delegated to the workers"
			if inTx {
				how = "in a transaction (on the coordinator)"
			}
			t.Logf("Citus wakeup latency over %d appends %s: from the call to the wakeup p50 %s p99 %s; "+
				"the call itself p50 %s p99 %s; from its return to the wakeup p50 %s p99 %s",
				appends, how, percentile(wakeup, 50), percentile(wakeup, 99), percentile(call, 50), percentile(call, 99),
				percentile(after, 50), percentile(after, 99))
		}
	})
}

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p+99)/100 - 1
	return strings.TrimSpace(s[max(i, 0)].Round(10 * time.Microsecond).String())
}
