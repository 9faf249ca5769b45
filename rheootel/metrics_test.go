package rheootel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/rheootel"
	"github.com/rheo-go/rheo/worker"
)

func TestMetrics(t *testing.T) {
	testbackend.Run(t, func(t *testing.T, b *testbackend.Backend) {
		t.Run("the metrics report each delivery's outcome", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			items := make([]rheo.BatchItem, 3)
			for i := range items {
				items[i] = rheo.BatchItem{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
			}
			_, err := bd.drv.AppendBatch(context.Background(), bd.stream, items, nil)
			require.NoError(t, err)

			// n=0 acks, n=1 fails once and then acks, n=2 is rejected.
			w := bd.startWorker(t, bd.config(func(ctx context.Context, l rheo.Lease) error {
				var p struct{ N int }
				require.NoError(t, json.Unmarshal(l.Event.Payload, &p))
				switch {
				case p.N == 1 && l.Attempt == 1:
					return worker.Retry(0, errors.New("flaky"))
				case p.N == 2:
					return worker.Reject(errors.New("poison"))
				}
				return nil
			}))
			outcome := func(o string) attribute.KeyValue { return rheootel.KeyOutcome.String(o) }
			eventually(t, "every outcome", func() bool {
				rm := bd.metrics(t)
				return sum(t, rm, rheootel.MetricOutcomes, outcome(rheootel.OutcomeAck)) == 2 &&
					sum(t, rm, rheootel.MetricOutcomes, outcome(rheootel.OutcomeDeadLetter)) == 1
			})
			stop(t, w)
			rm := bd.metrics(t)

			dest := []attribute.KeyValue{
				semconv.MessagingSystemKey.String("rheo"),
				semconv.MessagingDestinationName(bd.stream),
				semconv.MessagingConsumerGroupName(bd.group),
			}
			with := func(kv ...attribute.KeyValue) []attribute.KeyValue {
				return append(append([]attribute.KeyValue{}, dest...), kv...)
			}

			assert.Equal(t, int64(2), sum(t, rm, rheootel.MetricOutcomes, with(outcome(rheootel.OutcomeAck))...))
			assert.Equal(t, int64(1), sum(t, rm, rheootel.MetricOutcomes, with(outcome(rheootel.OutcomeRetry))...))
			assert.Equal(t, int64(1), sum(t, rm, rheootel.MetricOutcomes, with(outcome(rheootel.OutcomeDeadLetter))...))
			assert.Equal(t, int64(1), sum(t, rm, rheootel.MetricRedeliveries, dest...))
			assert.Equal(t, int64(0), sum(t, rm, rheootel.MetricLeaseLosses))

			const process = "messaging.process.duration"
			assert.Equal(t, uint64(4), count(t, rm, process, with(semconv.MessagingOperationName("process"))...))
			assert.Equal(t, uint64(2), count(t, rm, process, outcome(string(worker.OutcomeAck))))
			assert.Equal(t, uint64(1), count(t, rm, process, outcome(string(worker.OutcomeRetry)), semconv.ErrorTypeKey.String("*errors.errorString")))
			assert.Equal(t, uint64(1), count(t, rm, process, outcome(string(worker.OutcomeReject))))

			stream := semconv.MessagingDestinationName(bd.stream)
			assert.Equal(t, int64(3), sum(t, rm, "messaging.client.sent.messages", stream, semconv.MessagingOperationName("append_batch")))
			assert.Equal(t, int64(4), sum(t, rm, "messaging.client.consumed.messages", with(semconv.MessagingOperationName("fetch"))...))

			const op = "messaging.client.operation.duration"
			assert.Equal(t, uint64(1), count(t, rm, op, stream, semconv.MessagingOperationName("append_batch"), semconv.MessagingOperationTypeSend))
			assert.NotZero(t, count(t, rm, op, with(semconv.MessagingOperationName("fetch"), semconv.MessagingOperationTypeReceive)...))
			assert.NotZero(t, count(t, rm, op, with(semconv.MessagingOperationName("ack_batch"), semconv.MessagingOperationTypeSettle)...))
			assert.Equal(t, uint64(1), count(t, rm, op, with(semconv.MessagingOperationName("retry"))...))
			assert.Equal(t, uint64(1), count(t, rm, op, with(semconv.MessagingOperationName("reject"))...))
		})

		t.Run("a lease lost while its handler runs is reported", func(t *testing.T) {
			bd := setup(t, b, 5, nil)
			_, err := bd.drv.Append(context.Background(), bd.stream, json.RawMessage(`{}`), nil)
			require.NoError(t, err)

			running := make(chan struct{}, 2)
			var handled atomic.Int32
			w := bd.startWorker(t, bd.config(func(ctx context.Context, l rheo.Lease) error {
				if handled.Add(1) == 1 {
					running <- struct{}{}
					<-ctx.Done() // until the renewal finds the lease stale
					return nil
				}
				running <- struct{}{}
				return nil
			}))
			receive(t, "the handler to run", running)
			// A replay makes the lease stale; the next renewal finds out.
			from := int64(0)
			_, err = bd.raw.Replay(context.Background(), bd.stream, bd.group, &rheo.ReplayOptions{FromSequence: &from})
			require.NoError(t, err)
			bd.clock.Advance(6 * time.Second)

			eventually(t, "the lost lease", func() bool {
				return sum(t, bd.metrics(t), rheootel.MetricLeaseLosses) == 1
			})
			receive(t, "the replayed delivery", running)
			eventually(t, "the replayed delivery's ack", func() bool {
				return sum(t, bd.metrics(t), rheootel.MetricOutcomes, rheootel.KeyOutcome.String(rheootel.OutcomeAck)) == 1
			})
			stop(t, w)

			rm := bd.metrics(t)
			assert.Equal(t, int64(1), sum(t, rm, rheootel.MetricLeaseLosses, semconv.MessagingOperationName("renew")))
			assert.Equal(t, int64(1), sum(t, rm, rheootel.MetricOutcomes, rheootel.KeyOutcome.String(rheootel.OutcomeLeaseLost)))
			assert.Equal(t, uint64(1), count(t, rm, "messaging.process.duration",
				rheootel.KeyOutcome.String(string(worker.OutcomeDiscarded)), semconv.ErrorTypeKey.String(rheootel.OutcomeLeaseLost)))

			var discarded int
			for _, s := range bd.ended("process " + bd.stream) {
				if attr(s, rheootel.KeyOutcome).AsString() == string(worker.OutcomeDiscarded) {
					discarded++
					assert.Equal(t, codes.Error, s.Status().Code)
				}
			}
			assert.Equal(t, 1, discarded)
		})
	})
}
