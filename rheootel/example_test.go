package rheootel_test

import (
	"context"
	"encoding/json"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/rheootel"
	"github.com/rheo-go/rheo/worker"
)

// An event appended during a request is handled in the request's trace.
func Example() {
	ctx := context.Background()
	// In-memory spans for the example; a program installs its exporter's
	// provider (or sets the global one and passes nil Options).
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	opts := &rheootel.Options{TracerProvider: tp}

	raw, err := connect.Open(ctx, "sqlite::memory:", &connect.Options{Migrate: true})
	if err != nil {
		panic(err)
	}
	defer raw.Close()
	drv := rheootel.NewDriver(raw, opts)
	if err := drv.CreateStream(ctx, "orders", 1); err != nil {
		panic(err)
	}
	if err := drv.CreateGroup(ctx, "orders", "billing", nil); err != nil {
		panic(err)
	}

	// A request appends an event; its metadata carries the trace.
	reqCtx, request := tp.Tracer("shop").Start(ctx, "POST /orders")
	ev, err := drv.Append(reqCtx, "orders", json.RawMessage(`{"type": "order.placed"}`),
		&rheo.AppendOptions{Metadata: rheo.Lineage{CorrelationID: "order-42"}.Metadata()})
	if err != nil {
		panic(err)
	}
	request.End()
	var meta map[string]string
	if err := json.Unmarshal(ev.Metadata, &meta); err != nil {
		panic(err)
	}
	fmt.Println("metadata keys kept:", meta["correlation_id"])
	fmt.Println("metadata has a traceparent:", meta[rheootel.MetaTraceparent] != "")

	// The worker's handler runs under its process span.
	handled := make(chan struct{})
	w, err := worker.New(drv, &worker.Config{
		Stream: "orders",
		Group:  "billing",
		Hooks:  []any{rheootel.NewHooks(opts)},
		Handler: func(ctx context.Context, lease rheo.Lease) error {
			_, charge := tp.Tracer("billing").Start(ctx, "charge card")
			charge.End()
			close(handled)
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	<-handled
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = s
	}
	appendSpan, process, charge := byName["append orders"], byName["process orders"], byName["charge card"]
	fmt.Println("same trace as the request:", process.SpanContext().TraceID() == request.SpanContext().TraceID())
	fmt.Println("process is a child of append:", process.Parent().SpanID() == appendSpan.SpanContext().SpanID())
	fmt.Println("the handler's span is a child of process:", charge.Parent().SpanID() == process.SpanContext().SpanID())
	fmt.Println("the ack links to the event's creation context:",
		byName["ack_batch orders"].Links()[0].SpanContext.SpanID() == appendSpan.SpanContext().SpanID())
	// Output:
	// metadata keys kept: order-42
	// metadata has a traceparent: true
	// same trace as the request: true
	// process is a child of append: true
	// the handler's span is a child of process: true
	// the ack links to the event's creation context: true
}
