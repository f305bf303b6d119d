package cli

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// Tracing is off without OTEL_* settings, and says nothing; with an OTLP
// endpoint it returns a provider and logs that spans are exported, as the
// binaries did before the set-up left the library.
func TestTracing(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	tp, flush, err := Tracing(context.Background(), log, "kjob-test")
	if err != nil || tp != nil {
		t.Fatalf("Tracing without settings = %v, %v; want off", tp, err)
	}
	flush()
	if buf.Len() != 0 {
		t.Errorf("Tracing off logged %q", buf.String())
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	tp, flush, err = Tracing(context.Background(), log, "kjob-test")
	if err != nil || tp == nil {
		t.Fatalf("Tracing with an endpoint = %v, %v; want on", tp, err)
	}
	flush()
	if !strings.Contains(buf.String(), "tracing enabled: spans are exported over OTLP/HTTP") || strings.Contains(buf.String(), "flushing traces failed") {
		t.Errorf("Tracing on logged %q", buf.String())
	}
}
