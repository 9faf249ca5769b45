package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo/driver"
)

// The channel the append functions notify, and the listener's pacing.
const (
	notifyChannel    = "rheo_events"
	wakeupBuffer     = 64
	minBackoff       = 100 * time.Millisecond
	maxBackoff       = 5 * time.Second
	closeConnTimeout = 5 * time.Second
)

// listener fans the notifications of one LISTEN connection out to the
// subscribers of each stream. The connection runs while there are
// subscribers. A listener without a config (poll-only) never connects:
// its subscriptions receive nothing until they end.
type listener struct {
	config *pgx.ConnConfig
	logger *slog.Logger
	check  *checker // nil when the check is off

	mu     sync.Mutex
	subs   map[string]map[chan driver.Wakeup]struct{}
	count  int                // subscriptions in subs
	stop   context.CancelFunc // stops the running connection loop; nil when none runs
	done   chan struct{}      // closed when the running loop has returned
	closed bool
	loops  sync.WaitGroup

	// On Citus (wakeups_citus.go): how often the placements of the
	// subscribed streams are read again, the streams the last reading
	// covered, whether a subscription or a lost node connection asks for
	// a reading now, and the cancel of the coordinator connection's
	// current wait, which such a request calls. nextLocate and
	// locateFailing belong to the connection loop alone.
	placementEvery time.Duration
	located        map[string]struct{}
	relocate       bool
	interrupt      context.CancelFunc
	nextLocate     time.Time
	locateFailing  bool
}

// newListener returns a listener that connects with config, or never
// connects when config is nil (poll-only).
func newListener(config *pgx.ConnConfig, logger *slog.Logger) *listener {
	return &listener{
		config: config, logger: logger, subs: map[string]map[chan driver.Wakeup]struct{}{},
		placementEvery: citusPlacementEvery,
	}
}

// checkWith makes the listener check, every `every` while it listens,
// that a notification sent with send reaches it (see checker). Call it
// before the first subscription.
func (l *listener) checkWith(every time.Duration, send func(ctx context.Context, payload string) error) {
	l.check = &checker{every: every, send: send, logger: l.logger}
}

// subscribe registers a buffered channel for stream, starting the
// connection loop for the first subscription. After close it returns a
// closed channel.
func (l *listener) subscribe(stream string) (<-chan driver.Wakeup, func()) {
	ch := make(chan driver.Wakeup, wakeupBuffer)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		close(ch)
		return ch, func() {}
	}
	if l.subs[stream] == nil {
		l.subs[stream] = map[chan driver.Wakeup]struct{}{}
	}
	l.subs[stream][ch] = struct{}{}
	l.count++
	if _, ok := l.located[stream]; !ok {
		l.requestLocate()
	}
	if l.stop == nil && l.config != nil {
		ctx, cancel := context.WithCancel(context.Background())
		l.stop, l.done = cancel, make(chan struct{})
		l.loops.Add(1)
		go l.run(ctx, l.done)
	}
	var once sync.Once
	return ch, func() { once.Do(func() { l.unsubscribe(stream, ch) }) }
}

// unsubscribe closes ch and, when it was the last subscription, stops the
// connection loop and waits for it.
func (l *listener) unsubscribe(stream string, ch chan driver.Wakeup) {
	l.mu.Lock()
	if _, ok := l.subs[stream][ch]; !ok {
		// close already ended every subscription.
		l.mu.Unlock()
		return
	}
	delete(l.subs[stream], ch)
	if len(l.subs[stream]) == 0 {
		delete(l.subs, stream)
	}
	close(ch)
	l.count--
	var done chan struct{}
	if l.count == 0 && l.stop != nil {
		l.stop()
		done = l.done
		l.stop, l.done = nil, nil
	}
	l.mu.Unlock()
	if done != nil {
		<-done
	}
}

// close ends every subscription and waits for the connection loops.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	if l.stop != nil {
		l.stop()
		l.stop, l.done = nil, nil
	}
	for stream, chans := range l.subs {
		for ch := range chans {
			close(ch)
		}
		delete(l.subs, stream)
	}
	l.count = 0
	l.mu.Unlock()
	l.loops.Wait()
}

// publish hands w to the stream's subscribers without blocking: a full
// buffer drops the hint.
func (l *listener) publish(w driver.Wakeup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.subs[w.Stream] {
		select {
		case ch <- w:
		default:
		}
	}
}

// run keeps a LISTEN connection until ctx ends, reconnecting with
// backoff when it drops.
func (l *listener) run(ctx context.Context, done chan struct{}) {
	defer l.loops.Done()
	defer close(done)
	nodes := newNodeSet(l)
	defer nodes.close()
	keepListening(ctx, func() (bool, error) { return l.listen(ctx, nodes) }, func(err error, retryIn time.Duration) {
		l.logger.WarnContext(ctx, "rheo wakeups: listen connection lost", "error", err, "retry_in", retryIn)
	})
}

