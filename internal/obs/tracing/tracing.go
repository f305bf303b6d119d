// Package tracing follows a window from the producer's publish to the
// worker's handler with OpenTelemetry. It wires franz-go's kotel plugin
// into the Kafka clients, so the trace context travels in each record's
// headers (W3C traceparent), and gives the worker a hook that runs every
// handler attempt in a span that is a child of the record's receive span.
//
// Tracing is off unless the standard OpenTelemetry environment asks for it
// (see FromEnv); off, it adds nothing to the clients and costs nothing.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kjob/kjob/internal/exec/handler"
)

// Tracing is one process's tracing setup. The zero value and a nil
// *Tracing are valid and off.
type Tracing struct {
	kt       *kotel.Tracer
	shutdown func(context.Context) error
}

// New traces with provider (e.g. an SDK TracerProvider with an in-memory
// exporter in tests), propagating W3C trace context in record headers.
func New(provider trace.TracerProvider) *Tracing {
	return &Tracing{kt: kotel.NewTracer(kotel.TracerProvider(provider), kotel.TracerPropagator(propagation.TraceContext{}))}
}

// FromEnv configures tracing from the standard OpenTelemetry environment
// variables. It is off (a nil *Tracing, nil error) unless
// OTEL_TRACES_EXPORTER is "otlp", or it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// OTEL_SDK_DISABLED=true turns it off. Spans are exported over OTLP/HTTP
// (the exporter reads OTEL_EXPORTER_OTLP_* for endpoint, headers,
// timeout and TLS), batched; the resource comes from OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, with service name service by default.
func FromEnv(ctx context.Context, service string) (*Tracing, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	switch exp := os.Getenv("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return nil, nil
	case "":
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf(`tracing: OTEL_TRACES_EXPORTER=%q is not supported; set "otlp" (OTLP over HTTP) or "none"`, exp)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := os.Getenv(k); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf(`tracing: %s=%q is not supported; set "http/protobuf" (kjob exports OTLP over HTTP)`, k, p)
		}
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", service)), resource.Default())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("tracing: resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	t := New(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// Enabled reports whether spans are recorded.
func (t *Tracing) Enabled() bool { return t != nil && t.kt != nil }

// ClientOpts returns the Kafka client options that trace produce and
// consume: give them to the producer and the worker (their ClientOpts).
// Off, it returns nil.
func (t *Tracing) ClientOpts() []kgo.Opt {
	if !t.Enabled() {
		return nil
	}
	return []kgo.Opt{kgo.WithHooks(t.kt)}
}

// Attempt is a worker.Config.OnAttempt hook: it runs the handler attempt
// in a "<topic> process" span, a child of the record's receive span (and so
// of the producer's publish span), keeping ctx's deadline and
// cancellation, and ends the span with the attempt's result. Off, it
// returns ctx unchanged.
func (t *Tracing) Attempt(ctx context.Context, rec *kgo.Record, job *handler.Job) (context.Context, func(error)) {
	if !t.Enabled() {
		return ctx, func(error) {}
	}
	_, span := t.kt.WithProcessSpan(rec)
	span.SetAttributes(
		attribute.String("kjob.job", job.Name()),
		attribute.String("kjob.window", job.ID()),
		attribute.Int("kjob.attempt", job.Attempt()),
		attribute.Int64("kjob.fencing_token", job.FencingToken()),
	)
	return trace.ContextWithSpan(ctx, span), func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Shutdown flushes and stops the exporter (FromEnv only).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}
