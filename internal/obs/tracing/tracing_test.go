package tracing

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// A window's trace starts at the publish and ends in the handler: the
// handler's span is a child of the record's receive span, in the same
// trace as the publish span, and the handler keeps its timeout.
func TestPublishToHandler(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := New(tp)

	brokers := testenv.Brokers(t)
	r := testenv.NewRedis(t)
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "trace"})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, tr.ClientOpts()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(pub).CreateTopic(ctx, 1, 1, nil, "w"); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	rec, err := jobmsg.Record("w", &jobmsg.Message{
		ID: jobmsg.WindowID("traced", start), Job: "traced", Handler: "h",
		Window: jobmsg.Window{Start: start, End: start.Add(time.Minute)}, ScheduledAt: start, PublishedAt: start,
		Trigger: jobmsg.TriggerSchedule, Policy: jobmsg.Policy{Timeout: jobmsg.Duration(10 * time.Second), MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}

	type seen struct {
		sc       trace.SpanContext
		deadline bool
	}
	got := make(chan seen, 1)
	mux := handler.NewMux()
	mux.HandleFunc("h", func(ctx context.Context, j *handler.Job) error {
		_, ok := ctx.Deadline()
		got <- seen{trace.SpanContextFromContext(ctx), ok}
		return nil
	})
	w, err := worker.New(worker.Config{
		Brokers: brokers, Topic: "w", Group: "g", Store: store, Handler: mux, WorkerID: "w1",
		ClientOpts: tr.ClientOpts(), OnAttempt: tr.Attempt,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var s seen
	select {
	case s = <-got:
	case <-ctx.Done():
		t.Fatal("handler did not run")
	}
	wcancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !s.deadline {
		t.Error("handler context lost the job timeout")
	}
	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, sp := range spans {
		byName[sp.Name] = sp
	}
	publish, receive, process := byName["w publish"], byName["w receive"], byName["w process"]
	if !publish.SpanContext.IsValid() || !receive.SpanContext.IsValid() || !process.SpanContext.IsValid() {
		t.Fatalf("want publish, receive and process spans, got %d spans: %v", len(spans), names(spans))
	}
	if s.sc.TraceID() != publish.SpanContext.TraceID() || s.sc.SpanID() != process.SpanContext.SpanID() {
		t.Errorf("handler ran in span %v, want the process span %v of the publish trace %v", s.sc, process.SpanContext, publish.SpanContext.TraceID())
	}
	if process.Parent.SpanID() != receive.SpanContext.SpanID() || receive.Parent.SpanID() != publish.SpanContext.SpanID() {
		t.Errorf("span parents: process <- %v (receive %v), receive <- %v (publish %v)", process.Parent.SpanID(), receive.SpanContext.SpanID(), receive.Parent.SpanID(), publish.SpanContext.SpanID())
	}
	attrs := map[string]string{}
	for _, a := range process.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["kjob.window"] != jobmsg.WindowID("traced", start) || attrs["kjob.attempt"] != "1" {
		t.Errorf("process span attributes = %v", attrs)
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// Without a TracerProvider tracing is off and adds nothing: no client
// hooks, and the attempt hook hands the handler its own context.
func TestOffWithoutProvider(t *testing.T) {
	tr := New(nil)
	if tr.Enabled() || tr.ClientOpts() != nil {
		t.Fatalf("New(nil) = %v; want off", tr)
	}
	ctx := context.Background()
	if got, end := tr.Attempt(ctx, &kgo.Record{}, "j", "j@1", 1, 1); got != ctx {
		t.Fatal("Attempt changed the context while off")
	} else {
		end(nil)
	}
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	if tr := New(tp); !tr.Enabled() || len(tr.ClientOpts()) != 1 {
		t.Fatalf("New(provider) = %v; want on, with one client hook", tr)
	}
}
