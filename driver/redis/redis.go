// Package redis is the Rheo driver for Redis Streams, on one Redis server
// or a Redis Cluster, built on github.com/redis/go-redis/v9.
//
// Importing the package registers it with connect.Open (a blank import is
// enough) for three URL schemes:
//
//	redis://[user:password@]host:port[/db][?options]     one server
//	rediss://…                                            one server over TLS
//	redis+cluster://[user:password@]h1:p1,h2:p2,…[?options]   a cluster by its seeds
//	rediss+cluster://…                                    a cluster over TLS
//
// The options are go-redis's (ParseURL, ParseClusterURL): dial_timeout,
// read_timeout, pool_size and the like.
//
// Each partition of a stream is a Redis Stream whose entry ids are the
// event sequences (<sequence>-0), contiguous from 1 and in commit order.
// A group's cursors, leases, attempts, due times, dead letters and
// frontier live in keys beside the stream's, and every operation that
// changes more than one key is one Lua script, so it is atomic. Every key
// of a stream carries the stream's name as its hash tag,
// rheo:{<stream>}:…, so all of them live in one slot and the scripts run
// on Redis Cluster unchanged. docs/redis.md describes the keys, the cost
// of each operation, and what Redis guarantees across a restart or a
// failover.
//
// Lease ids are version 8 UUIDs whose first 32 bits number the stream
// (numbers are handed out by create_stream from a counter of their own),
// followed by 64 bits drawn at random for each fetch and the lease's
// place in it, so that a settle, which presents its lease id alone,
// reaches the stream's slot in one call. Each lease also has a native receipt, the
// entry id and the delivery's attempt (Redis Streams' delivery count);
// a held lease whose receipt no longer matches its delivery is
// receipt_mismatch. Lease.Receipt equals Lease.LeaseID, as on every
// driver: the receipt is checked behind the lease id.
//
// Time: every time decision reads Options.Clock (driver.SystemClock by
// default, the process's clock, not the server's TIME), so tests pin it
// and processes whose clocks disagree disagree about leases too.
//
// Redis has no transaction a host could join: the driver does not
// implement driver.Transactor, and Capabilities.TransactionalSettle is
// false.
package redis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
)

func init() {
	connect.Register(func(ctx context.Context, url string, opts *connect.Options) (driver.Driver, error) {
		return Open(ctx, url, &Options{Clock: opts.Clock})
	}, "redis", "rediss", "redis+cluster", "rediss+cluster")
}

// Options configure a Driver. A nil *Options means all defaults.
type Options struct {
	// Clock is read once per operation for every time the driver stores
	// or compares: event timestamps, lease expiries, retry delays and
	// retention. Defaults to driver.SystemClock.
	Clock driver.Clock
}

// Driver runs Rheo operations against Redis. It implements driver.Driver
// and is safe for concurrent use.
type Driver struct {
	client  goredis.UniversalClient
	cluster bool
	owns    bool
	clock   driver.Clock
	wakeups *hub
	// names caches stream numbers to names; a number is never reused.
	names   sync.Map
	closing sync.Once
}

var _ driver.Driver = (*Driver)(nil)

// Open connects to the Redis server or cluster at url (see the package
// doc for the forms) and checks that it answers. Nothing is set up: the
// driver needs no schema, so connect's Migrate has nothing to do. The
// Driver owns the client and closes it in Close.
func Open(ctx context.Context, rawURL string, opts *Options) (*Driver, error) {
	client, cluster, err := newClient(rawURL)
	if err != nil {
		return nil, err
	}
	d := newDriver(client, cluster, opts)
	d.owns = true
	if err := d.Ping(ctx); err != nil {
		_ = client.Close()
		return nil, err
	}
	return d, nil
}

// New returns a Driver on a client the host made: a *goredis.Client or a
// *goredis.ClusterClient. Close leaves the client open. Give the client
// MaxRetries -1: a command retried after a lost connection may run twice,
// which the driver reports as ambiguous instead. opts may be nil.
func New(client goredis.UniversalClient, opts *Options) *Driver {
	_, cluster := client.(*goredis.ClusterClient)
	return newDriver(client, cluster, opts)
}

