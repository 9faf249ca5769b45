package postgres

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// Wakeups on Citus (docs/citus.md, "Wakeups"). An append called outside
// a transaction runs whole on the worker that holds its stream, and so
// does its NOTIFY: a listener on the coordinator never hears it. So when
// the database the listener connects to has Rheo installed distributed,
// the listener reads, on its own connection and between notifications,
// which nodes hold the shards of the streams it has subscribers for, and
// keeps one more LISTEN connection to each of them, made from its own
// connection settings with the node's host and port. It reads the
// placements again every placementEvery (a shard moved by
// citus_move_shard_placement or a rebalance notifies on its new node
// from then on), at once when a subscription names a stream it has not
// placed, and when a node's connection is lost. Consumers poll as well:
// what is sent between a move and the next reading only waits for the
// next poll.

// citusPlacementEvery is how often the listener reads the placements of
// the subscribed streams again on Citus.
const citusPlacementEvery = 5 * time.Second

// connectListener opens a LISTEN connection with config. Its waits are
// ended through a deadline on the socket, never by a cancel request,
// which could reach the server after the wait and cancel the next
// statement: on Citus the listener ends waits to run statements.
func connectListener(ctx context.Context, config *pgx.ConnConfig) (*pgx.Conn, error) {
	c := config.Copy()
	c.BuildContextWatcherHandler = func(pgConn *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pgConn.Conn()}
	}
	return pgx.ConnectConfig(ctx, c)
}

// The statements of the Citus listener run in the simple protocol,
// which leaves no prepared statement on the connection.
const (
	hasCitusSQL = `SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus')`
	// Run only where citus is: the catalog exists there.
	distributedSQL = `SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition
		WHERE logicalrelid = pg_catalog.to_regclass('rheo.events'))`
	// The nodes holding the shards of the streams ($1), but the one the
	// connection is on, whose notifications it hears already.
	placementsSQL = `SELECT DISTINCT n.nodename, n.nodeport
		  FROM unnest($1::text[]) AS s(stream)
		  JOIN pg_catalog.pg_dist_placement p
		    ON p.shardid = pg_catalog.get_shard_id_for_distribution_column('rheo.events', s.stream)
		  JOIN pg_catalog.pg_dist_node n ON n.groupid = p.groupid
		 WHERE n.noderole = 'primary' AND n.isactive
		   AND n.groupid <> (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)`
)

// detectCitus tells whether Rheo is installed distributed in the
// database conn is connected to. A failed statement on a connection that
// is still open is logged, and the listener listens on conn alone.
func (l *listener) detectCitus(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var citus bool
	err := conn.QueryRow(ctx, hasCitusSQL, pgx.QueryExecModeSimpleProtocol).Scan(&citus)
	if err == nil && citus {
		err = conn.QueryRow(ctx, distributedSQL, pgx.QueryExecModeSimpleProtocol).Scan(&citus)
	}
	if err != nil {
		if conn.IsClosed() || ctx.Err() != nil {
			return false, err
		}
		l.logger.WarnContext(ctx, "rheo wakeups: could not tell whether Rheo is distributed on Citus; "+
			"listening on the one connection", "error", err)
		return false, nil
	}
	if citus {
		l.mu.Lock()
		l.located = nil
		l.relocate = true
		l.mu.Unlock()
	}
	return citus, nil
}

// requestLocate asks the coordinator connection to read the placements
// at once, ending its wait. l.mu must be held.
func (l *listener) requestLocate() {
	l.relocate = true
	if l.interrupt != nil {
		l.interrupt()
	}
}

// untilLocate returns the context of the coordinator connection's next
// wait: it ends with ctx, when the placements are due, or when
// requestLocate is called. Call the returned function once the wait is
// over.
func (l *listener) untilLocate(ctx context.Context) (context.Context, context.CancelFunc) {
	waitCtx, cancel := context.WithDeadline(ctx, l.nextLocate)
	l.mu.Lock()
	if l.relocate {
		cancel()
	}
	l.interrupt = cancel
	l.mu.Unlock()
	return waitCtx, func() {
		l.mu.Lock()
		l.interrupt = nil
		l.mu.Unlock()
		cancel()
	}
}

// locateIfDue reads, when due, which nodes hold the subscribed streams
// and makes nodes listen on them. A failed reading on a connection that
// is still open keeps the nodes as they are until the next one.
func (l *listener) locateIfDue(ctx context.Context, conn *pgx.Conn, nodes *nodeSet) error {
	l.mu.Lock()
	if !l.relocate && time.Now().Before(l.nextLocate) {
		l.mu.Unlock()
		return nil
	}
	l.relocate = false
	streams := make([]string, 0, len(l.subs))
	l.located = make(map[string]struct{}, len(l.subs))
	for stream := range l.subs {
		streams = append(streams, stream)
		l.located[stream] = struct{}{}
	}
	l.mu.Unlock()
	l.nextLocate = time.Now().Add(l.placementEvery)
	addrs, err := placements(ctx, conn, streams)
	if err != nil {
		if conn.IsClosed() || ctx.Err() != nil {
			return err
		}
		if !l.locateFailing {
			l.logger.WarnContext(ctx, "rheo wakeups: could not read where the streams' shards are on Citus; "+
				"appends on the nodes not listened to are found by polling", "error", err, "retry_in", l.placementEvery)
		}
		l.locateFailing = true
		return nil
	}
	l.locateFailing = false
	nodes.update(addrs)
	return nil
}

