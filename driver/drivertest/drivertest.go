// Package drivertest is the conformance suite of Rheo drivers: the
// reference's semantics as Go tests, run unchanged against every driver.
//
// A driver's test calls Exercise with a Harness that makes fresh drivers
// on a migrated database; every case is a subtest named as a sentence,
// grouped in families, with the same names on every driver. Cases use
// stream names of their own, so drivers of one run may share a database.
// Time is pinned with a Clock that cases set and advance: nothing sleeps
// to wait out a lease.
//
// Optional behaviour is gated on the driver's Capabilities; fencing and
// at-least-once cases run on every driver.
//
// Each family lives in the file of its name (Exercise lists them): the
// delivery families in groups.go, fencing.go (fetch, renew and the
// leases' fencing) and settle.go (retry, reject, batch ack); errors.go
// is the error vocabulary and its order of checks; inspect.go the
// read-only calls an operator makes (list_streams, list_groups,
// group_info, leases, dead_letters, lag). The words mean one thing
// throughout the project: "lifecycle" is what creates, resets and drops
// streams and groups or sets their ordering (create_stream,
// create_group, set_ordering, reset_group, drop_group, drop_stream), and
// "retention" is set_retention and prune; "ops" is only driver.Ops, the
// whole set of operations.
package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// Harness makes the drivers the suite runs against.
type Harness struct {
	// NewDriver returns a driver on a migrated database that reads the
	// time from clock, and closes it when tb ends (tb.Cleanup). Drivers
	// made for one run may share a database: every case uses streams of
	// its own.
	NewDriver func(tb testing.TB, clock driver.Clock) driver.Driver
	// RawWrites, when set, tries to change the logged events of stream
	// (appended through d) in plain SQL, bypassing the API, and returns
	// each attempt's error in Rheo's vocabulary keyed by statement:
	// "update" and "delete", plus "insert" and "truncate" where the
	// database refuses them too. Every one must be immutable_event. When
	// nil, the case that needs it is skipped.
	RawWrites func(ctx context.Context, tb testing.TB, d driver.Driver, stream string) map[string]error
}

// Clock is a driver.Clock for tests that moves only when the test moves
// it (Set, Advance), safe for concurrent use: timers set with At fire as
// it reaches them. Give the same Clock to the driver, the worker and the
// Pruner, so that the database's notion of now, lease renewals, polls
// and pruning passes all follow the test. The zero value reads the zero
// time; NewClock starts at a fixed instant.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*clockTimer
	added  chan struct{} // signalled when a timer is set; made on first use
}

type clockTimer struct {
	at time.Time
	ch chan time.Time
}

// Epoch is where NewClock starts: a fixed instant in whole seconds, so
// every database stores it exactly.
var Epoch = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// NewClock returns a Clock set to Epoch.
func NewClock() *Clock { return ClockAt(Epoch) }

// ClockAt returns a Clock set to now.
func ClockAt(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// At returns a channel that receives once the clock reaches t (at once
// when it already has), and a function that releases the timer.
func (c *Clock) At(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &clockTimer{at: t, ch: make(chan time.Time, 1)}
	if !t.After(c.now) {
		tm.ch <- c.now
		return tm.ch, func() {}
	}
	c.timers = append(c.timers, tm)
	select {
	case c.addedLocked() <- struct{}{}:
	default:
	}
	return tm.ch, func() { c.release(tm) }
}

func (c *Clock) addedLocked() chan struct{} {
	if c.added == nil {
		c.added = make(chan struct{}, 16)
	}
	return c.added
}

func (c *Clock) release(tm *clockTimer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == tm {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return
		}
	}
}

// Set moves the clock to t and fires the timers that fall due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveLocked(t)
}

// Advance moves the clock forward by d, fires the timers that fall due,
// and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveLocked(c.now.Add(d))
	return c.now
}

func (c *Clock) moveLocked(t time.Time) {
	c.now = t
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
			continue
		}
		tm.ch <- c.now
	}
	c.timers = kept
}

// Armed reports whether a timer is set for exactly at.
func (c *Clock) Armed(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tm := range c.timers {
		if tm.at.Equal(at) {
			return true
		}
	}
	return false
}

