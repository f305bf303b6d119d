package operator_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	windowrec "github.com/kjob/kjob/internal/store/window" // window is a helper in replay_test.go
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// TestTriggerAndRedrive: Trigger publishes a manual window of the job to
// its partition; a dead letter of it is read, planned and redriven once:
// republished to the windows topic without the dead-letter headers, its
// window's record cleared, and the redrive recorded, so a second plan
// leaves it out.
func TestTriggerAndRedrive(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: noop\n    payload: {a: 1}\n    overlap: replace\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, tp := range []string{"w", "w.dlq"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 11, 22, 10, 17, 0, 0, time.UTC)
	m, rec, err := operator.Trigger(ctx, cl, names.Deployment{Topic: "w"}, f.Jobs[0], nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.ID, "report@2026-11-22T10:17:00Z#manual-") || m.Trigger != jobmsg.TriggerManual || !m.Window.End.Equal(now.Add(43*time.Minute)) ||
		string(m.Payload) != `{"a":1}` || rec.Topic != "w" || string(rec.Key) != "report" {
		t.Fatalf("triggered %+v as %s[%d]@%d", m, rec.Topic, rec.Partition, rec.Offset)
	}
	// The window carries the job's policy as the producer's do, overlap
	// included, and so do backfill's and catch-up's (window.Message).
	if m.Policy != windowrec.Policy(f.Jobs[0]) || m.Policy.Overlap != jobmsg.OverlapReplace {
		t.Fatalf("triggered with policy %+v, want the job's %+v", m.Policy, windowrec.Policy(f.Jobs[0]))
	}
	if p := windowrec.Message(f.Jobs[0], windowrec.Publication{Start: now, Trigger: jobmsg.TriggerBackfill, ID: "report@x", PublishedAt: now}).Policy; p != windowrec.Policy(f.Jobs[0]) {
		t.Fatalf("windowrec.Message policy %+v, want the job's %+v", p, windowrec.Policy(f.Jobs[0]))
	}

	// The worker dead-letters the window.
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "t"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Claim(ctx, m.ID, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.DeadLetter(ctx, m.ID, c.Token, "boom"); err != nil {
		t.Fatal(err)
	}
	letter := &kgo.Record{Topic: "w.dlq", Partition: 0, Key: rec.Key, Value: rec.Value, Headers: append(slices.Clone(rec.Headers),
		kgo.RecordHeader{Key: worker.HeaderDLQReason, Value: []byte("boom")}, kgo.RecordHeader{Key: worker.HeaderDLQTopic, Value: []byte("w")},
		kgo.RecordHeader{Key: worker.HeaderDLQPartition, Value: []byte("1")}, kgo.RecordHeader{Key: worker.HeaderDLQOffset, Value: []byte("0")})}
	mcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer mcl.Close()
	if err := mcl.ProduceSync(ctx, letter).FirstErr(); err != nil {
		t.Fatal(err)
	}

	rd, err := operator.NewRedrives(rdb, "t")
	if err != nil {
		t.Fatal(err)
	}
	read := func() []operator.RedriveItem {
		t.Helper()
		ls, err := operator.ReadDeadLetters(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, "w.dlq")
		if err != nil {
			t.Fatal(err)
		}
		if err := operator.AnnotateDeadLetters(ctx, store, rd, "w.dlq", ls); err != nil {
			t.Fatal(err)
		}
		return operator.PlanRedrive(ls, false)
	}
	items := read()
	if len(items) != 1 || items[0].ID != "0" || items[0].WindowID != m.ID || items[0].Skip != "" || items[0].WindowState.String() != "dead (token 1)" {
		t.Fatalf("planned %+v", items)
	}
	out, err := operator.ExecuteRedrive(ctx, operator.RedriveConfig{Client: cl, Store: store, Redrives: rd, DLQTopic: "w.dlq", Topic: "w", By: "test", Now: time.Now}, items, false)
	if err != nil || len(out) != 1 || out[0].WindowID != m.ID {
		t.Fatalf("redrove %+v, %v", out, err)
	}
	if _, err := store.State(ctx, m.ID); err == nil {
		t.Fatal("the redriven window's record was kept; want it cleared for a fresh start")
	}
	recs, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"w": {out[0].Partition: kgo.NewOffset().At(out[0].Offset)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer recs.Close()
	fs := recs.PollFetches(ctx)
	got := fs.Records()
	if len(got) == 0 || string(got[0].Value) != string(rec.Value) {
		t.Fatalf("republished records %v", got)
	}
	for _, h := range got[0].Headers {
		if strings.HasPrefix(h.Key, "kjob-dlq-") {
			t.Fatalf("republished with dead-letter header %s", h.Key)
		}
	}
	if again := read(); !strings.HasPrefix(again[0].Skip, "redriven before, at ") {
		t.Fatalf("second plan: %+v, want it left out as redriven before", again[0])
	}
}

func TestAuditLog(t *testing.T) {
	rdb := testenv.NewRedis(t).Client()
	ctx := context.Background()
	if _, err := operator.NewAuditLog(rdb, "", 0); err == nil {
		t.Fatal("NewAuditLog accepted an empty namespace")
	}
	a, err := operator.NewAuditLog(rdb, "t", 10)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range 300 {
		if err := a.Append(ctx, operator.AuditRecord{At: at.Add(time.Duration(i) * time.Second), Who: "alice", Tool: "dashboard", Action: "trigger",
			Target: "report", Outcome: "ok", Detail: strings.Repeat("x", i%3), Request: "r" + strings.Repeat("1", i%5)}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := a.Recent(ctx, 3)
	if err != nil || len(recs) != 3 || !recs[0].At.Equal(at.Add(299*time.Second)) || recs[0].Who != "alice" || recs[0].ID == "" {
		t.Fatalf("Recent(3) = %+v, %v", recs, err)
	}
	if n := rdb.XLen(ctx, a.Key()).Val(); n > 10+100 {
		t.Fatalf("the audit stream holds %d records after 300 appends with MaxLen ~10", n)
	}
}