// keepListening calls listen until ctx ends, waiting between calls with
// a backoff from minBackoff doubling to maxBackoff, back to minBackoff
// after a call that listened; lost is told of each failure and the wait
// before the next call.
func keepListening(ctx context.Context, listen func() (listened bool, err error), lost func(err error, retryIn time.Duration)) {
	backoff := minBackoff
	for {
		listened, err := listen()
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = minBackoff
		}
		lost(err, backoff)
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listen connects, listens and publishes notifications until the
// connection fails or ctx ends. listened tells whether LISTEN succeeded.
// On Citus it keeps nodes listening on the workers that hold the
// subscribed streams, reading their placements on this connection
// between notifications (wakeups_citus.go).
func (l *listener) listen(ctx context.Context, nodes *nodeSet) (listened bool, err error) {
	conn, err := connectListener(ctx, l.config)
	if err != nil {
		return false, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), closeConnTimeout)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	// Before LISTEN, so that a listener on a single server has LISTEN
	// for its last statement (pg_stat_activity.query).
	citus, err := l.detectCitus(ctx, conn)
	if err != nil {
		return false, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return false, err
	}
	if l.check != nil {
		checkCtx, stopChecks := context.WithCancel(ctx)
		checks := make(chan struct{})
		go func() {
			defer close(checks)
			l.check.run(checkCtx)
		}()
		defer func() {
			stopChecks()
			<-checks
		}()
	}
	for {
		if !citus {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return true, err
			}
			l.receive(ctx, n.Payload)
			continue
		}
		if err := l.locateIfDue(ctx, conn, nodes); err != nil {
			return true, err
		}
		waitCtx, cancel := l.untilLocate(ctx)
		n, err := conn.WaitForNotification(waitCtx)
		due := waitCtx.Err() != nil
		cancel()
		if n != nil {
			l.receive(ctx, n.Payload)
		}
		if err != nil && !(due && ctx.Err() == nil && !conn.IsClosed()) {
			return true, err
		}
		// Else the wait ended to read the placements again, on the same
		// connection.
	}
}

// receive publishes the wakeup that payload, a notification of
// rheo_events, names, and hands a check's token to the checker.
func (l *listener) receive(ctx context.Context, payload string) {
	var p struct {
		Stream    string `json:"stream"`
		Partition int    `json:"partition"`
		Sequence  int64  `json:"sequence"`
		Check     string `json:"rheo_check"`
	}
	if json.Unmarshal([]byte(payload), &p) != nil {
		return
	}
	if p.Check != "" {
		// A check, the listener's own or another's: never a wakeup.
		if l.check != nil {
			l.check.arrived(ctx, p.Check)
		}
		return
	}
	if p.Stream == "" {
		return
	}
	l.publish(driver.Wakeup{Stream: p.Stream, Partition: p.Partition, Sequence: p.Sequence})
}

// checker tells whether notifications reach the listener. Behind a
// pooler in transaction mode a LISTEN runs on a server connection that
// goes back to the pooler, which drops what the server then sends it:
// the listener hears nothing and no error says so. So, while the
// listener listens, the checker sends a notification through the
// driver's pool, the path appends take, and expects it back.
//
// The payload, {"rheo_check": "<random token>"}, has no stream: every
// listener ignores it as a wakeup, those of older versions included, and
// only the token of the check in flight counts, so a forged one proves
// nothing. A check that has not come back when the next is due is lost;
// the first loss after a success (or after the start) logs one warning,
// later ones only a debug record, and a check that comes back clears the
// state quietly.
type checker struct {
	every  time.Duration
	send   func(ctx context.Context, payload string) error
	logger *slog.Logger

	mu      sync.Mutex
	pending string // token of the check in flight; "" when none is
	lost    bool   // checks are being lost; the warning was logged
}

// run sends a check at once and then every c.every until ctx ends,
// judging each one before it sends the next.
func (c *checker) run(ctx context.Context) {
	c.mu.Lock()
	c.pending = "" // a check sent on an earlier connection proves nothing here
	c.mu.Unlock()
	for {
		c.sendOne(ctx)
		// Counted from the end of the send, so that a slow send leaves the
		// check its full time to come back.
		timer := time.NewTimer(c.every)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		c.judge(ctx)
	}
}

// sendOne sends a check with a fresh token. A check that cannot be sent
// (the pool is busy or down) is not judged.
func (c *checker) sendOne(ctx context.Context) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	c.mu.Lock()
	c.pending = token
	c.mu.Unlock()
	payload, _ := json.Marshal(map[string]string{"rheo_check": token})
	sendCtx, cancel := context.WithTimeout(ctx, c.every)
	defer cancel()
	if err := c.send(sendCtx, string(payload)); err != nil {
		c.mu.Lock()
		if c.pending == token {
			c.pending = ""
		}
		c.mu.Unlock()
		if ctx.Err() == nil {
			c.logger.DebugContext(ctx, "rheo wakeups: could not send a check notification", "error", err)
		}
	}
}

// judge counts the check in flight, if any, as lost.
func (c *checker) judge(ctx context.Context) {
	c.mu.Lock()
	missed := c.pending != ""
	warn := missed && !c.lost
	if missed {
		c.lost = true
	}
	c.mu.Unlock()
	switch {
	case warn:
		c.logger.WarnContext(ctx, "rheo wakeups: notifications do not reach the listener, so consumers see new events "+
			"only when they poll; behind a pooler in transaction mode (PgBouncer), where LISTEN cannot work and "+
			"disturbs the pooler's other connections, give the listener a direct connection to the server "+
			"(rheo_listen_url in the database URL, or postgres.Options.ListenConfig), or turn wakeups off "+
			"(rheo_poll_only=true, or postgres.Options.PollOnly); see docs/pgbouncer.md",
			"channel", notifyChannel, "waited", c.every)
	case missed:
		c.logger.DebugContext(ctx, "rheo wakeups: a check notification did not come back", "waited", c.every)
	}
}

// arrived records a check notification that came back.
func (c *checker) arrived(ctx context.Context, token string) {
	c.mu.Lock()
	if token != c.pending {
		// Another listener's check, a late one, or a forged one.
		c.mu.Unlock()
		return
	}
	c.pending = ""
	recovered := c.lost
	c.lost = false
	c.mu.Unlock()
	if recovered {
		c.logger.DebugContext(ctx, "rheo wakeups: notifications reach the listener again")
	}
}