func newDriver(client goredis.UniversalClient, cluster bool, opts *Options) *Driver {
	if opts == nil {
		opts = &Options{}
	}
	d := &Driver{client: client, cluster: cluster, clock: opts.Clock}
	if d.clock == nil {
		d.clock = driver.SystemClock
	}
	d.wakeups = newHub(client)
	return d
}

// newClient makes the go-redis client of a URL. Commands are never
// retried by go-redis: a script whose connection broke may have run, and
// running it again could settle twice.
func newClient(rawURL string) (goredis.UniversalClient, bool, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, false, urlError("a Redis URL starts with redis://, rediss://, redis+cluster:// or rediss+cluster://")
	}
	switch strings.ToLower(scheme) {
	case "redis", "rediss":
		o, err := goredis.ParseURL(rawURL)
		if err != nil {
			return nil, false, urlError("it is not a valid Redis URL")
		}
		o.MaxRetries = -1
		return goredis.NewClient(o), false, nil
	case "redis+cluster", "rediss+cluster":
		base := strings.TrimSuffix(strings.ToLower(scheme), "+cluster")
		hostPart, query, _ := strings.Cut(rest, "?")
		hostPart, _, _ = strings.Cut(hostPart, "/")
		user := ""
		if at := strings.LastIndex(hostPart, "@"); at >= 0 {
			user, hostPart = hostPart[:at+1], hostPart[at+1:]
		}
		seeds := strings.Split(hostPart, ",")
		if hostPart == "" {
			return nil, false, urlError("a cluster URL names at least one seed host:port")
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, false, urlError("it is not a valid Redis URL")
		}
		for _, s := range seeds[1:] {
			q.Add("addr", s)
		}
		o, err := goredis.ParseClusterURL(fmt.Sprintf("%s://%s%s?%s", base, user, seeds[0], q.Encode()))
		if err != nil {
			return nil, false, urlError("it is not a valid Redis URL")
		}
		o.MaxRetries = -1
		return goredis.NewClusterClient(o), true, nil
	}
	return nil, false, urlError("the scheme is not one of redis, rediss, redis+cluster, rediss+cluster")
}

// urlError is Open's error for a URL it cannot use; it never repeats
// the URL, which may hold a password.
func urlError(reason string) error {
	return &connect.URLError{Err: errors.New(reason)}
}

// Client returns the go-redis client the Driver runs on.
func (d *Driver) Client() goredis.UniversalClient { return d.client }

// Ping checks that the server (on a cluster, every master) answers.
func (d *Driver) Ping(ctx context.Context) error {
	if c, ok := d.client.(*goredis.ClusterClient); ok {
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
			return m.Ping(ctx).Err()
		})
		return interpretError("ping", err, false)
	}
	return interpretError("ping", d.client.Ping(ctx).Err(), false)
}

// Capabilities declares what the Redis driver guarantees. Durable assumes
// a server with the append-only file on (docs/redis.md says what each
// appendfsync setting keeps); Redis has no transaction a host can join.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Durable:             true,
		Distributed:         true,
		Partitions:          true,
		ContiguousFrontier:  true,
		Replay:              true,
		Notifications:       true,
		TransactionalSettle: false,
	}
}

// Wakeups subscribes to appends to stream, by any process: the append
// script publishes a hint on the stream's channel, received on a pub/sub
// connection the Driver holds for the stream while it has subscribers.
// It returns once the server has confirmed the subscription (or after
// five seconds without an answer). Hints that find a subscriber's buffer
// full are dropped; consumers still poll. The returned function ends the
// subscription; Close ends all of them.
func (d *Driver) Wakeups(stream string) (<-chan driver.Wakeup, func()) {
	return d.wakeups.subscribe(stream)
}

// Close ends every Wakeups subscription and, when Open made the client,
// closes it. It is safe to call more than once.
func (d *Driver) Close() error {
	var err error
	d.closing.Do(func() {
		d.wakeups.close()
		if d.owns {
			err = interpretError("close", d.client.Close(), false)
		}
	})
	return err
}

// now reads the clock for one operation; a reading the driver cannot
// store is invalid_argument.
func (d *Driver) now() (timeArg, error) {
	t := d.clock.Now()
	if err := checkTime("clock", t); err != nil {
		return timeArg{}, err
	}
	return timeArg{t: t}, nil
}
