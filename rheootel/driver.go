package rheootel

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// NewDriver returns drv with its appends, fetches and settles traced and
// measured; every other method is drv's own, passed through unchanged
// (methods added to driver.Driver later pass through too). The result
// implements driver.Transactor exactly when drv does, and its
// transactions are traced alike, so a worker's TxHandler keeps working.
// It has a method Unwrap() driver.Driver that returns drv, for drv's own
// methods (postgres.Driver.Pool, …). opts may be nil.
//
// Spans, following the messaging semantic conventions:
//
//	append {stream}        PRODUCER  send     (Append)
//	append_batch {stream}  PRODUCER  send     (AppendBatch)
//	fetch {stream}         CLIENT    receive  (Fetch, when it leases something or fails)
//	ack {stream}           CLIENT    settle   (Ack)
//	ack_batch {stream}     CLIENT    settle   (AckBatch)
//	retry {stream}         CLIENT    settle   (Retry)
//	reject {stream}        CLIENT    settle   (Reject)
//
// An append stores its span's context in the event's metadata (see the
// package documentation); fetch and settle spans link to the creation
// context of each event they carry. A settle names only a lease id, so
// the driver remembers, for each lease it fetched and until the lease is
// settled or well past its expiry, the event's stream, group, partition,
// id and creation context.
//
// Metrics: messaging.client.operation.duration for each call above,
// messaging.client.sent.messages per event appended and
// messaging.client.consumed.messages per lease fetched.
func NewDriver(drv driver.Driver, opts *Options) driver.Driver {
	s := opts.settle()
	in := instruments{meter: s.meter}
	d := &tracedDriver{Driver: drv, t: &driverTelemetry{
		tracer: s.tracer,
		opDuration: in.histogram(messagingconv.ClientOperationDuration{}.Name(),
			messagingconv.ClientOperationDuration{}.Unit(), messagingconv.ClientOperationDuration{}.Description()),
		sent: in.counter(messagingconv.ClientSentMessages{}.Name(),
			messagingconv.ClientSentMessages{}.Unit(), messagingconv.ClientSentMessages{}.Description()),
		consumed: in.counter(messagingconv.ClientConsumedMessages{}.Name(),
			messagingconv.ClientConsumedMessages{}.Unit(), messagingconv.ClientConsumedMessages{}.Description()),
		leases: &leaseTable{m: map[string]leaseEntry{}},
	}}
	if tr, ok := drv.(driver.Transactor); ok {
		return &tracedTransactor{tracedDriver: d, tr: tr}
	}
	return d
}

// tracedDriver is NewDriver's result for a driver that is not a
// Transactor.
type tracedDriver struct {
	driver.Driver
	t *driverTelemetry
}

// tracedTransactor is NewDriver's result for a Transactor.
type tracedTransactor struct {
	*tracedDriver
	tr driver.Transactor
}

// tracedTx is a transaction of a tracedTransactor.
type tracedTx struct {
	driver.Tx
	t *driverTelemetry
}

var (
	_ driver.Driver     = (*tracedDriver)(nil)
	_ driver.Transactor = (*tracedTransactor)(nil)
	_ driver.Tx         = (*tracedTx)(nil)
)

// Unwrap returns the driver given to NewDriver.
func (d *tracedDriver) Unwrap() driver.Driver { return d.Driver }

// InTx runs fn in a transaction of the wrapped driver, with the
// transaction's operations traced.
func (d *tracedTransactor) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Tx) error) error {
	return d.tr.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
		return fn(ctx, &tracedTx{Tx: tx, t: d.t})
	})
}

func (d *tracedDriver) Append(ctx context.Context, stream string, payload json.RawMessage, opts *rheo.AppendOptions) (rheo.Event, error) {
	return d.t.append(ctx, d.Driver, stream, payload, opts)
}

func (d *tracedDriver) AppendBatch(ctx context.Context, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error) {
	return d.t.appendBatch(ctx, d.Driver, stream, items, opts)
}

