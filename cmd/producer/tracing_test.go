package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The producer binary still traces from the OTEL_* environment (through
// kjobotel, now that the library only takes a TracerProvider): a setting
// it cannot export with stops it at start-up, with the message it gave
// before.
func TestRunRefusesUnsupportedTracing(t *testing.T) {
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(schedules, []byte("jobs:\n  - name: nightly\n    schedule: \"@daily\"\n    handler: log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			`tracing: OTEL_TRACES_EXPORTER="zipkin" is not supported; set "otlp" (OTLP over HTTP) or "none"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			`tracing: OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not supported; set "http/protobuf" (kjob exports OTLP over HTTP)`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Setenv("KJOB_SCHEDULES", schedules)
			t.Setenv("KJOB_HTTP_ADDR", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if err := run(context.Background(), nil); err == nil || err.Error() != tc.want {
				t.Fatalf("run with %v = %v\nwant %s", tc.env, err, tc.want)
			}
		})
	}
}