// placements returns the nodes other than conn's that hold the shards
// of streams.
func placements(ctx context.Context, conn *pgx.Conn, streams []string) ([]nodeAddr, error) {
	if len(streams) == 0 {
		return nil, nil
	}
	rows, err := conn.Query(ctx, placementsSQL, pgx.QueryExecModeSimpleProtocol, streams)
	if err != nil {
		return nil, err
	}
	var addrs []nodeAddr
	var a nodeAddr
	var port int
	_, err = pgx.ForEachRow(rows, []any{&a.host, &port}, func() error {
		a.port = uint16(port)
		addrs = append(addrs, a)
		return nil
	})
	return addrs, err
}

// nodeAddr is a node's address as Citus knows it (pg_dist_node).
type nodeAddr struct {
	host string
	port uint16
}

func (a nodeAddr) String() string { return net.JoinHostPort(a.host, strconv.Itoa(int(a.port))) }

// nodeSet is the LISTEN connections to the Citus nodes, other than the
// coordinator connection's, that hold subscribed streams. Only the
// listener's connection loop uses it.
type nodeSet struct {
	l     *listener
	conns map[nodeAddr]context.CancelFunc
	wg    sync.WaitGroup
}

func newNodeSet(l *listener) *nodeSet {
	return &nodeSet{l: l, conns: map[nodeAddr]context.CancelFunc{}}
}

// update listens on the nodes of addrs and stops listening on the others.
func (s *nodeSet) update(addrs []nodeAddr) {
	want := make(map[nodeAddr]struct{}, len(addrs))
	for _, a := range addrs {
		want[a] = struct{}{}
	}
	for a, stop := range s.conns {
		if _, ok := want[a]; !ok {
			stop()
			delete(s.conns, a)
		}
	}
	for a := range want {
		if _, ok := s.conns[a]; ok {
			continue
		}
		ctx, stop := context.WithCancel(context.Background())
		s.conns[a] = stop
		s.wg.Go(func() { s.l.runNode(ctx, a) })
	}
}

// close stops every node connection and waits for them.
func (s *nodeSet) close() {
	for a, stop := range s.conns {
		stop()
		delete(s.conns, a)
	}
	s.wg.Wait()
}

// runNode keeps a LISTEN connection to the node at a until ctx ends,
// reconnecting with backoff when it drops and asking for the placements
// to be read again: the node may no longer hold the streams.
func (l *listener) runNode(ctx context.Context, a nodeAddr) {
	config := nodeConfig(l.config, a.host, a.port)
	keepListening(ctx, func() (bool, error) { return l.listenNode(ctx, config) }, func(err error, retryIn time.Duration) {
		l.logger.WarnContext(ctx, "rheo wakeups: listen connection to a Citus node lost",
			"node", a.String(), "error", err, "retry_in", retryIn)
		l.mu.Lock()
		l.requestLocate()
		l.mu.Unlock()
	})
}

// listenNode connects with config, listens and publishes notifications
// until the connection fails or ctx ends.
func (l *listener) listenNode(ctx context.Context, config *pgx.ConnConfig) (listened bool, err error) {
	conn, err := connectListener(ctx, config)
	if err != nil {
		return false, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), closeConnTimeout)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return false, err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		l.receive(ctx, n.Payload)
	}
}

// nodeConfig is config with the host and port of another node: the same
// database, user, password, TLS settings and runtime parameters. TLS
// verifies the node's own name, and of config's fallbacks only those to
// config's own host and port (sslmode=prefer's or allow's other try) are
// kept, moved to the node.
func nodeConfig(config *pgx.ConnConfig, host string, port uint16) *pgx.ConnConfig {
	c := config.Copy()
	c.Host, c.Port = host, port
	if c.TLSConfig != nil && c.TLSConfig.ServerName != "" {
		c.TLSConfig.ServerName = host
	}
	fallbacks := c.Fallbacks[:0]
	for _, f := range c.Fallbacks {
		if f.Host != config.Host || f.Port != config.Port {
			continue
		}
		f.Host, f.Port = host, port
		if f.TLSConfig != nil && f.TLSConfig.ServerName != "" {
			f.TLSConfig.ServerName = host
		}
		fallbacks = append(fallbacks, f)
	}
	c.Fallbacks = fallbacks
	return c
}
