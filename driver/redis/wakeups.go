package redis

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rheo-go/rheo/driver"
)

// hub fans the append script's hints out to the Driver's subscribers.
// Each stream subscribed to has one pub/sub connection on its channel
// (rheo:{<stream>}:wake, whose messages are "<partition> <sequence>"),
// opened with its first subscription and closed with its last; go-redis
// reconnects it and subscribes again after a broken connection, and
// hints sent meanwhile are lost, as hints may be.
type hub struct {
	client  goredis.UniversalClient
	mu      sync.Mutex
	streams map[string]*streamSub
	closed  bool
}

// streamSub is one stream's pub/sub connection and subscribers. ps is
// set, outside the hub's lock, before ready is closed.
type streamSub struct {
	ps    *goredis.PubSub
	subs  map[chan driver.Wakeup]struct{}
	ready chan struct{}
	done  chan struct{}
}

// subscribeTimeout bounds how long a first subscription waits for the
// server to confirm it; past it, go-redis goes on trying.
const subscribeTimeout = 5 * time.Second

func newHub(client goredis.UniversalClient) *hub {
	return &hub{client: client, streams: map[string]*streamSub{}}
}

func wakeChannel(stream string) string { return prefix(stream) + "wake" }

func (h *hub) subscribe(stream string) (<-chan driver.Wakeup, func()) {
	ch := make(chan driver.Wakeup, 16)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		close(ch)
		return ch, func() {}
	}
	ss := h.streams[stream]
	first := ss == nil
	if first {
		ss = &streamSub{subs: map[chan driver.Wakeup]struct{}{}, ready: make(chan struct{}), done: make(chan struct{})}
		h.streams[stream] = ss
	}
	ss.subs[ch] = struct{}{}
	h.mu.Unlock()
	if first {
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		ss.ps = h.client.Subscribe(ctx, wakeChannel(stream))
		// Wait for the server's confirmation, so that every append made
		// after Wakeups returns is hinted.
		_, _ = ss.ps.Receive(ctx)
		cancel()
		close(ss.ready)
		go h.listen(stream, ss)
	} else {
		<-ss.ready
	}
	var once sync.Once
	return ch, func() { once.Do(func() { h.unsubscribe(stream, ch) }) }
}

func (h *hub) unsubscribe(stream string, ch chan driver.Wakeup) {
	h.mu.Lock()
	ss := h.streams[stream]
	if ss == nil {
		h.mu.Unlock()
		return
	}
	if _, ok := ss.subs[ch]; !ok {
		h.mu.Unlock()
		return
	}
	delete(ss.subs, ch)
	close(ch)
	last := len(ss.subs) == 0
	if last {
		delete(h.streams, stream)
	}
	h.mu.Unlock()
	if last {
		<-ss.ready
		_ = ss.ps.Close()
		<-ss.done
	}
}

// listen delivers the messages of one stream's connection until it is
// closed. A malformed hint is a wakeup at most, never data.
func (h *hub) listen(stream string, ss *streamSub) {
	defer close(ss.done)
	for msg := range ss.ps.Channel() {
		w := driver.Wakeup{Stream: stream}
		if p, seq, ok := strings.Cut(msg.Payload, " "); ok {
			w.Partition, _ = strconv.Atoi(p)
			w.Sequence, _ = strconv.ParseInt(seq, 10, 64)
		}
		h.mu.Lock()
		for ch := range ss.subs {
			select {
			case ch <- w:
			default:
			}
		}
		h.mu.Unlock()
	}
}

// close ends every subscription and its connection.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	streams := h.streams
	h.streams = map[string]*streamSub{}
	for _, ss := range streams {
		for ch := range ss.subs {
			close(ch)
		}
		ss.subs = map[chan driver.Wakeup]struct{}{}
	}
	h.mu.Unlock()
	for _, ss := range streams {
		<-ss.ready
		_ = ss.ps.Close()
		<-ss.done
	}
}
