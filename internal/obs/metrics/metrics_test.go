package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

func TestHooks(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	start := time.Now().Add(-time.Hour) // due before the lease was acquired

	m.LeaseChanged(lease.Event{Kind: lease.Acquired})
	m.Published([]producer.Published{
		{Job: "a", Trigger: jobmsg.TriggerSchedule, Start: start, PublishedAt: start.Add(2 * time.Millisecond)},
		{Job: "a", Trigger: jobmsg.TriggerCatchup, Start: start, PublishedAt: start.Add(time.Second)},
	})
	m.Published([]producer.Published{{Job: "b", Trigger: jobmsg.TriggerSchedule, Start: start, PublishedAt: start}})
	m.Skipped("a", 3)
	m.LeaseChanged(lease.Event{Kind: lease.Released})
	m.Executed(worker.Execution{Job: "a", Outcome: worker.OutcomeDone, Attempt: 1, ScheduledAt: start, Started: start.Add(5 * time.Millisecond), Finished: start.Add(time.Second)})
	m.Executed(worker.Execution{Job: "a", Outcome: worker.OutcomeSkippedDone})
	m.Executed(worker.Execution{Outcome: worker.OutcomeDeadLettered, Started: start, Finished: start})

	for _, tc := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"published a/schedule", m.published.WithLabelValues("a", "schedule"), 1},
		{"published a/catchup", m.published.WithLabelValues("a", "catchup"), 1},
		{"published b/schedule", m.published.WithLabelValues("b", "schedule"), 1},
		{"skipped a", m.skipped.WithLabelValues("a"), 3},
		{"lease held after release", m.leaseHeld, 0},
		{"acquired", m.leaderChanges.WithLabelValues("acquired"), 1},
		{"released", m.leaderChanges.WithLabelValues("released"), 1},
		{"done", m.executions.WithLabelValues("a", "done"), 1},
		{"skipped-done", m.executions.WithLabelValues("a", "skipped-done"), 1},
		{"dead-lettered undecodable", m.deadLettered.WithLabelValues(""), 1},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	lint, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lint {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	count := func(h prometheus.Histogram) uint64 {
		var d dto.Metric
		if err := h.Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetHistogram().GetSampleCount()
	}
	// One takeover observation: the first publication after acquiring.
	if got := count(m.takeover); got != 1 {
		t.Errorf("takeover observations = %d, want 1", got)
	}
	if got := count(m.publishLateness); got != 3 {
		t.Errorf("publish lateness observations = %d, want 3", got)
	}
	if got := count(m.handlerLateness); got != 1 {
		t.Errorf("handler lateness observations = %d, want 1 (skips and undecodable records have none)", got)
	}
}

// The store wrapper counts claim outcomes (those chained to completions
// included), fenced settlements and store errors.
func TestStore(t *testing.T) {
	r := testenv.NewRedis(t)
	s, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "m"})
	if err != nil {
		t.Fatal(err)
	}
	m := New(prometheus.NewRegistry())
	ws := m.Store(s)
	ctx := context.Background()
	cs, err := ws.ClaimBatch(ctx, []string{"j@1", "j@2"}, "w")
	if err != nil {
		t.Fatal(err)
	}
	// A completion that claims the job's next window counts that claim.
	if res, err := ws.Settle(ctx, []dedupe.Settlement{{ID: "j@1", Op: dedupe.OpComplete, Token: cs[0].Token, Next: "j@4", Owner: "w"}}); err != nil || res[0].Err != nil || res[0].Next.Outcome != dedupe.Claimed {
		t.Fatal(err, res)
	}
	if _, err := ws.ClaimBatch(ctx, []string{"j@1"}, "w"); err != nil { // done
		t.Fatal(err)
	}
	if _, err := ws.ClaimBatch(ctx, []string{"j@2"}, "x"); err != nil { // busy
		t.Fatal(err)
	}
	errs, err := ws.Settle(ctx, []dedupe.Settlement{{ID: "j@2", Op: dedupe.OpComplete, Token: cs[1].Token + 1}})
	if err != nil || !errors.Is(errs[0].Err, dedupe.ErrFenced) {
		t.Fatalf("complete with a wrong token: %v %v", err, errs)
	}
	r.Kill()
	if _, err := ws.ClaimBatch(ctx, []string{"j@3"}, "w"); err == nil {
		t.Fatal("claim with Redis down succeeded")
	}
	if _, err := ws.Settle(ctx, []dedupe.Settlement{{ID: "j@3", Op: dedupe.OpExtend, Token: 1}}); err == nil {
		t.Fatal("settle with Redis down succeeded")
	}
	for o, want := range map[string]float64{"claimed": 3, "skipped-done": 1, "waited": 1, "fenced": 1} {
		if got := testutil.ToFloat64(m.dedupe.WithLabelValues(o)); got != want {
			t.Errorf("dedupe %s = %v, want %v", o, got, want)
		}
	}
	if got := testutil.ToFloat64(m.dedupeErrors.WithLabelValues("claim")); got != 1 {
		t.Errorf("claim errors = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.dedupeErrors.WithLabelValues("extend")); got != 1 {
		t.Errorf("extend errors = %v, want 1", got)
	}
}