// WaitTimer waits up to timeout until a timer is set after the previous
// WaitTimer returned (for example, a loop waiting for its next pass), and
// fails the test when none is.
func (c *Clock) WaitTimer(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	c.mu.Lock()
	added := c.addedLocked()
	c.mu.Unlock()
	select {
	case <-added:
	case <-time.After(timeout):
		require.FailNow(tb, fmt.Sprintf("no timer was set within %v", timeout))
	}
}

// Exercise runs the whole conformance suite against the drivers h makes.
func Exercise(t *testing.T, h Harness) {
	require.NotNil(t, h.NewDriver, "Harness.NewDriver is required")
	families := []struct {
		name  string
		cases func(t *testing.T, h Harness)
	}{
		{"errors", errorCases},
		{"event log", logCases},
		{"immutability", immutabilityCases},
		{"idempotent ids", idempotencyCases},
		{"consumer groups", groupCases},
		{"leases and fencing", fencingCases},
		{"retry and reject", retryCases},
		{"batch ack", ackBatchCases},
		{"inspect", inspectCases},
		{"replay", replayCases},
		{"partitions and frontier", partitionCases},
		{"start cursors", startCases},
		{"transactions", transactionCases},
		{"concurrency", concurrencyCases},
		{"wakeups", wakeupCases},
		{"history queries", QueryCases},
		{"bad input", badInputCases},
		{"lifecycle", lifecycleCases},
		{"retention", retentionCases},
		{"ordering", orderingCases},
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) { f.cases(t, h) })
	}
}

// bundle is what a case works with: a fresh driver on a pinned clock.
type bundle struct {
	t     *testing.T
	ctx   context.Context
	d     driver.Driver
	clock *Clock
	caps  driver.Capabilities
}

func setup(t *testing.T, h Harness) *bundle {
	t.Helper()
	clock := NewClock()
	d := h.NewDriver(t, clock)
	return &bundle{t: t, ctx: t.Context(), d: d, clock: clock, caps: d.Capabilities()}
}

// runID keeps the names of separate runs on one database apart.
var runID = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

var nameCounter atomic.Int64

// uniqueName returns a valid stream or group name no other case uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%s-%d", prefix, runID, nameCounter.Add(1))
}

func (b *bundle) requirePartitions() {
	if !b.caps.Partitions {
		b.t.Skip("the driver has a single partition per stream (Capabilities.Partitions)")
	}
}

func (b *bundle) requireReplay() {
	if !b.caps.Replay {
		b.t.Skip("the driver does not replay (Capabilities.Replay)")
	}
}

func (b *bundle) requireContiguousFrontier() {
	if !b.caps.ContiguousFrontier {
		b.t.Skip("the driver's frontier is not the contiguous terminal prefix (Capabilities.ContiguousFrontier)")
	}
}

// stream creates a stream with partitions partitions.
func (b *bundle) stream(partitions int) string {
	b.t.Helper()
	if partitions > 1 {
		b.requirePartitions()
	}
	name := uniqueName("s")
	require.NoError(b.t, b.d.CreateStream(b.ctx, name, partitions))
	return name
}

// group creates a group on stream; opts may be nil.
func (b *bundle) group(stream string, opts *rheo.CreateGroupOptions) string {
	b.t.Helper()
	name := uniqueName("g")
	require.NoError(b.t, b.d.CreateGroup(b.ctx, stream, name, opts))
	return name
}

