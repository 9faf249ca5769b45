package rheootel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/rheootel"
	"github.com/rheo-go/rheo/worker"
)

// creationOf is the creation context an event's metadata carries.
func creationOf(ev rheo.Event) trace.SpanContext {
	return trace.SpanContextFromContext(rheootel.Extract(context.Background(), ev.Metadata))
}

// metadataOf decodes an event's metadata.
func metadataOf(t *testing.T, ev rheo.Event) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(ev.Metadata, &m))
	return m
}

// stored reads the event at sequence seq of partition 0 back from the
// database, through the unwrapped driver.
func (bd *bundle) stored(t *testing.T, seq int64) rheo.Event {
	t.Helper()
	evs, err := bd.raw.Read(context.Background(), bd.stream, &rheo.ReadOptions{After: seq - 1, MaxCount: 1})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	return evs[0]
}

func sameSpan(a, b trace.SpanContext) bool {
	return a.TraceID() == b.TraceID() && a.SpanID() == b.SpanID()
}

func TestTracePropagation(t *testing.T) {
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("a trace started before an append continues in the handler", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			tracer := bd.tp.Tracer("test")
			ctx, request := tracer.Start(context.Background(), "request")
			ev, err := bd.drv.Append(ctx, bd.stream, json.RawMessage(`{"type": "order.placed"}`), nil)
			require.NoError(t, err)
			request.End()

			work := make(chan trace.SpanContext, 1)
			w := bd.startWorker(t, bd.config(func(ctx context.Context, l rheo.Lease) error {
				_, span := tracer.Start(ctx, "work")
				span.End()
				work <- span.SpanContext()
				return nil
			}))
			workSC := receive(t, "the handler's span", work)
			stop(t, w)

			appended := bd.ended("append " + bd.stream)
			require.Len(t, appended, 1)
			producer := appended[0]
			assert.Equal(t, trace.SpanKindProducer, producer.SpanKind())
			assert.Equal(t, request.SpanContext().SpanID(), producer.Parent().SpanID(), "the append is a child of the request")
			assert.Equal(t, "send", attr(producer, semconv.MessagingOperationTypeKey).AsString())
			assert.Equal(t, "rheo", attr(producer, semconv.MessagingSystemKey).AsString())
			assert.Equal(t, bd.stream, attr(producer, semconv.MessagingDestinationNameKey).AsString())
			assert.Equal(t, ev.ID, attr(producer, semconv.MessagingMessageIDKey).AsString())
			assert.Equal(t, "0", attr(producer, semconv.MessagingDestinationPartitionIDKey).AsString())
			assert.True(t, sameSpan(producer.SpanContext(), creationOf(ev)), "the event carries the append span's context")
			assert.True(t, sameSpan(producer.SpanContext(), creationOf(bd.stored(t, ev.Sequence))), "and so does the stored event")

			processed := bd.ended("process " + bd.stream)
			require.Len(t, processed, 1)
			process := processed[0]
			assert.Equal(t, trace.SpanKindConsumer, process.SpanKind())
			assert.Equal(t, request.SpanContext().TraceID(), process.SpanContext().TraceID(), "the handler's span is in the request's trace")
			assert.Equal(t, producer.SpanContext().SpanID(), process.Parent().SpanID(), "as a child of the append span")
			assert.True(t, linksTo(process, producer.SpanContext()), "and links to it")
			assert.Equal(t, "process", attr(process, semconv.MessagingOperationTypeKey).AsString())
			assert.Equal(t, bd.group, attr(process, semconv.MessagingConsumerGroupNameKey).AsString())
			assert.Equal(t, ev.ID, attr(process, semconv.MessagingMessageIDKey).AsString())
			assert.Equal(t, int64(1), attr(process, rheootel.KeyAttempt).AsInt64())
			assert.Equal(t, "order.placed", attr(process, rheootel.KeyEventType).AsString())
			assert.Equal(t, "ack", attr(process, rheootel.KeyOutcome).AsString())
			assert.Equal(t, codes.Unset, process.Status().Code)

			works := bd.ended("work")
			require.Len(t, works, 1)
			assert.True(t, sameSpan(workSC, works[0].SpanContext()))
			assert.Equal(t, process.SpanContext().SpanID(), works[0].Parent().SpanID(), "the handler's own spans are children of it")

			var fetchLinked bool
			for _, s := range bd.ended("fetch " + bd.stream) {
				assert.Equal(t, trace.SpanKindClient, s.SpanKind())
				assert.Equal(t, "receive", attr(s, semconv.MessagingOperationTypeKey).AsString())
				fetchLinked = fetchLinked || linksTo(s, producer.SpanContext())
			}
			assert.True(t, fetchLinked, "the fetch that leased the event links to its creation context")

			acks := bd.ended("ack_batch " + bd.stream)
			require.Len(t, acks, 1)
			assert.Equal(t, trace.SpanKindClient, acks[0].SpanKind())
			assert.Equal(t, "settle", attr(acks[0], semconv.MessagingOperationTypeKey).AsString())
			assert.Equal(t, bd.group, attr(acks[0], semconv.MessagingConsumerGroupNameKey).AsString())
			assert.Equal(t, int64(1), attr(acks[0], semconv.MessagingBatchMessageCountKey).AsInt64())
			assert.True(t, linksTo(acks[0], producer.SpanContext()), "the ack links to the creation context")
		})

		t.Run("retried deliveries start a trace of their own and link to the creation context", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			ev, err := bd.drv.Append(context.Background(), bd.stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)
			creation := creationOf(ev)
			require.True(t, creation.IsValid(), "an append without a caller's span is its own root, and the creation context")

			w := bd.startWorker(t, bd.config(func(ctx context.Context, l rheo.Lease) error {
				if l.Attempt < 3 {
					return worker.Retry(0, errors.New("flaky")) // again at once
				}
				return nil
			}))
			processed := bd.waitSpans(t, "process "+bd.stream, 3)
			stop(t, w)

			byAttempt := map[int64]sdktrace.ReadOnlySpan{}
			for _, s := range processed {
				byAttempt[attr(s, rheootel.KeyAttempt).AsInt64()] = s
			}
			require.Len(t, byAttempt, 3)
			assert.Equal(t, creation.SpanID(), byAttempt[1].Parent().SpanID(), "the first delivery continues the producer's trace")
			for _, attempt := range []int64{2, 3} {
				s := byAttempt[attempt]
				assert.False(t, s.Parent().IsValid(), "attempt %d is a root", attempt)
				assert.NotEqual(t, creation.TraceID(), s.SpanContext().TraceID(), "attempt %d has a trace of its own", attempt)
				assert.True(t, linksTo(s, creation), "attempt %d links to the creation context", attempt)
			}
			assert.Equal(t, codes.Error, byAttempt[1].Status().Code)
			assert.Equal(t, "retry", attr(byAttempt[1], rheootel.KeyOutcome).AsString())
			assert.Equal(t, "*errors.errorString", attr(byAttempt[1], semconv.ErrorTypeKey).AsString())

			retries := bd.ended("retry " + bd.stream)
			require.Len(t, retries, 2)
			for _, s := range retries {
				assert.True(t, linksTo(s, creation))
				assert.Equal(t, "retrying", attr(s, rheootel.KeyRetryOutcome).AsString())
				assert.Equal(t, ev.ID, attr(s, semconv.MessagingMessageIDKey).AsString())
			}
		})

		t.Run("a first delivery long after the append links instead of continuing", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			ev, err := bd.drv.Append(context.Background(), bd.stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)
			bd.clock.Advance(rheootel.DefaultParentWindow + time.Second)

			w := bd.startWorker(t, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))
			process := bd.waitSpans(t, "process "+bd.stream, 1)[0]
			stop(t, w)

			creation := creationOf(ev)
			assert.False(t, process.Parent().IsValid())
			assert.NotEqual(t, creation.TraceID(), process.SpanContext().TraceID())
			assert.True(t, linksTo(process, creation))
			assert.Greater(t, attr(process, rheootel.KeyEventAge).AsFloat64(), rheootel.DefaultParentWindow.Seconds())
		})

		t.Run("a negative ParentWindow never continues the producer's trace", func(t *testing.T) {
			bd := setup(t, b, 5, &rheootel.Options{ParentWindow: -1})
			ev, err := bd.drv.Append(context.Background(), bd.stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)

			w := bd.startWorker(t, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))
			process := bd.waitSpans(t, "process "+bd.stream, 1)[0]
			stop(t, w)

			assert.False(t, process.Parent().IsValid())
			assert.True(t, linksTo(process, creationOf(ev)))
		})

		t.Run("metadata the caller set is kept", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			ctx, span := bd.tp.Tracer("test").Start(context.Background(), "request")
			defer span.End()
			meta := rheo.Lineage{CorrelationID: "order-42", Producer: "shop"}.Metadata()
			ev, err := bd.drv.Append(ctx, bd.stream, json.RawMessage(`{}`), &rheo.AppendOptions{Metadata: meta})
			require.NoError(t, err)

			got := metadataOf(t, bd.stored(t, ev.Sequence))
			assert.Equal(t, "order-42", got["correlation_id"])
			assert.Equal(t, "shop", got["producer"])
			assert.Contains(t, got, rheootel.MetaTraceparent)
			assert.Equal(t, `{"correlation_id":"order-42","producer":"shop"}`, string(meta), "the caller's metadata is not changed")

			w := bd.startWorker(t, bd.config(func(ctx context.Context, l rheo.Lease) error { return nil }))
			process := bd.waitSpans(t, "process "+bd.stream, 1)[0]
			stop(t, w)
			assert.Equal(t, "order-42", attr(process, semconv.MessagingMessageConversationIDKey).AsString())
		})

		t.Run("a creation context of the caller's is kept, and the append links to it", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			tracer := bd.tp.Tracer("test")
			upstreamCtx, upstream := tracer.Start(context.Background(), "upstream")
			upstream.End()
			meta, err := rheootel.Inject(upstreamCtx, json.RawMessage(`{"producer": "shop"}`))
			require.NoError(t, err)

			ctx, span := tracer.Start(context.Background(), "request")
			defer span.End()
			ev, err := bd.drv.Append(ctx, bd.stream, json.RawMessage(`{}`), &rheo.AppendOptions{Metadata: meta})
			require.NoError(t, err)

			assert.True(t, sameSpan(upstream.SpanContext(), creationOf(bd.stored(t, ev.Sequence))))
			assert.True(t, linksTo(bd.ended("append " + bd.stream)[0], upstream.SpanContext()))
		})

		t.Run("an append with an id of its own is left alone, so a repeat stays idempotent", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			tracer := bd.tp.Tracer("test")
			first, span := tracer.Start(context.Background(), "first attempt")
			ev, err := bd.drv.Append(first, bd.stream, json.RawMessage(`{}`), &rheo.AppendOptions{ID: "order-1"})
			require.NoError(t, err)
			span.End()
			again, span := tracer.Start(context.Background(), "second attempt")
			repeat, err := bd.drv.Append(again, bd.stream, json.RawMessage(`{}`), &rheo.AppendOptions{ID: "order-1"})
			require.NoError(t, err, "a repeat under another span is still the same event")
			span.End()
			assert.Equal(t, ev.Sequence, repeat.Sequence)
			assert.NotContains(t, metadataOf(t, bd.stored(t, ev.Sequence)), rheootel.MetaTraceparent)

			// Inject, called once where the event is decided, traces it
			// and keeps every repeat idempotent.
			decided, span := tracer.Start(context.Background(), "decide")
			meta, err := rheootel.Inject(decided, nil)
			require.NoError(t, err)
			span.End()
			for i := range 2 {
				ctx, attempt := tracer.Start(context.Background(), fmt.Sprintf("attempt %d", i))
				_, err := bd.drv.Append(ctx, bd.stream, json.RawMessage(`{}`), &rheo.AppendOptions{ID: "order-2", Metadata: meta})
				require.NoError(t, err)
				attempt.End()
			}
			evs, err := bd.raw.Read(context.Background(), bd.stream, nil)
			require.NoError(t, err)
			require.Len(t, evs, 2)
			assert.True(t, sameSpan(span.SpanContext(), creationOf(evs[1])))
		})

		t.Run("an append batch is the creation context of its events", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			items := []rheo.BatchItem{{Payload: json.RawMessage(`{"n": 1}`)}, {Payload: json.RawMessage(`{"n": 2}`)}}
			evs, err := bd.drv.AppendBatch(context.Background(), bd.stream, items,
				&rheo.AppendBatchOptions{Metadata: json.RawMessage(`{"producer": "loader"}`)})
			require.NoError(t, err)

			batch := bd.ended("append_batch " + bd.stream)
			require.Len(t, batch, 1)
			assert.Equal(t, trace.SpanKindProducer, batch[0].SpanKind())
			assert.Equal(t, int64(2), attr(batch[0], semconv.MessagingBatchMessageCountKey).AsInt64())
			for _, ev := range evs {
				assert.True(t, sameSpan(batch[0].SpanContext(), creationOf(ev)))
				assert.Equal(t, "loader", metadataOf(t, ev)["producer"])
			}

			// One id of the caller's leaves the whole batch alone.
			items = append(items, rheo.BatchItem{Payload: json.RawMessage(`{"n": 3}`), ID: "order-3"})
			evs, err = bd.drv.AppendBatch(context.Background(), bd.stream, items, nil)
			require.NoError(t, err)
			for _, ev := range evs {
				assert.False(t, creationOf(ev).IsValid())
			}
		})

		t.Run("a TxHandler works through the traced driver, under the process span", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			_, err := bd.drv.Append(context.Background(), bd.stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)
			require.NoError(t, bd.raw.CreateStream(context.Background(), bd.stream+"-out", 1))

			cfg := bd.config(nil)
			cfg.TxHandler = func(ctx context.Context, tx driver.Tx, l rheo.Lease) error {
				_, err := tx.Append(ctx, bd.stream+"-out", json.RawMessage(`{}`), nil)
				return err
			}
			w := bd.startWorker(t, cfg)
			bd.waitSpans(t, "ack "+bd.stream, 1)
			stop(t, w)

			process := bd.ended("process " + bd.stream)[0]
			ack := bd.ended("ack " + bd.stream)[0]
			out := bd.ended("append " + bd.stream + "-out")[0]
			assert.Equal(t, process.SpanContext().SpanID(), ack.Parent().SpanID(), "the ack in the handler's transaction")
			assert.Equal(t, process.SpanContext().SpanID(), out.Parent().SpanID(), "the handler's append")
			evs, err := bd.raw.Read(context.Background(), bd.stream+"-out", nil)
			require.NoError(t, err)
			require.Len(t, evs, 1)
			assert.True(t, sameSpan(out.SpanContext(), creationOf(evs[0])), "the event it appended continues the trace")
		})
	})
}

