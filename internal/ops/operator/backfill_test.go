package operator_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// TestBackfill: the operator API plans and publishes a backfill as kjobctl
// backfill does (the same PublishWindows): the plan changes nothing, the
// execution publishes each window once under its #backfill id, and a second
// backfill of the range publishes nothing new unless Rerun.
func TestBackfill(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: noop\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "w"); err != nil {
		t.Fatal(err)
	}
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "t"})
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := operator.NewRedrives(rdb, "t")
	rp, err := operator.NewReplayer(operator.ReplayerConfig{Brokers: brokers, Topic: "w", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	now := time.Date(2026, 11, 22, 10, 17, 0, 0, time.UTC)
	cfg := operator.Config{Jobs: f.Jobs, Topic: "w", DLQTopic: "w.dlq", Namespace: "t", Publisher: cl, Redriver: cl,
		Store: store, Redrives: rd, Replayer: rp, Now: func() time.Time { return now }}
	op, err := operator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spec := operator.BackfillSpec{Job: "report", From: now.Add(-3 * time.Hour).Truncate(time.Hour), To: now.Truncate(time.Hour)}
	if _, err := op.PlanBackfill(ctx, spec); err == nil {
		t.Fatal("PlanBackfill without Config.Published did not fail")
	}
	cfg.Published, err = operator.NewPublished(rdb, "t", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if op, err = operator.New(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := op.PlanBackfill(ctx, operator.BackfillSpec{Job: "nope", From: spec.From, To: spec.To}); !errors.Is(err, operator.ErrUnknownJob) {
		t.Fatalf("unknown job: %v", err)
	}
	if _, err := op.PlanBackfill(ctx, operator.BackfillSpec{Job: "report", From: spec.From, To: now.Add(time.Hour)}); err == nil {
		t.Fatal("a To in the future was planned without AllowFuture")
	}
	plan, err := op.PlanBackfill(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"report@2026-11-22T07:00:00Z#backfill", "report@2026-11-22T08:00:00Z#backfill", "report@2026-11-22T09:00:00Z#backfill"}
	if plan.Executed || plan.Windows != 3 || plan.Trigger != string(jobmsg.TriggerBackfill) || !equal(plan.Published, want) {
		t.Fatalf("plan %+v", plan)
	}
	res, err := op.Backfill(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Executed || !equal(res.Published, want) {
		t.Fatalf("backfill %+v", res)
	}
	again, err := op.Backfill(ctx, spec)
	if err != nil || len(again.Published) != 0 || !equal(again.PublishedBefore, want) {
		t.Fatalf("second backfill %+v %v", again, err)
	}
	spec.Rerun = true
	if rerun, err := op.Backfill(ctx, spec); err != nil || !equal(rerun.Published, want) {
		t.Fatalf("rerun %+v %v", rerun, err)
	}
	end, err := kadm.NewClient(cl).ListEndOffsets(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("w", 0); o.Offset != 6 {
		t.Fatalf("windows topic holds %d records, want 6 (3 backfilled, 3 rerun)", o.Offset)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type leader struct{}

func (leader) Run(ctx context.Context, lead func(context.Context) error) error { return lead(ctx) }

// TestResumeCatchup: ResumeCatchup plans the catch-up of the windows that
// fell due while the job was paused (a spec pause, through the producer
// leader) without resuming it, then resumes it through the leader and
// publishes the windows in (pause, resume] under their scheduled ids, with
// the paused version; a job that is not paused is ErrNotPaused, too many
// windows a *TooManyWindowsError, and an action whose part of the Config
// is missing names it.
func TestResumeCatchup(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: noop\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "w"); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 22, 7, 30, 0, 0, time.UTC))
	p, err := producer.New(producer.Config{Brokers: brokers, Namespace: "t", Topic: "w", Jobs: f.Jobs, Elector: leader{}, Clock: clk,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() { stop(); <-done }()
	testenv.Eventually(t, 20*time.Second, func() bool { return len(p.Status().Next) == 1 }, "producer not leading")
	sc, err := specs.NewClient(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Deployment: names.Deployment{Namespace: "t", Topic: "w"},
		Actor: "alice", Wait: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	store, _ := dedupe.New(rdb, dedupe.Config{Namespace: "t"})
	published, _ := operator.NewPublished(rdb, "t", time.Hour)
	op, err := operator.New(operator.Config{Topic: "w", Namespace: "t", Publisher: cl, Store: store, Schedules: sc,
		Published: published, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var cerr *configerr.Error
	if _, err := op.DeadLetters(ctx); !errors.As(err, &cerr) || cerr.Field != "Config.DLQTopic" {
		t.Fatalf("DeadLetters without a dead-letter topic: %v", err)
	}
	if _, err := op.PlanReplay(ctx, operator.ReplaySpec{}); !errors.As(err, &cerr) || cerr.Field != "Config.Replayer" {
		t.Fatalf("PlanReplay without a Replayer: %v", err)
	}
	bare, _ := operator.New(operator.Config{Topic: "w"})
	if _, err := bare.ResumeCatchup(ctx, operator.CatchupSpec{Job: "report"}); !errors.As(err, &cerr) || cerr.Field != "Config.Schedules" {
		t.Fatalf("ResumeCatchup without Schedules: %v", err)
	}
	if _, err := op.ResumeCatchup(ctx, operator.CatchupSpec{Job: "report", Catchup: true}); !errors.Is(err, operator.ErrNotPaused) {
		t.Fatalf("resume of a job not paused: %v", err)
	}
	if _, err := op.ResumeCatchup(ctx, operator.CatchupSpec{Job: "nope"}); !errors.Is(err, specs.ErrNotFound) {
		t.Fatalf("resume of an unknown job: %v", err)
	}
	if _, err := sc.Submit(ctx, []specs.Edit{{Op: specs.OpPause, Job: "report", Note: "upstream down"}}, ""); err != nil {
		t.Fatal(err)
	}
	clk.Set(time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)) // 08:00, 09:00 and 10:00 fall due, paused
	var tooMany *operator.TooManyWindowsError
	if _, err := op.ResumeCatchup(ctx, operator.CatchupSpec{Job: "report", Catchup: true, MaxWindows: 2}); !errors.As(err, &tooMany) || tooMany.Windows != 3 {
		t.Fatalf("catch-up over MaxWindows: %v", err)
	}
	want := []string{"report@2026-11-22T08:00:00Z", "report@2026-11-22T09:00:00Z", "report@2026-11-22T10:00:00Z"}
	plan, err := op.ResumeCatchup(ctx, operator.CatchupSpec{Job: "report", Catchup: true})
	if err != nil || plan.Executed || plan.SkippedWindows != 3 || !equal(plan.CaughtUp, want) || plan.PausedBy != "alice" || plan.PauseNote != "upstream down" {
		t.Fatalf("plan %+v %v", plan, err)
	}
	if p, err := op.Paused(ctx, "report"); err != nil || p == nil {
		t.Fatalf("a planned catch-up resumed the job: %v %v", p, err)
	}
	res, err := op.ResumeCatchup(ctx, operator.CatchupSpec{Job: "report", Note: "back", Catchup: true, Execute: true})
	if err != nil || !res.Executed || !res.ResumedAt.Equal(clk.Now()) || res.VersionBefore != 2 || res.VersionAfter != 3 || !equal(res.CaughtUp, want) ||
		res.Catchup.Trigger != string(jobmsg.TriggerCatchup) {
		t.Fatalf("resume %+v %v", res, err)
	}
	if p, err := op.Paused(ctx, "report"); err != nil || p != nil {
		t.Fatalf("still paused: %v %v", p, err)
	}
	// The caught-up windows carry the paused version, in force when they
	// fell due; the producer published none of them.
	var got []string
	for _, r := range testenv.ReadCommitted(t, brokers, "w") {
		m, err := jobmsg.FromRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s/%s/v%d", m.ID, m.Trigger, m.ScheduleVersion))
	}
	if w := "report@2026-11-22T08:00:00Z/catchup/v2 report@2026-11-22T09:00:00Z/catchup/v2 report@2026-11-22T10:00:00Z/catchup/v2"; strings.Join(got, " ") != w {
		t.Fatalf("windows topic: %s\nwant %s", strings.Join(got, " "), w)
	}
}
