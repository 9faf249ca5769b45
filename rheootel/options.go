package rheootel

import (
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/rheo-go/rheo/rheootel"

// DefaultParentWindow is the default of Options.ParentWindow.
const DefaultParentWindow = time.Minute

// Options configure NewDriver and NewHooks. A nil *Options means the
// defaults.
type Options struct {
	// TracerProvider makes the spans. Defaults to otel.GetTracerProvider(),
	// which forwards to a provider installed later with
	// otel.SetTracerProvider.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics. Defaults to otel.GetMeterProvider(),
	// which forwards to a provider installed later with
	// otel.SetMeterProvider.
	MeterProvider metric.MeterProvider
	// ParentWindow decides which deliveries continue the producer's trace
	// (NewHooks only): the process span of a first delivery (attempt 1)
	// leased at most ParentWindow after the event's ts is a child of the
	// event's creation context; every other one starts a trace of its own.
	// Both link to the creation context. See the package documentation.
	// Defaults to DefaultParentWindow (1 minute); a negative value never
	// continues the producer's trace and only links to it.
	ParentWindow time.Duration
}

// settled is an Options with its defaults filled in.
type settled struct {
	tracer       trace.Tracer
	meter        metric.Meter
	parentWindow time.Duration
}

func (o *Options) settle() settled {
	if o == nil {
		o = &Options{}
	}
	tp, mp := o.TracerProvider, o.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	window := o.ParentWindow
	if window == 0 {
		window = DefaultParentWindow
	}
	return settled{
		tracer:       tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		meter:        mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL)),
		parentWindow: window,
	}
}