func (d *tracedDriver) Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
	return d.t.fetch(ctx, d.Driver, stream, group, opts)
}

func (d *tracedDriver) Renew(ctx context.Context, leaseID string, dur time.Duration) (time.Time, error) {
	return d.t.renew(ctx, d.Driver, leaseID, dur, false)
}

func (d *tracedDriver) Ack(ctx context.Context, leaseID string) error {
	return d.t.ack(ctx, d.Driver, leaseID, false)
}

func (d *tracedDriver) AckBatch(ctx context.Context, leaseIDs []string) ([]rheo.AckResult, error) {
	return d.t.ackBatch(ctx, d.Driver, leaseIDs, false)
}

func (d *tracedDriver) Retry(ctx context.Context, leaseID string, opts *rheo.RetryOptions) (rheo.RetryOutcome, error) {
	return d.t.retry(ctx, d.Driver, leaseID, opts, false)
}

func (d *tracedDriver) Reject(ctx context.Context, leaseID string, reason string) error {
	return d.t.reject(ctx, d.Driver, leaseID, reason, false)
}

func (x *tracedTx) Append(ctx context.Context, stream string, payload json.RawMessage, opts *rheo.AppendOptions) (rheo.Event, error) {
	return x.t.append(ctx, x.Tx, stream, payload, opts)
}

func (x *tracedTx) AppendBatch(ctx context.Context, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error) {
	return x.t.appendBatch(ctx, x.Tx, stream, items, opts)
}

func (x *tracedTx) Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
	return x.t.fetch(ctx, x.Tx, stream, group, opts)
}

func (x *tracedTx) Renew(ctx context.Context, leaseID string, dur time.Duration) (time.Time, error) {
	return x.t.renew(ctx, x.Tx, leaseID, dur, true)
}

func (x *tracedTx) Ack(ctx context.Context, leaseID string) error {
	return x.t.ack(ctx, x.Tx, leaseID, true)
}

func (x *tracedTx) AckBatch(ctx context.Context, leaseIDs []string) ([]rheo.AckResult, error) {
	return x.t.ackBatch(ctx, x.Tx, leaseIDs, true)
}

func (x *tracedTx) Retry(ctx context.Context, leaseID string, opts *rheo.RetryOptions) (rheo.RetryOutcome, error) {
	return x.t.retry(ctx, x.Tx, leaseID, opts, true)
}

func (x *tracedTx) Reject(ctx context.Context, leaseID string, reason string) error {
	return x.t.reject(ctx, x.Tx, leaseID, reason, true)
}

// driverTelemetry traces and measures the calls of a driver and of its
// transactions.
type driverTelemetry struct {
	tracer     trace.Tracer
	opDuration metric.Float64Histogram
	sent       metric.Int64Counter
	consumed   metric.Int64Counter
	leases     *leaseTable
}

// call is one traced driver call.
type call struct {
	t     *driverTelemetry
	op    string
	ctx   context.Context
	span  trace.Span
	start time.Time
	// metricAttrs are the attributes of the call's measurements.
	metricAttrs []attribute.KeyValue
}

// begin starts the span of op with the given kind and attributes (the
// operation's own are added); dest are the stream and group attributes,
// known at the start, which the measurements carry too.
func (t *driverTelemetry) begin(ctx context.Context, op, stream string, kind trace.SpanKind, dest []attribute.KeyValue, attrs []attribute.KeyValue, links []trace.Link) *call {
	base := append(opAttrs(op), dest...)
	ctx, span := t.tracer.Start(ctx, spanName(op, stream),
		trace.WithSpanKind(kind),
		trace.WithAttributes(append(base, attrs...)...),
		trace.WithLinks(links...))
	return &call{t: t, op: op, ctx: ctx, span: span, start: time.Now(), metricAttrs: base}
}

