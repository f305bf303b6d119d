package kjobotel

import (
	"context"
	"testing"
)

// FromEnv follows the standard OTEL_* variables: off without them or when
// they say so, an error naming the variable for what kjob cannot export
// with, and an OTLP/HTTP provider for "otlp" or an endpoint.
func TestFromEnv(t *testing.T) {
	unset := func(t *testing.T) {
		for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
			"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
			t.Setenv(k, "")
		}
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		err  string
	}{
		{"no settings", nil, false, ""},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false, ""},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, false, ""},
		{"unsupported exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false,
			`tracing: OTEL_TRACES_EXPORTER="zipkin" is not supported; set "otlp" (OTLP over HTTP) or "none"`},
		{"grpc protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false,
			`tracing: OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not supported; set "http/protobuf" (kjob exports OTLP over HTTP)`},
		{"otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, ""},
		{"traces endpoint alone", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unset(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tp, shutdown, err := FromEnv(context.Background(), "kjob-test")
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("FromEnv = %v\nwant %s", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if shutdown == nil {
				t.Fatal("FromEnv returned a nil shutdown")
			}
			// A provider that is off is a nil interface, so that
			// WorkerConfig.TracerProvider = tp leaves tracing off.
			if (tp != nil) != tc.on {
				t.Fatalf("FromEnv provider = %v; want on %v", tp, tc.on)
			}
			if tc.on {
				// The span is left open, so nothing is exported to
				// the endpoint where nothing listens.
				if _, span := tp.Tracer("kjobotel-test").Start(context.Background(), "span"); !span.IsRecording() || !span.SpanContext().IsValid() {
					t.Error("the provider does not record spans")
				}
			}
			if err := shutdown(context.Background()); err != nil {
				t.Errorf("shutdown = %v", err)
			}
		})
	}
}
