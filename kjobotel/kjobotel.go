// Package kjobotel builds an OpenTelemetry TracerProvider from the standard
// OTEL_* environment, as kjob's own binaries (cmd/worker, cmd/producer) do,
// for a worker or producer main of your own:
//
//	tp, shutdown, err := kjobotel.FromEnv(ctx, "my-worker")
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer shutdown(context.Background())
//	w, err := kjob.NewWorker(kjob.WorkerConfig{..., TracerProvider: tp})
//
// It is a plug-in, as franz-go's kotel is: the kjob package itself needs
// only the OpenTelemetry API, so a program that does not import kjobotel
// (or another SDK) links neither the OpenTelemetry SDK nor the OTLP
// exporter nor gRPC, which that exporter's protobuf types bring in.
// Any other trace.TracerProvider (an SDK provider with exporters of your
// choice) works in WorkerConfig.TracerProvider just as well.
package kjobotel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// FromEnv builds a TracerProvider from the standard OpenTelemetry
// environment variables, for the process named service. Tracing is off (a
// nil provider, a shutdown that does nothing, a nil error) unless
// OTEL_TRACES_EXPORTER is "otlp", or it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// OTEL_SDK_DISABLED=true turns it off. Spans are exported over OTLP/HTTP
// (the exporter reads OTEL_EXPORTER_OTLP_* for endpoint, headers,
// timeout and TLS), batched; the resource comes from OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, with service name service by default. Another
// exporter or protocol is an error that names the variable.
//
// Give the provider to WorkerConfig.TracerProvider or
// ProducerConfig.TracerProvider (nil there is off, too), and call shutdown
// once the worker or producer has returned from Run: it flushes the spans
// still buffered, until ctx is done. shutdown is never nil.
func FromEnv(ctx context.Context, service string) (provider trace.TracerProvider, shutdown func(context.Context) error, err error) {
	off := func(context.Context) error { return nil }
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, off, nil
	}
	switch exp := os.Getenv("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return nil, off, nil
	case "":
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, off, nil
		}
	case "otlp":
	default:
		return nil, off, fmt.Errorf(`tracing: OTEL_TRACES_EXPORTER=%q is not supported; set "otlp" (OTLP over HTTP) or "none"`, exp)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := os.Getenv(k); p != "" && p != "http/protobuf" {
			return nil, off, fmt.Errorf(`tracing: %s=%q is not supported; set "http/protobuf" (kjob exports OTLP over HTTP)`, k, p)
		}
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, off, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", service)), resource.Default())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, off, fmt.Errorf("tracing: resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}