// payload returns a JSON object {"n": n}.
func payload(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"n": %d}`, n))
}

// append appends one event; opts may be nil.
func (b *bundle) append(stream string, p json.RawMessage, opts *rheo.AppendOptions) rheo.Event {
	b.t.Helper()
	ev, err := b.d.Append(b.ctx, stream, p, opts)
	require.NoError(b.t, err)
	return ev
}

// appendN appends n events {"n": 1}…{"n": n} to partition 0 (or the
// only partition) and returns them.
func (b *bundle) appendN(stream string, n int) []rheo.Event {
	b.t.Helper()
	items := make([]rheo.BatchItem, n)
	for i := range items {
		items[i] = rheo.BatchItem{Payload: payload(i + 1)}
	}
	events, err := b.d.AppendBatch(b.ctx, stream, items, nil)
	require.NoError(b.t, err)
	require.Len(b.t, events, n)
	return events
}

// appendTo appends one event to an explicit partition.
func (b *bundle) appendTo(stream string, partition, n int) rheo.Event {
	b.t.Helper()
	return b.append(stream, payload(n), &rheo.AppendOptions{Partition: &partition})
}

// fetch fetches; opts may be nil.
func (b *bundle) fetch(stream, group string, opts *rheo.FetchOptions) []rheo.Lease {
	b.t.Helper()
	leases, err := b.d.Fetch(b.ctx, stream, group, opts)
	require.NoError(b.t, err)
	return leases
}

// fetchOne fetches with MaxCount 1 and requires a lease.
func (b *bundle) fetchOne(stream, group string, lease time.Duration) rheo.Lease {
	b.t.Helper()
	leases := b.fetch(stream, group, &rheo.FetchOptions{MaxCount: 1, LeaseDuration: lease})
	require.Len(b.t, leases, 1)
	return leases[0]
}

// drain fetches and acks everything claimable now.
func (b *bundle) drain(stream, group string) []rheo.Lease {
	b.t.Helper()
	var all []rheo.Lease
	for {
		leases := b.fetch(stream, group, &rheo.FetchOptions{MaxCount: 100})
		if len(leases) == 0 {
			return all
		}
		for _, l := range leases {
			require.NoError(b.t, b.d.Ack(b.ctx, l.LeaseID))
		}
		all = append(all, leases...)
	}
}

func (b *bundle) lag(stream, group string, partitions []int) rheo.Lag {
	b.t.Helper()
	lag, err := b.d.Lag(b.ctx, stream, group, partitions)
	require.NoError(b.t, err)
	return lag
}

// frontiers returns the group's frontier per partition.
func (b *bundle) frontiers(stream, group string) []int64 {
	b.t.Helper()
	var out []int64
	for _, p := range b.lag(stream, group, nil).Partitions {
		out = append(out, p.Frontier)
	}
	return out
}

func (b *bundle) info(stream, group string) rheo.GroupInfo {
	b.t.Helper()
	info, err := b.d.GroupInfo(b.ctx, stream, group)
	require.NoError(b.t, err)
	return info
}

func (b *bundle) deadLetters(stream, group string) []rheo.DeadLetter {
	b.t.Helper()
	letters, err := b.d.DeadLetters(b.ctx, stream, group, nil)
	require.NoError(b.t, err)
	return letters
}

// position is an event's place in its stream.
type position struct {
	Partition int
	Sequence  int64
}

func positions(leases []rheo.Lease) []position {
	out := make([]position, len(leases))
	for i, l := range leases {
		out[i] = position{l.Event.Partition, l.Event.Sequence}
	}
	return out
}

func sequences(leases []rheo.Lease) []int64 {
	out := make([]int64, len(leases))
	for i, l := range leases {
		out[i] = l.Event.Sequence
	}
	return out
}

func eventSequences(events []rheo.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Sequence
	}
	return out
}

// requireSameTime compares instants whatever their location.
func requireSameTime(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.Truef(t, want.Equal(got), "want %s, got %s %v", want, got, fmt.Sprint(msgAndArgs...))
}

// requireJSONEq compares JSON documents whatever their formatting.
func requireJSONEq(t *testing.T, want string, got json.RawMessage) {
	t.Helper()
	require.JSONEq(t, want, string(got))
}

// neverIssued is a well-formed lease id no driver has issued.
const neverIssued = "00000000-0000-4000-8000-000000000000"

func ptr[T any](v T) *T { return &v }

// normalizeInfo gives OldestUnsettledTS a UTC location, for comparing
// whole GroupInfo values.
func normalizeInfo(info rheo.GroupInfo) rheo.GroupInfo {
	if info.OldestUnsettledTS != nil {
		info.OldestUnsettledTS = ptr(info.OldestUnsettledTS.UTC())
	}
	return info
}

// appendTimes appends, for each i, counts[i] events in one batch whose
// ts is minutes[i] minutes after Epoch, moving the clock there and back.
func appendTimes(b *bundle, stream string, counts, minutes []int) {
	b.t.Helper()
	defer b.clock.Set(b.clock.Now())
	for i, n := range counts {
		b.clock.Set(Epoch.Add(time.Duration(minutes[i]) * time.Minute))
		items := make([]rheo.BatchItem, n)
		for j := range items {
			items[j] = rheo.BatchItem{Payload: payload(j)}
		}
		_, err := b.d.AppendBatch(b.ctx, stream, items, nil)
		require.NoError(b.t, err)
	}
}
