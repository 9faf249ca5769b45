package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/migrate"
)

// workloadCitus runs Rheo on the single server beside Rheo on a Citus
// cluster (--citus-url, --citus-workers), only when --workloads names it:
// bench/citus-cluster.sh starts a cluster on this machine.
const workloadCitus = "citus"

// citusSizes are the flags of the citus workload.
type citusSizes struct {
	url     string     // the coordinator, connected to an administrative database
	workers stringAddr // the workers' host:port, as the coordinator knows them
	calls   int        // timed calls of each latency figure
}

// stringAddr is a flag of comma-separated host:port addresses.
type stringAddr []string

func (l *stringAddr) String() string { return strings.Join(*l, ",") }

func (l *stringAddr) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if _, _, err := net.SplitHostPort(f); err != nil {
			return fmt.Errorf("%q is not host:port", f)
		}
		*l = append(*l, f)
	}
	return nil
}

func (s *citusSizes) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.url, "citus-url", "", "the citus workload's coordinator `URL` (an administrative database, as --database-url)")
	fs.Var(&s.workers, "citus-workers", "the citus workload's workers, `host:port,...` as the coordinator reaches them")
	fs.IntVar(&s.calls, "citus-calls", 500, "timed calls of each fetch and settle latency figure of the citus workload")
}

// citusQuick are the citus workload's sizes under --quick.
var citusQuick = map[string]string{"citus-calls": "50"}

// cluster is the Citus cluster of the citus workload: it creates a
// database on every node for each run and drops it after.
type cluster struct {
	coordinator *url.URL
	workers     []string
}

func newCluster(s citusSizes) (*cluster, error) {
	if s.url == "" || len(s.workers) == 0 {
		return nil, errors.New("the citus workload needs --citus-url and --citus-workers (bench/citus-cluster.sh start prints them)")
	}
	u, err := url.Parse(s.url)
	if err != nil {
		return nil, fmt.Errorf("--citus-url: %w", err)
	}
	return &cluster{coordinator: u, workers: s.workers}, nil
}

// nodeURL is the URL of database name on the node at addr ("" for the
// coordinator).
func (c *cluster) nodeURL(addr, name string) string {
	u := *c.coordinator
	if addr != "" {
		u.Host = addr
	}
	u.Path = "/" + name
	return u.String()
}

func (c *cluster) adminURL(addr string) string {
	return c.nodeURL(addr, strings.TrimPrefix(c.coordinator.Path, "/"))
}

