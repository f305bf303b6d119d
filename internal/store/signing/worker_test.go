package signing_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/signing"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// TestWorkerRequiresSignatures runs a worker that requires signatures on a
// real (embedded) broker and Redis: only the validly signed window runs;
// the unsigned, altered and unknown-key ones are dead-lettered with the
// reason and never reach the handler.
func TestWorkerRequiresSignatures(t *testing.T) {
	brokers := testenv.Brokers(t)
	r := testenv.NewRedis(t)
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signing.NewVerifier(true, k1)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "w"); err != nil {
		t.Fatal(err)
	}

	msg := func(job string) *kgo.Record {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		rec, err := jobmsg.Record("w", &jobmsg.Message{
			ID: jobmsg.WindowID(job, start), Job: job, Handler: "h",
			Window: jobmsg.Window{Start: start, End: start.Add(time.Hour)}, ScheduledAt: start, PublishedAt: start,
			Trigger: jobmsg.TriggerSchedule, Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Second), MaxAttempts: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	good := sign(t, k1, msg("good"))
	unsigned := msg("unsigned")
	altered := sign(t, k1, msg("altered"))
	altered.Value = []byte(strings.Replace(string(altered.Value), `"handler":"h"`, `"handler":"h" `, 1))
	unknown := sign(t, k2, msg("unknown"))
	if err := cl.ProduceSync(ctx, unsigned, altered, unknown, good).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	ran := map[string]int{}
	outcomes := map[int64]string{}
	mux := handler.NewMux()
	mux.HandleFunc("h", func(ctx context.Context, j *handler.Job) error {
		mu.Lock()
		ran[j.Name()]++
		mu.Unlock()
		return nil
	})
	w, err := worker.New(worker.Config{
		Brokers: brokers, Topic: "w", Group: "g", Store: store, Handler: mux, WorkerID: "w1",
		Logger: slog.New(slog.DiscardHandler), Verify: verifier.Verify,
		OnExecuted: func(e worker.Execution) {
			mu.Lock()
			outcomes[e.Offset] = e.Outcome
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	testenv.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(outcomes) == 4
	}, "all four records settled")
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || ran["good"] != 1 {
		t.Fatalf("handler ran %v; want only the validly signed window, once", ran)
	}
	want := map[int64]string{0: worker.OutcomeDeadLettered, 1: worker.OutcomeDeadLettered, 2: worker.OutcomeDeadLettered, 3: worker.OutcomeDone}
	for off, o := range want {
		if outcomes[off] != o {
			t.Errorf("offset %d: outcome %q, want %q", off, outcomes[off], o)
		}
	}
	dlq := testenv.ReadCommitted(t, brokers, "w.dlq")
	reasons := map[string]string{}
	for _, d := range dlq {
		for _, h := range d.Headers {
			if h.Key == worker.HeaderDLQReason {
				reasons[string(d.Key)] = string(h.Value)
			}
		}
	}
	for job, want := range map[string]string{"unsigned": "not signed", "altered": "bad signature", "unknown": "unknown signing key"} {
		if !strings.Contains(reasons[job], want) {
			t.Errorf("dead letter of %q: reason %q, want it to contain %q", job, reasons[job], want)
		}
	}
	if len(dlq) != 3 {
		t.Errorf("dead-letter topic holds %d records, want 3", len(dlq))
	}
}
