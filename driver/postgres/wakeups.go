package postgres

import (
	"context"
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
// subscribers.
type listener struct {
	config *pgx.ConnConfig
	logger *slog.Logger

	mu     sync.Mutex
	subs   map[string]map[chan driver.Wakeup]struct{}
	count  int                // subscriptions in subs
	stop   context.CancelFunc // stops the running connection loop; nil when none runs
	done   chan struct{}      // closed when the running loop has returned
	closed bool
	loops  sync.WaitGroup
}

func newListener(config *pgx.ConnConfig, logger *slog.Logger) *listener {
	return &listener{config: config, logger: logger, subs: map[string]map[chan driver.Wakeup]struct{}{}}
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
	if l.stop == nil {
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
	if l.count == 0 {
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
	backoff := minBackoff
	for {
		listened, err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = minBackoff
		}
		l.logger.WarnContext(ctx, "rheo wakeups: listen connection lost", "error", err, "retry_in", backoff)
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
func (l *listener) listen(ctx context.Context) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, l.config)
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
		var payload struct {
			Stream    string `json:"stream"`
			Partition int    `json:"partition"`
			Sequence  int64  `json:"sequence"`
		}
		if json.Unmarshal([]byte(n.Payload), &payload) != nil || payload.Stream == "" {
			continue
		}
		l.publish(driver.Wakeup{Stream: payload.Stream, Partition: payload.Partition, Sequence: payload.Sequence})
	}
}
