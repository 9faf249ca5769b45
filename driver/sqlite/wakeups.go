package sqlite

import (
	"sync"

	"github.com/rheo-go/rheo/driver"
)

// wakeupBuffer is each subscription's buffer; hints beyond it are dropped.
const wakeupBuffer = 64

// hub fans the appends of one Driver out to the subscribers of each
// stream.
type hub struct {
	mu     sync.Mutex
	subs   map[string]map[chan driver.Wakeup]struct{}
	closed bool
}

func newHub() *hub {
	return &hub{subs: map[string]map[chan driver.Wakeup]struct{}{}}
}

// subscribe registers a buffered channel for stream. After close it
// returns a closed channel.
func (h *hub) subscribe(stream string) (<-chan driver.Wakeup, func()) {
	ch := make(chan driver.Wakeup, wakeupBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return ch, func() {}
	}
	if h.subs[stream] == nil {
		h.subs[stream] = map[chan driver.Wakeup]struct{}{}
	}
	h.subs[stream][ch] = struct{}{}
	var once sync.Once
	return ch, func() { once.Do(func() { h.unsubscribe(stream, ch) }) }
}

func (h *hub) unsubscribe(stream string, ch chan driver.Wakeup) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[stream][ch]; !ok {
		return // close ended every subscription already
	}
	delete(h.subs[stream], ch)
	if len(h.subs[stream]) == 0 {
		delete(h.subs, stream)
	}
	close(ch)
}

// notify sends each wakeup to its stream's subscribers without blocking.
func (h *hub) notify(wakeups []driver.Wakeup) {
	if len(wakeups) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range wakeups {
		for ch := range h.subs[w.Stream] {
			select {
			case ch <- w:
			default:
			}
		}
	}
}

// close ends every subscription.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, chans := range h.subs {
		for ch := range chans {
			close(ch)
		}
	}
	h.subs = nil
}
