package redis

import (
	"context"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rheo-go/rheo/driver"
)

// hub fans the append script's hints out to the Driver's subscribers.
// One pub/sub connection, opened with the first subscription, listens to
// the channels of the streams subscribed to (rheo:{<stream>}:wake, whose
// messages are "<partition> <sequence>"); go-redis reconnects it and
// subscribes again after a broken connection, and hints sent meanwhile
// are lost, as hints may be.
type hub struct {
	client goredis.UniversalClient
	mu     sync.Mutex
	ps     *goredis.PubSub
	subs   map[string]map[chan driver.Wakeup]struct{}
	closed bool
	done   chan struct{}
}

func newHub(client goredis.UniversalClient) *hub {
	return &hub{client: client, subs: map[string]map[chan driver.Wakeup]struct{}{}}
}

func wakeChannel(stream string) string { return prefix(stream) + "wake" }

func (h *hub) subscribe(stream string) (<-chan driver.Wakeup, func()) {
	ch := make(chan driver.Wakeup, 16)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return ch, func() {}
	}
	subs := h.subs[stream]
	if subs == nil {
		subs = map[chan driver.Wakeup]struct{}{}
		h.subs[stream] = subs
		ctx := context.Background()
		if h.ps == nil {
			h.ps = h.client.Subscribe(ctx, wakeChannel(stream))
			h.done = make(chan struct{})
			go h.listen(h.ps, h.done)
		} else {
			_ = h.ps.Subscribe(ctx, wakeChannel(stream))
		}
	}
	subs[ch] = struct{}{}
	var once sync.Once
	return ch, func() { once.Do(func() { h.unsubscribe(stream, ch) }) }
}

func (h *hub) unsubscribe(stream string, ch chan driver.Wakeup) {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.subs[stream]
	if _, ok := subs[ch]; !ok {
		return
	}
	delete(subs, ch)
	close(ch)
	if len(subs) == 0 {
		delete(h.subs, stream)
		if h.ps != nil {
			_ = h.ps.Unsubscribe(context.Background(), wakeChannel(stream))
		}
	}
}

// listen delivers the messages of ps until it is closed.
func (h *hub) listen(ps *goredis.PubSub, done chan struct{}) {
	defer close(done)
	for msg := range ps.Channel() {
		stream, ok := strings.CutPrefix(msg.Channel, "rheo:{")
		if !ok {
			continue
		}
		stream, ok = strings.CutSuffix(stream, "}:wake")
		if !ok {
			continue
		}
		// A malformed hint is a wakeup at most, never data.
		w := driver.Wakeup{Stream: stream}
		if ps, seq, ok := strings.Cut(msg.Payload, " "); ok {
			w.Partition, _ = strconv.Atoi(ps)
			w.Sequence, _ = strconv.ParseInt(seq, 10, 64)
		}
		h.mu.Lock()
		for ch := range h.subs[stream] {
			select {
			case ch <- w:
			default:
			}
		}
		h.mu.Unlock()
	}
}

// close ends every subscription and the pub/sub connection.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	ps, done := h.ps, h.done
	h.ps = nil
	for stream, subs := range h.subs {
		for ch := range subs {
			close(ch)
		}
		delete(h.subs, stream)
	}
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
}
