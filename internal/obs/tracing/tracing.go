// Package tracing follows a window from the producer's publish to the
// worker's handler with OpenTelemetry. It wires franz-go's kotel plugin
// into the Kafka clients, so the trace context travels in each record's
// headers (W3C traceparent), and gives the worker a hook that runs every
// handler attempt in a span that is a child of the record's receive span.
//
// It stands on the OpenTelemetry API alone: the TracerProvider comes from
// the process (WorkerConfig.TracerProvider, ProducerConfig.TracerProvider;
// the binaries build one from the OTEL_* environment with kjobotel.FromEnv),
// so a program that does not trace links no SDK, no exporter and no gRPC.
// Without a provider it is off, adds nothing to the clients and costs
// nothing.
package tracing

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is one process's tracing setup. The zero value and a nil
// *Tracing are valid and off.
type Tracing struct {
	kt *kotel.Tracer
}

// New traces with provider (an SDK TracerProvider, e.g. kjobotel.FromEnv's
// or one with an in-memory exporter in tests), propagating W3C trace
// context in record headers. A nil provider is off: New returns nil.
// Whoever built provider shuts it down; Tracing never does.
func New(provider trace.TracerProvider) *Tracing {
	if provider == nil {
		return nil
	}
	return &Tracing{kt: kotel.NewTracer(kotel.TracerProvider(provider), kotel.TracerPropagator(propagation.TraceContext{}))}
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
// at the window whose record is rec (job is the job's name, window the
// window's id, attempt the attempt number from 1, token the claim's
// fencing token) in a "<topic> process" span, a child of the record's
// receive span (and so of the producer's publish span), keeping ctx's
// deadline and cancellation, and ends the span with the attempt's result.
// Off, it returns ctx unchanged. It takes plain values, not the handler's
// Job, so that tracing depends on no handler API.
func (t *Tracing) Attempt(ctx context.Context, rec *kgo.Record, job, window string, attempt int, token int64) (context.Context, func(error)) {
	if !t.Enabled() {
		return ctx, func(error) {}
	}
	_, span := t.kt.WithProcessSpan(rec)
	span.SetAttributes(
		attribute.String("kjob.job", job),
		attribute.String("kjob.window", window),
		attribute.Int("kjob.attempt", attempt),
		attribute.Int64("kjob.fencing_token", token),
	)
	return trace.ContextWithSpan(ctx, span), func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