// end records the call's duration and ends its span, failed when err is
// not nil.
func (c *call) end(err error) {
	attrs := c.metricAttrs
	if err != nil {
		typ := errorType(err)
		failSpan(c.span, err, typ)
		attrs = append(attrs[:len(attrs):len(attrs)], semconv.ErrorTypeKey.String(typ))
	}
	c.t.opDuration.Record(c.ctx, time.Since(c.start).Seconds(), metric.WithAttributes(attrs...))
	c.span.End()
}

func (t *driverTelemetry) append(ctx context.Context, ops driver.Ops, stream string, payload json.RawMessage, opts *rheo.AppendOptions) (rheo.Event, error) {
	var given rheo.AppendOptions
	if opts != nil {
		given = *opts
	}
	fields, isObject := metadataFields(given.Metadata)
	custom, hasCustom := fields.creation()
	var links []trace.Link
	if l, ok := creationLink(custom, given.ID); ok {
		links = append(links, l)
	}
	c := t.begin(ctx, opAppend, stream, trace.SpanKindProducer, destAttrs(stream, ""), nil, links)
	if isObject && !hasCustom && given.ID == "" {
		// The append span is the event's creation context. An event with
		// an id of the caller's is left alone: metadata is part of what
		// makes a repeat of that id idempotent, and every attempt's span
		// differs.
		given.Metadata = withCreationContext(given.Metadata, c.span.SpanContext())
		opts = &given
	}
	ev, err := ops.Append(c.ctx, stream, payload, opts)
	if err == nil {
		c.span.SetAttributes(partitionAttr(ev.Partition), semconv.MessagingMessageID(ev.ID), KeySequence.Int64(ev.Sequence),
			semconv.MessagingMessageBodySize(len(payload)))
	}
	t.countSent(c, 1, err)
	c.end(err)
	return ev, err
}

func (t *driverTelemetry) appendBatch(ctx context.Context, ops driver.Ops, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error) {
	var given rheo.AppendBatchOptions
	if opts != nil {
		given = *opts
	}
	fields, isObject := metadataFields(given.Metadata)
	custom, hasCustom := fields.creation()
	var links []trace.Link
	if l, ok := creationLink(custom, ""); ok {
		links = append(links, l)
	}
	c := t.begin(ctx, opAppendBatch, stream, trace.SpanKindProducer, destAttrs(stream, ""),
		[]attribute.KeyValue{semconv.MessagingBatchMessageCount(len(items))}, links)
	withIDs := false
	for _, it := range items {
		withIDs = withIDs || it.ID != ""
	}
	if isObject && !hasCustom && !withIDs && len(items) > 0 {
		// The batch's metadata is every event's, so the batch span is
		// the creation context of them all.
		given.Metadata = withCreationContext(given.Metadata, c.span.SpanContext())
		opts = &given
	}
	evs, err := ops.AppendBatch(c.ctx, stream, items, opts)
	if err == nil && len(evs) > 0 {
		same := true
		for _, ev := range evs {
			same = same && ev.Partition == evs[0].Partition
		}
		if same {
			c.span.SetAttributes(partitionAttr(evs[0].Partition))
		}
	}
	t.countSent(c, len(items), err)
	c.end(err)
	return evs, err
}

// countSent adds n events to messaging.client.sent.messages.
func (t *driverTelemetry) countSent(c *call, n int, err error) {
	if n == 0 {
		return
	}
	attrs := c.metricAttrs
	if err != nil {
		attrs = append(attrs[:len(attrs):len(attrs)], semconv.ErrorTypeKey.String(errorType(err)))
	}
	t.sent.Add(c.ctx, int64(n), metric.WithAttributes(attrs...))
}