// plainDriver hides a driver's InTx.
type plainDriver struct{ driver.Driver }

func TestNewDriver(t *testing.T) {
	b := testbackend.SQLite(t)
	raw := b.Open(t, nil)

	t.Run("it is a Transactor exactly when the wrapped driver is", func(t *testing.T) {
		_, ok := rheootel.NewDriver(raw, nil).(driver.Transactor)
		assert.True(t, ok)
		_, ok = rheootel.NewDriver(plainDriver{raw}, nil).(driver.Transactor)
		assert.False(t, ok)
	})

	t.Run("Unwrap returns the wrapped driver", func(t *testing.T) {
		for _, inner := range []driver.Driver{raw, plainDriver{raw}} {
			wrapped := rheootel.NewDriver(inner, nil).(interface{ Unwrap() driver.Driver })
			assert.Equal(t, inner, wrapped.Unwrap())
		}
	})

	t.Run("methods it does not trace pass through", func(t *testing.T) {
		drv := rheootel.NewDriver(raw, nil)
		require.NoError(t, drv.CreateStream(context.Background(), "passthrough", 2))
		streams, err := drv.ListStreams(context.Background())
		require.NoError(t, err)
		assert.Equal(t, "passthrough", streams[0].Name)
		assert.True(t, drv.Capabilities() == raw.Capabilities())
	})

	t.Run("a fetch that leases nothing is measured but makes no span", func(t *testing.T) {
		bd := setup(t, b, 5, nil)
		leases, err := bd.drv.Fetch(context.Background(), bd.stream, bd.group, nil)
		require.NoError(t, err)
		require.Empty(t, leases)
		assert.Empty(t, bd.ended("fetch "+bd.stream))
		assert.Equal(t, uint64(1), count(t, bd.metrics(t), "messaging.client.operation.duration",
			semconv.MessagingOperationName("fetch"), semconv.MessagingDestinationName(bd.stream)))
	})

	t.Run("Inject refuses metadata that is not an object", func(t *testing.T) {
		_, err := rheootel.Inject(context.Background(), json.RawMessage(`"x"`))
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		got, err := rheootel.Inject(context.Background(), json.RawMessage(`{"a": 1}`))
		require.NoError(t, err)
		assert.Equal(t, `{"a": 1}`, string(got), "without a span there is nothing to add")
	})

	t.Run("errors are the wrapped driver's, and fail the span", func(t *testing.T) {
		bd := setup(t, b, 5, nil)
		_, err := bd.drv.Append(context.Background(), "missing", json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, rheo.ErrStreamNotFound)
		_, err = bd.drv.Append(context.Background(), bd.stream, json.RawMessage(`{}`), &rheo.AppendOptions{Metadata: json.RawMessage(`[1]`)})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument, "metadata that is not an object reaches the driver as it is")
		err = bd.drv.Ack(context.Background(), "00000000-0000-0000-0000-000000000000")
		require.ErrorIs(t, err, rheo.ErrStaleLease)

		missing := bd.ended("append missing")
		require.Len(t, missing, 1)
		assert.Equal(t, codes.Error, missing[0].Status().Code)
		assert.Equal(t, "stream_not_found", attr(missing[0], semconv.ErrorTypeKey).AsString())
		ack := bd.ended("ack")
		require.Len(t, ack, 1, "a settle of a lease the driver never fetched has no stream to name")
		assert.Equal(t, "stale_lease", attr(ack[0], semconv.ErrorTypeKey).AsString())
	})
}
