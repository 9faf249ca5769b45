package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/redis"
)

// BenchmarkDriver measures the driver's hot paths with the conformance
// harness on each deployment:
// go test -run '^$' -bench BenchmarkDriver ./driver/redis
func BenchmarkDriver(b *testing.B) {
	for _, dep := range deployments {
		b.Run(dep.name, func(b *testing.B) {
			drivertest.Benchmark(b, harness(dep.url(b)))
		})
	}
}

// uniqueStream is a stream name no other test of the run uses.
func uniqueStream(prefix string) string { return prefix + "-" + uuid.NewString()[:8] }

func TestDriver(t *testing.T) {
	for _, dep := range deployments {
		t.Run(dep.name, func(t *testing.T) {
			url := dep.url(t)
			open := func(t *testing.T, clock driver.Clock) *redis.Driver {
				d, err := redis.Open(context.Background(), url, &redis.Options{Clock: clock})
				require.NoError(t, err)
				t.Cleanup(func() { _ = d.Close() })
				return d
			}

			t.Run("connect.Open opens the URL once the package is imported", func(t *testing.T) {
				ctx := context.Background()
				clock := drivertest.NewClock()
				d, err := connect.Open(ctx, url, &connect.Options{Clock: clock, Migrate: true})
				require.NoError(t, err)
				t.Cleanup(func() { _ = d.Close() })
				s := uniqueStream("connect")
				require.NoError(t, d.CreateStream(ctx, s, 2))
				ev, err := d.Append(ctx, s, json.RawMessage(`{"type": "t"}`), nil)
				require.NoError(t, err)
				require.True(t, clock.Now().Equal(ev.TS), "the clock of connect.Options is the driver's")
			})

			t.Run("a lease whose entry left the stream behind Rheo's back is receipt_mismatch", func(t *testing.T) {
				ctx := context.Background()
				d := open(t, drivertest.NewClock())
				s := uniqueStream("receipt")
				require.NoError(t, d.CreateStream(ctx, s, 1))
				require.NoError(t, d.CreateGroup(ctx, s, "g", nil))
				_, err := d.Append(ctx, s, json.RawMessage(`{"n": 1}`), nil)
				require.NoError(t, err)
				leases, err := d.Fetch(ctx, s, "g", nil)
				require.NoError(t, err)
				require.Len(t, leases, 1)
				// An operator deletes the entry with XDEL: the lease is
				// still held, but its receipt names an entry that is gone.
				require.NoError(t, d.Client().XDel(ctx, "rheo:{"+s+"}:e:0", "1-0").Err())
				require.ErrorIs(t, d.Ack(ctx, leases[0].LeaseID), rheo.ErrReceiptMismatch)
				results, err := d.AckBatch(ctx, []string{leases[0].LeaseID})
				require.NoError(t, err)
				require.False(t, results[0].OK)
			})

			t.Run("a batch ack tells a trimmed entry in its partition and acks the rest", func(t *testing.T) {
				ctx := context.Background()
				d := open(t, drivertest.NewClock())
				s := uniqueStream("trimmed")
				require.NoError(t, d.CreateStream(ctx, s, 2))
				require.NoError(t, d.CreateGroup(ctx, s, "g", nil))
				for _, p := range []int{0, 0, 1} {
					_, err := d.Append(ctx, s, json.RawMessage(`{}`), &rheo.AppendOptions{Partition: &p})
					require.NoError(t, err)
				}
				leases, err := d.Fetch(ctx, s, "g", &rheo.FetchOptions{MaxCount: 3})
				require.NoError(t, err)
				require.Len(t, leases, 3)
				ids := map[[2]int64]string{}
				for _, l := range leases {
					ids[[2]int64{int64(l.Event.Partition), l.Event.Sequence}] = l.LeaseID
				}
				// An operator trims partition 0's first entry with XTRIM:
				// the low watermark does not move, the partition has a hole.
				require.NoError(t, d.Client().XTrimMinID(ctx, "rheo:{"+s+"}:e:0", "2-0").Err())
				batch := []string{ids[[2]int64{0, 1}], ids[[2]int64{0, 2}], ids[[2]int64{1, 1}]}
				results, err := d.AckBatch(ctx, batch)
				require.NoError(t, err)
				require.Equal(t, []bool{false, true, true}, []bool{results[0].OK, results[1].OK, results[2].OK})
				require.ErrorIs(t, d.Ack(ctx, batch[0]), rheo.ErrReceiptMismatch)
				require.ErrorIs(t, d.Ack(ctx, batch[1]), rheo.ErrStaleLease)
			})

			t.Run("lease ids are version 8 uuids carrying the stream's number", func(t *testing.T) {
				ctx := context.Background()
				d := open(t, drivertest.NewClock())
				s := uniqueStream("ids")
				require.NoError(t, d.CreateStream(ctx, s, 1))
				require.NoError(t, d.CreateGroup(ctx, s, "g", nil))
				_, err := d.AppendBatch(ctx, s, []rheo.BatchItem{{Payload: json.RawMessage(`{}`)}, {Payload: json.RawMessage(`{}`)}}, nil)
				require.NoError(t, err)
				leases, err := d.Fetch(ctx, s, "g", nil)
				require.NoError(t, err)
				require.Len(t, leases, 2)
				a, b := uuid.MustParse(leases[0].LeaseID), uuid.MustParse(leases[1].LeaseID)
				require.Equal(t, uuid.Version(8), a.Version())
				require.Equal(t, a[:4], b[:4], "one stream, one number")
				require.NotEqual(t, a, b)
				// Another driver, which never saw the stream, settles it.
				other := open(t, drivertest.NewClock())
				require.NoError(t, other.Ack(ctx, leases[0].LeaseID))
				// A numbers' map that lost the stream's number is repaired
				// by the next fetch of a driver new to the stream.
				num := fmt.Sprint(uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]))
				require.NoError(t, d.Client().HDel(ctx, "rheo:{rheo}:sids", num).Err())
				_, err = d.Append(ctx, s, json.RawMessage(`{}`), nil)
				require.NoError(t, err)
				third := open(t, drivertest.NewClock())
				more, err := third.Fetch(ctx, s, "g", nil)
				require.NoError(t, err)
				require.Len(t, more, 1)
				fourth := open(t, drivertest.NewClock())
				require.NoError(t, fourth.Ack(ctx, more[0].LeaseID))
				require.NoError(t, fourth.Ack(ctx, leases[1].LeaseID))
			})

			t.Run("an ack batch settles leases of several streams, on their own slots", func(t *testing.T) {
				ctx := context.Background()
				d := open(t, drivertest.NewClock())
				var ids []string
				for range 6 {
					s := uniqueStream("batch")
					require.NoError(t, d.CreateStream(ctx, s, 1))
					require.NoError(t, d.CreateGroup(ctx, s, "g", nil))
					_, err := d.Append(ctx, s, json.RawMessage(`{}`), nil)
					require.NoError(t, err)
					leases, err := d.Fetch(ctx, s, "g", nil)
					require.NoError(t, err)
					require.Len(t, leases, 1)
					ids = append(ids, leases[0].LeaseID)
				}
				results, err := d.AckBatch(ctx, append(ids, ids[2]))
				require.NoError(t, err)
				for i, r := range results {
					require.Equal(t, i < len(ids), r.OK, "lease %d", i)
				}
			})

			t.Run("groups whose names share a prefix up to a colon keep apart", func(t *testing.T) {
				ctx := context.Background()
				d := open(t, drivertest.NewClock())
				s := uniqueStream("names")
				require.NoError(t, d.CreateStream(ctx, s, 1))
				require.NoError(t, d.CreateGroup(ctx, s, "a", nil))
				require.NoError(t, d.CreateGroup(ctx, s, "a:cur", nil))
				_, err := d.Append(ctx, s, json.RawMessage(`{}`), nil)
				require.NoError(t, err)
				leases, err := d.Fetch(ctx, s, "a:cur", nil)
				require.NoError(t, err)
				require.Len(t, leases, 1)
				require.NoError(t, d.Ack(ctx, leases[0].LeaseID))
				lag, err := d.Lag(ctx, s, "a", nil)
				require.NoError(t, err)
				require.Equal(t, int64(1), lag.Total, "group a is untouched by a:cur")
				leases, err = d.Fetch(ctx, s, "a", nil)
				require.NoError(t, err)
				require.Len(t, leases, 1)
			})

			t.Run("creating a stream anew lists it again when the list lost it", func(t *testing.T) {
				ctx := context.Background()
				d := open(t, drivertest.NewClock())
				s := uniqueStream("listed")
				require.NoError(t, d.CreateStream(ctx, s, 1))
				require.NoError(t, d.Client().ZRem(ctx, "rheo:{rheo}:streams", s).Err())
				require.ErrorIs(t, d.CreateStream(ctx, s, 1), rheo.ErrAlreadyExists)
				streams, err := d.ListStreams(ctx)
				require.NoError(t, err)
				require.True(t, slices.ContainsFunc(streams, func(x rheo.StreamSummary) bool { return x.Name == s }))
			})

			t.Run("an append by another driver wakes a subscriber", func(t *testing.T) {
				ctx := context.Background()
				sub := open(t, drivertest.NewClock())
				producer := open(t, drivertest.NewClock())
				s := uniqueStream("wake")
				require.NoError(t, producer.CreateStream(ctx, s, 2))
				ch, stop := sub.Wakeups(s)
				defer stop()
				// Wakeups returns once the server confirmed the
				// subscription: the first append after it is hinted.
				p := 1
				ev, err := producer.Append(ctx, s, json.RawMessage(`{}`), &rheo.AppendOptions{Partition: &p})
				require.NoError(t, err)
				select {
				case w := <-ch:
					require.Equal(t, driver.Wakeup{Stream: s, Partition: 1, Sequence: ev.Sequence}, w)
				case <-time.After(10 * time.Second):
					require.FailNow(t, "no wakeup arrived")
				}
			})

			t.Run("a closed driver ends its subscriptions and fails backend_unavailable", func(t *testing.T) {
				d, err := redis.Open(context.Background(), url, nil)
				require.NoError(t, err)
				ch, _ := d.Wakeups("closed")
				require.NoError(t, d.Close())
				_, open := <-ch
				require.False(t, open)
				err = d.Ping(context.Background())
				require.True(t, errors.Is(err, rheo.ErrBackendUnavailable), "got %v", err)
			})
		})
	}
}

func TestOpenURLs(t *testing.T) {
	for _, url := range []string{
		"mysql://localhost/",
		"redis+cluster:///",
		"redis://:pw@host:notaport/0",
		"redis",
	} {
		t.Run(fmt.Sprintf("%q is invalid_argument", url), func(t *testing.T) {
			_, err := redis.Open(context.Background(), url, nil)
			require.ErrorIs(t, err, rheo.ErrInvalidArgument)
			require.NotContains(t, err.Error(), "pw")
		})
	}
	t.Run("every scheme is registered with connect", func(t *testing.T) {
		require.Subset(t, connect.Schemes(), []string{"redis", "rediss", "redis+cluster", "rediss+cluster"})
	})
}