func TestNames(t *testing.T) {
	names := Names()
	for _, want := range []string{"kjob_windows_published_total", "kjob_lease_held", "kjob_handler_lateness_seconds", "kjob_consumer_lag", "kjob_redis_pool_hits_total", "kjob_dead_lettered_total"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names() = %v, missing %s", names, want)
		}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "kjob_") {
			t.Errorf("metric %s does not start with kjob_", n)
		}
	}
}

func TestWithoutJobLabel(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, WithoutJobLabel())
	now := time.Now()
	m.Published([]producer.Published{
		{Job: "a", Trigger: jobmsg.TriggerSchedule, Start: now, PublishedAt: now},
		{Job: "b", Trigger: jobmsg.TriggerSchedule, Start: now, PublishedAt: now},
	})
	if got := testutil.ToFloat64(m.published.WithLabelValues("", "schedule")); got != 2 {
		t.Fatalf(`kjob_windows_published_total{kjob_job=""} = %v, want 2 (both jobs under one series)`, got)
	}
	if n := testutil.CollectAndCount(m.published); n != 1 {
		t.Fatalf("%d published series, want 1", n)
	}
}

// A worker takes job names from records: made-up names beyond the bound
// are folded into kjob_job="other" and counted, so a writer to the windows
// topic cannot add series without bound.
func TestJobLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, WithMaxJobLabels(3))
	for i := range 100 {
		m.Executed(worker.Execution{Job: fmt.Sprintf("made-up-%d", i), Outcome: worker.OutcomeSkippedDone})
	}
	m.Executed(worker.Execution{Job: "made-up-1", Outcome: worker.OutcomeSkippedDone}) // one of the first three: still its own
	if got := testutil.CollectAndCount(m.executions); got != 4 {
		t.Errorf("%d executions series, want 4 (3 jobs and other)", got)
	}
	if got := testutil.ToFloat64(m.executions.WithLabelValues(OtherJobLabel, worker.OutcomeSkippedDone)); got != 97 {
		t.Errorf(`kjob_job="other" = %v, want 97`, got)
	}
	if got := testutil.ToFloat64(m.executions.WithLabelValues("made-up-1", worker.OutcomeSkippedDone)); got != 2 {
		t.Errorf(`kjob_job="made-up-1" = %v, want 2`, got)
	}
	if got := testutil.ToFloat64(m.folded); got != 97 {
		t.Errorf("kjob_metrics_job_labels_folded_total = %v, want 97", got)
	}
	if n := len(New(prometheus.NewRegistry()).jobs); n != 0 || DefaultMaxJobLabels != 1000 {
		t.Errorf("default bound %d", DefaultMaxJobLabels)
	}
}

// kjob_partition_stalled_seconds reports each stalled partition with how
// long it has been stalled, and nothing while none is.
func TestStalls(t *testing.T) {
	var stalls []dedupe.Stall
	reg := prometheus.NewRegistry()
	reg.MustRegister(Stalls(func() []dedupe.Stall { return stalls }))
	if n, err := testutil.GatherAndCount(reg, "kjob_partition_stalled_seconds"); err != nil || n != 0 {
		t.Fatalf("series while nothing is stalled: %d, %v", n, err)
	}
	stalls = []dedupe.Stall{{Partition: 3, Since: time.Now().Add(-time.Minute), Reason: "its dead letter cannot be written"}}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].Metric) != 1 {
		t.Fatalf("gather: %v %v", mfs, err)
	}
	m := mfs[0].Metric[0]
	if m.GetLabel()[0].GetValue() != "3" || m.GetGauge().GetValue() < 59 {
		t.Errorf("stalled series %v, want partition 3 at about 60s", m)
	}
}