func (t *driverTelemetry) fetch(ctx context.Context, ops driver.Ops, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
	attrs := append(opAttrs(opFetch), destAttrs(stream, group)...)
	metricAttrs := attrs
	leaseFor := driverutil.DefaultLeaseDuration
	if opts != nil {
		if opts.ConsumerID != "" {
			attrs = append(attrs[:len(attrs):len(attrs)], semconv.MessagingClientID(opts.ConsumerID))
		}
		if opts.LeaseDuration > 0 {
			leaseFor = opts.LeaseDuration
		}
	}
	start := time.Now()
	leases, err := ops.Fetch(ctx, stream, group, opts)
	elapsed := time.Since(start)

	var links []trace.Link
	now := time.Now()
	for _, l := range leases {
		sc := creationContext(l.Event.Metadata)
		if link, ok := creationLink(sc, l.Event.ID); ok {
			links = append(links, link)
		}
		t.leases.put(l.LeaseID, leaseEntry{
			stream: l.Event.Stream, group: l.Group, partition: l.Event.Partition,
			eventID: l.Event.ID, creation: sc, forgetAt: now.Add(leaseMemory(leaseFor)),
		}, now)
	}
	if len(leases) > 0 {
		t.consumed.Add(ctx, int64(len(leases)), metric.WithAttributes(metricAttrs...))
	}
	if err != nil {
		metricAttrs = append(metricAttrs[:len(metricAttrs):len(metricAttrs)], semconv.ErrorTypeKey.String(errorType(err)))
	}
	t.opDuration.Record(ctx, elapsed.Seconds(), metric.WithAttributes(metricAttrs...))

	// The span is made after the call, and only when it leased something
	// or failed: an idle worker polls every second, and a span for each
	// empty poll would bury the ones that matter.
	if len(leases) > 0 || err != nil {
		_, span := t.tracer.Start(ctx, spanName(opFetch, stream),
			trace.WithTimestamp(start),
			trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(append(attrs, semconv.MessagingBatchMessageCount(len(leases)))...),
			trace.WithLinks(links...))
		if err != nil {
			failSpan(span, err, errorType(err))
		}
		span.End(trace.WithTimestamp(start.Add(elapsed)))
	}
	return leases, err
}

// renew keeps the lease remembered as long as it is renewed; renewals
// are not traced (a worker renews every lease at half its duration).
func (t *driverTelemetry) renew(ctx context.Context, ops driver.Ops, leaseID string, d time.Duration, _ bool) (time.Time, error) {
	expires, err := ops.Renew(ctx, leaseID, d)
	if err == nil {
		t.leases.extend(leaseID, time.Now().Add(leaseMemory(d)))
	}
	return expires, err
}

// settleCall starts the span of a settle of one lease.
func (t *driverTelemetry) settleCall(ctx context.Context, op, leaseID string, attrs ...attribute.KeyValue) *call {
	e, known := t.leases.get(leaseID)
	attrs = append(attrs, KeyLeaseID.String(leaseID))
	var links []trace.Link
	if known {
		attrs = append(attrs, partitionAttr(e.partition), semconv.MessagingMessageID(e.eventID))
		if l, ok := creationLink(e.creation, e.eventID); ok {
			links = append(links, l)
		}
	}
	return t.begin(ctx, op, e.stream, trace.SpanKindClient, destAttrs(e.stream, e.group), attrs, links)
}

// settled forgets a lease whose settle took effect or found it stale.
// Inside a transaction it is kept (until its time runs out): the
// transaction may still roll back and the lease be settled again.
func (t *driverTelemetry) settled(leaseID string, err error, inTx bool) {
	if !inTx && (err == nil || isStale(err)) {
		t.leases.forget(leaseID)
	}
}

func (t *driverTelemetry) ack(ctx context.Context, ops driver.Ops, leaseID string, inTx bool) error {
	c := t.settleCall(ctx, opAck, leaseID)
	err := ops.Ack(c.ctx, leaseID)
	t.settled(leaseID, err, inTx)
	c.end(err)
	return err
}