func execOn(ctx context.Context, dbURL string, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(dbURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// withRheo runs f on a fresh database of the cluster with Rheo installed
// distributed, and drops it on every node after.
func (c *cluster) withRheo(ctx context.Context, f func(s *rheoSystem) error) (err error) {
	name := randomName("bench_citus")
	nodes := append([]string{""}, c.workers...)
	defer func() {
		for _, addr := range nodes {
			derr := execOn(context.WithoutCancel(ctx), c.adminURL(addr),
				"DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			err = errors.Join(err, derr)
		}
	}()
	for _, addr := range nodes {
		if err := execOn(ctx, c.adminURL(addr), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
		if err := execOn(ctx, c.nodeURL(addr, name), "CREATE EXTENSION citus"); err != nil {
			return err
		}
	}
	conn, err := pgx.Connect(ctx, c.nodeURL("", name))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	port, _ := strconv.Atoi(c.coordinator.Port())
	if _, err := conn.Exec(ctx, `SELECT citus_set_coordinator_host($1, $2)`, c.coordinator.Hostname(), port); err != nil {
		return err
	}
	for _, w := range c.workers {
		host, p, _ := net.SplitHostPort(w)
		port, _ := strconv.Atoi(p)
		if _, err := conn.Exec(ctx, `SELECT citus_add_node($1, $2)`, host, port); err != nil {
			return fmt.Errorf("add worker %s: %w", w, err)
		}
	}
	if err := migrate.Postgres(ctx, conn, nil); err != nil {
		return fmt.Errorf("install Rheo on the cluster: %w", err)
	}
	config, err := pgxpool.ParseConfig(c.nodeURL("", name))
	if err != nil {
		return err
	}
	config.MaxConns = poolConns
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return err
	}
	defer pool.Close()
	s := newRheo(&database{name: name, url: c.nodeURL("", name), pool: pool})
	defer s.close()
	return f(s)
}

// citusMeasurement measures Rheo on the single server and on the
// cluster in each round: append b=1000, drain c=64, the latency of
// single fetch and ack calls, and from append to handler at 1,000/s
// (wakeups included); on the cluster also append and drain on two
// streams held by two workers at once. Once, the report lists what each
// call sends to the nodes.
func (c *config) citusMeasurement(report *textReport) measurement {
	var once sync.Once
	return measurement{
		label: "citus",
		rheo: func(ctx context.Context) ([]sample, error) {
			cl, err := newCluster(c.citus)
			if err != nil {
				return nil, err
			}
			var samples []sample
			err = c.srv.withRheo(ctx, func(s *rheoSystem) error {
				got, err := c.citusRound(ctx, s, "single")
				samples = append(samples, got...)
				return err
			})
			if err != nil {
				return samples, err
			}
			err = cl.withRheo(ctx, func(s *rheoSystem) error {
				got, err := c.citusRound(ctx, s, "citus")
				samples = append(samples, got...)
				if err != nil {
					return err
				}
				got, err = c.twoWorkers(ctx, s)
				samples = append(samples, got...)
				if err != nil {
					return err
				}
				var text string
				once.Do(func() { text, err = remoteCommands(ctx, s) })
				if text != "" {
					report.add("citus: what each call sends to the nodes", text)
				}
				return err
			})
			return samples, err
		},
	}
}

// citusRound is one round of the figures measured on both installs,
// named for the install.
func (c *config) citusRound(ctx context.Context, s *rheoSystem, install string) ([]sample, error) {
	var samples []sample
	d, err := s.appendEvents(ctx, c.n, 1000, c.producers)
	if err != nil {
		return samples, fmt.Errorf("%s append: %w", install, err)
	}
	samples = append(samples, sample{install + " append b=1000", "events/s", perSecond(c.n, d)})
	n := c.drainEvents(64)
	if d, err = s.drain(ctx, n, 64); err != nil {
		return samples, fmt.Errorf("%s drain: %w", install, err)
	}
	samples = append(samples, sample{install + " drain c=64", "events/s", perSecond(n, d)})
	fetches, acks, err := callLatency(ctx, s, c.citus.calls)
	if err != nil {
		return samples, fmt.Errorf("%s call latency: %w", install, err)
	}
	samples = append(samples,
		sample{install + " fetch p50", "ms", millis(percentile(fetches, 50))},
		sample{install + " fetch p99", "ms", millis(percentile(fetches, 99))},
		sample{install + " ack p50", "ms", millis(percentile(acks, 50))},
		sample{install + " ack p99", "ms", millis(percentile(acks, 99))})
	delays, err := s.latency(ctx, 1000, c.latencyDuration, 1, 64)
	if err != nil {
		return samples, fmt.Errorf("%s latency: %w", install, err)
	}
	slices.Sort(delays)
	samples = append(samples,
		sample{install + " append to handler 1000/s p50", "ms", millis(percentile(delays, 50))},
		sample{install + " append to handler 1000/s p99", "ms", millis(percentile(delays, 99))})
	return samples, nil
}

// callLatency times calls single fetches of one event and as many acks,
// one after the other, on a stream holding that many events.
func callLatency(ctx context.Context, s *rheoSystem, calls int) (fetches, acks []time.Duration, err error) {
	stream, err := s.stream(ctx, 1)
	if err != nil {
		return nil, nil, err
	}
	if err := s.appendAll(ctx, stream, calls); err != nil {
		return nil, nil, err
	}
	if err := s.drv.CreateGroup(ctx, stream, "calls", nil); err != nil {
		return nil, nil, err
	}
	for range calls {
		start := time.Now()
		leases, err := s.drv.Fetch(ctx, stream, "calls", &rheo.FetchOptions{MaxCount: 1})
		if err != nil {
			return nil, nil, err
		}
		fetches = append(fetches, time.Since(start))
		if len(leases) != 1 {
			return nil, nil, fmt.Errorf("a fetch returned %d leases, want 1", len(leases))
		}
		start = time.Now()
		if err := s.drv.Ack(ctx, leases[0].LeaseID); err != nil {
			return nil, nil, err
		}
		acks = append(acks, time.Since(start))
	}
	slices.Sort(fetches)
	slices.Sort(acks)
	return fetches, acks, nil
}

// twoWorkers appends to and then drains two streams held by different
// workers at once, and reports the total rates.
func (c *config) twoWorkers(ctx context.Context, s *rheoSystem) ([]sample, error) {
	streams, err := streamsOnTwoNodes(ctx, s)
	if err != nil {
		return nil, err
	}
	both := func(f func(stream string) error) (time.Duration, error) {
		start := time.Now()
		errs := make([]error, len(streams))
		var wg sync.WaitGroup
		for i, stream := range streams {
			wg.Go(func() { errs[i] = f(stream) })
		}
		wg.Wait()
		return time.Since(start), errors.Join(errs...)
	}
	d, err := both(func(stream string) error { return s.appendAll(ctx, stream, c.n) })
	if err != nil {
		return nil, err
	}
	samples := []sample{{"citus two streams on two workers: append b=1000 total", "events/s", perSecond(2*c.n, d)}}
	for _, stream := range streams {
		if err := s.drv.CreateGroup(ctx, stream, "drain", nil); err != nil {
			return samples, err
		}
	}
	n := c.drainEvents(64)
	d, err = both(func(stream string) error {
		_, err := s.consume(ctx, stream, "drain", n, 64)
		return err
	})
	if err != nil {
		return samples, err
	}
	return append(samples, sample{"citus two streams on two workers: drain c=64 each, total", "events/s", perSecond(2*n, d)}), nil
}

// streamsOnTwoNodes creates streams until two of them are held by
// different nodes, and returns those two.
func streamsOnTwoNodes(ctx context.Context, s *rheoSystem) ([]string, error) {
	byNode := map[string]string{}
	for range 64 {
		stream, err := s.stream(ctx, 1)
		if err != nil {
			return nil, err
		}
		var node string
		if err := s.db.pool.QueryRow(ctx, `SELECT n.nodename || ':' || n.nodeport
  FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
 WHERE p.shardid = get_shard_id_for_distribution_column('rheo.events', $1::text)`, stream).Scan(&node); err != nil {
			return nil, err
		}
		if _, ok := byNode[node]; !ok {
			byNode[node] = stream
		}
		if len(byNode) == 2 {
			return slices.Collect(func(yield func(string) bool) {
				for _, v := range byNode {
					if !yield(v) {
						return
					}
				}
			}), nil
		}
	}
	return nil, errors.New("64 streams all landed on one node")
}

// remoteCommands runs each Rheo call once on a connection that has Citus
// log the commands it sends to other nodes, and tabulates them: how many
// commands each call sent, to how many nodes.
func remoteCommands(ctx context.Context, s *rheoSystem) (string, error) {
	stream, err := s.stream(ctx, 4)
	if err != nil {
		return "", err
	}
	if err := s.appendAll(ctx, stream, 100); err != nil {
		return "", err
	}
	if err := s.drv.CreateGroup(ctx, stream, "g", nil); err != nil {
		return "", err
	}
	var mu sync.Mutex
	var commands []string // "node\tcommand"
	config := s.db.pool.Config().ConnConfig.Copy()
	config.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if !strings.HasPrefix(n.Message, "issuing ") {
			return
		}
		node := n.Detail
		if i := strings.Index(node, "@"); i >= 0 {
			node = node[i+1:]
		}
		node, _, _ = strings.Cut(node, " ")
		mu.Lock()
		commands = append(commands, node+"\t"+strings.TrimPrefix(n.Message, "issuing "))
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SET citus.log_remote_commands = on; SET client_min_messages = log`); err != nil {
		return "", err
	}
	var lease string
	calls := []struct{ name, sql string }{
		{"append", `SELECT sequence FROM rheo.append($1, '{}')`},
		{"append_batch of 100", `SELECT count(*) FROM rheo.append_batch($1, (SELECT jsonb_agg('{}'::jsonb) FROM generate_series(1, 100)))`},
		{"fetch of 10", `SELECT min(lease_id::text) FROM rheo.fetch($1, 'g', max_count => 10)`},
		{"ack", `SELECT rheo.ack($1::uuid)`},
		{"lag", `SELECT sum(lag) FROM rheo.lag($1, 'g')`},
		{"group_info", `SELECT count(*) FROM rheo.group_info($1, 'g')`},
		{"stream_info", `SELECT count(*) FROM rheo.stream_info($1)`},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s %9s %6s  %s\n", "call", "commands", "nodes", "first command")
	for _, call := range calls {
		mu.Lock()
		commands = nil
		mu.Unlock()
		args := []any{stream}
		if call.name == "ack" {
			args = []any{lease}
		}
		var out any
		if err := conn.QueryRow(ctx, call.sql, args...).Scan(&out); err != nil {
			return "", fmt.Errorf("%s: %w", call.name, err)
		}
		if call.name == "fetch of 10" {
			lease, _ = out.(string)
		}
		mu.Lock()
		nodes := map[string]bool{}
		first := ""
		for i, c := range commands {
			node, command, _ := strings.Cut(c, "\t")
			nodes[node] = true
			if i == 0 {
				first = command
			}
		}
		if len(first) > 60 {
			first = first[:60] + "…"
		}
		fmt.Fprintf(&b, "%-22s %9d %6d  %s\n", call.name, len(commands), len(nodes), first)
		mu.Unlock()
	}
	return b.String(), nil
}
