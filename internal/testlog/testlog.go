// Package testlog records log/slog records for tests, so that a test can
// wait for a record and count what was logged.
package testlog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Record is one logged record.
type Record struct {
	Level   slog.Level
	Message string
}

// Recorder is a slog.Handler that keeps every record, at every level. It
// is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	records []Record
	changed chan struct{} // closed and replaced on every record
}

// New returns an empty Recorder.
func New() *Recorder {
	return &Recorder{changed: make(chan struct{})}
}

// Logger returns a logger that writes to r.
func (r *Recorder) Logger() *slog.Logger { return slog.New(r) }

// Enabled implements slog.Handler: every level is kept.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, Record{Level: rec.Level, Message: rec.Message})
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// WithAttrs implements slog.Handler; the attributes are not kept.
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup implements slog.Handler; groups are not kept.
func (r *Recorder) WithGroup(string) slog.Handler { return r }

// Count returns how many records of level have a message containing
// substr.
func (r *Recorder) Count(level slog.Level, substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.Level == level && strings.Contains(rec.Message, substr) {
			n++
		}
	}
	return n
}

// Records returns a copy of what was logged so far.
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// WaitCount waits until at least n records of level contain substr, and
// fails t after timeout.
func (r *Recorder) WaitCount(t testing.TB, timeout time.Duration, n int, level slog.Level, substr string) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if r.Count(level, substr) >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			require.FailNow(t, fmt.Sprintf("waited %s for %d %s records containing %q; logged: %v", timeout, n, level, substr, r.Records()))
		}
	}
}