func (t *driverTelemetry) ackBatch(ctx context.Context, ops driver.Ops, leaseIDs []string, inTx bool) ([]rheo.AckResult, error) {
	var (
		stream, group string
		uniform       = true
		links         []trace.Link
	)
	for i, id := range leaseIDs {
		e, known := t.leases.get(id)
		if !known {
			uniform = false
			continue
		}
		if i == 0 {
			stream, group = e.stream, e.group
		}
		uniform = uniform && e.stream == stream && e.group == group
		if l, ok := creationLink(e.creation, e.eventID); ok {
			links = append(links, l)
		}
	}
	if !uniform {
		stream, group = "", ""
	}
	c := t.begin(ctx, opAckBatch, stream, trace.SpanKindClient, destAttrs(stream, group),
		[]attribute.KeyValue{semconv.MessagingBatchMessageCount(len(leaseIDs))}, links)
	results, err := ops.AckBatch(c.ctx, leaseIDs)
	if err == nil {
		stale := 0
		for _, r := range results {
			if !r.OK {
				stale++
			}
			t.settled(r.LeaseID, nil, inTx)
		}
		c.span.SetAttributes(KeyStaleCount.Int(stale))
	}
	c.end(err)
	return results, err
}

func (t *driverTelemetry) retry(ctx context.Context, ops driver.Ops, leaseID string, opts *rheo.RetryOptions, inTx bool) (rheo.RetryOutcome, error) {
	var delay time.Duration
	if opts != nil {
		delay = opts.Delay
	}
	c := t.settleCall(ctx, opRetry, leaseID, KeyRetryDelay.Float64(delay.Seconds()))
	out, err := ops.Retry(c.ctx, leaseID, opts)
	if err == nil {
		c.span.SetAttributes(KeyRetryOutcome.String(string(out)))
	}
	t.settled(leaseID, err, inTx)
	c.end(err)
	return out, err
}

func (t *driverTelemetry) reject(ctx context.Context, ops driver.Ops, leaseID string, reason string, inTx bool) error {
	c := t.settleCall(ctx, opReject, leaseID)
	err := ops.Reject(c.ctx, leaseID, reason)
	t.settled(leaseID, err, inTx)
	c.end(err)
	return err
}

// isStale reports whether err says the lease is no longer held.
func isStale(err error) bool {
	return errorType(err) == rheo.ErrStaleLease.Reason || errorType(err) == rheo.ErrReceiptMismatch.Reason
}

// leaseMemory is how long a fetched or renewed lease of duration d is
// remembered without news of it: twice its duration, since a lease that
// expired may still be settled while no one has claimed it again.
func leaseMemory(d time.Duration) time.Duration {
	return 2 * max(d, time.Second)
}

// leaseEntry is what a settle span needs to know of a lease.
type leaseEntry struct {
	stream, group string
	partition     int
	eventID       string
	creation      trace.SpanContext
	forgetAt      time.Time
}

// leaseTable remembers the leases a driver fetched, until they are
// settled or their time runs out. Its size is bounded by the leases held
// by the driver's consumers, plus those that ended without a settle in
// the last two lease durations.
type leaseTable struct {
	mu        sync.Mutex
	m         map[string]leaseEntry
	nextSweep time.Time
}

// sweepEvery is how often put drops the entries whose time ran out.
const sweepEvery = time.Second

func (lt *leaseTable) put(id string, e leaseEntry, now time.Time) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if now.After(lt.nextSweep) {
		for k, x := range lt.m {
			if now.After(x.forgetAt) {
				delete(lt.m, k)
			}
		}
		lt.nextSweep = now.Add(sweepEvery)
	}
	lt.m[id] = e
}

func (lt *leaseTable) get(id string) (leaseEntry, bool) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	e, ok := lt.m[id]
	return e, ok
}

func (lt *leaseTable) extend(id string, forgetAt time.Time) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if e, ok := lt.m[id]; ok {
		e.forgetAt = forgetAt
		lt.m[id] = e
	}
}

func (lt *leaseTable) forget(id string) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	delete(lt.m, id)
}

// size is the number of leases remembered.
func (lt *leaseTable) size() int {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return len(lt.m)
}
