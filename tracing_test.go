package kjob_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// With a TracerProvider in their configs, a producer and a worker trace a
// window from its publish to the handler: the handler runs in the
// worker's "process" span, in the trace the producer's "publish" span
// began, with the job, window, attempt and fencing token as attributes.
// Tracing is opt-in: the provider is the caller's, and nothing else turns
// it on (kjobotel.FromEnv builds one from OTEL_*, as the binaries do).
func TestTracerProviderFollowsAWindow(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	file, err := schedule.Parse("schedules.yaml", []byte("jobs:\n  - name: traced\n    schedule: \"@every 1s\"\n    handler: traced\n"))
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	log := slog.New(slog.NewTextHandler(testenv.NewLogBuffer(t), nil))

	type seen struct {
		sc                trace.SpanContext
		window            string
		attempt           int
		token             int64
		deadline, running bool
	}
	got := make(chan seen, 1)
	w, err := kjob.NewWorker(kjob.WorkerConfig{Brokers: brokers, Redis: rdb, ID: "w1", Logger: log, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	w.HandleFunc("traced", func(ctx context.Context, j *kjob.Job) error {
		_, deadline := ctx.Deadline()
		select {
		case got <- seen{trace.SpanContextFromContext(ctx), j.ID(), j.Attempt(), j.FencingToken(), deadline, trace.SpanFromContext(ctx).IsRecording()}:
		default:
		}
		return nil
	})
	p, err := kjob.NewProducer(kjob.ProducerConfig{Brokers: brokers, Redis: rdb, ID: "p1", Jobs: file.Jobs, LeaseTTL: time.Second, Logger: log, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- w.Run(ctx) }()
	go func() { done <- p.Run(ctx) }()
	s := testenv.Recv(t, got, 60*time.Second, "the traced handler's first run")
	cancel()
	for range 2 {
		if err := testenv.Recv(t, done, 30*time.Second, "Run's return after cancel"); err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
	}

	if !s.sc.IsValid() || !s.running || !s.deadline {
		t.Fatalf("handler context: span %v (recording %v), deadline %v; want a recording span and the window's timeout", s.sc, s.running, s.deadline)
	}
	topic := names.Deployment{}.WithDefaults().WindowsTopic()
	var publish, process *tracetest.SpanStub
	spans := exp.GetSpans()
	for i, sp := range spans {
		if sp.SpanContext.TraceID() != s.sc.TraceID() {
			continue
		}
		switch sp.Name {
		case topic + " publish":
			publish = &spans[i]
		case topic + " process":
			if sp.SpanContext.SpanID() == s.sc.SpanID() {
				process = &spans[i]
			}
		}
	}
	if publish == nil || process == nil {
		var names []string
		for _, sp := range spans {
			names = append(names, sp.Name)
		}
		t.Fatalf("in the handler's trace want the producer's %q span and the handler's %q span; spans recorded: %v", topic+" publish", topic+" process", names)
	}
	attrs := map[string]string{}
	for _, a := range process.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	want := map[string]string{"kjob.job": "traced", "kjob.window": s.window, "kjob.attempt": "1", "kjob.fencing_token": strconv.FormatInt(s.token, 10)}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("process span attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}
	if s.attempt != 1 {
		t.Errorf("handler attempt %d, want 1", s.attempt)
	}
}
