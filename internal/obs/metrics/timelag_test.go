package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

type fakeTimeLag struct {
	mu  sync.Mutex
	rep *inspect.TimeLagReport
	err error
}

func (f *fakeTimeLag) Read(context.Context) (*inspect.TimeLagReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rep, f.err
}

func (f *fakeTimeLag) set(rep *inspect.TimeLagReport, err error) {
	f.mu.Lock()
	f.rep, f.err = rep, err
	f.mu.Unlock()
}

// TestTimeLagGauges: the ages are computed at scrape time from the last
// read, grow while reads fail, and per job fold into kjob_job="" without
// the job label; nothing is exported before the first read.
func TestTimeLagGauges(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	f := &fakeTimeLag{}
	rep := &inspect.TimeLagReport{
		Partitions: []inspect.PartitionTimeLag{
			{Partition: 0, Windows: 3, Oldest: &inspect.UnsettledWindow{ID: "slow@x", Job: "slow", Due: t0.Add(-30 * time.Second)}},
			{Partition: 1, Windows: 5000, AtLeast: true},
		},
		Jobs: []inspect.JobTimeLag{
			{Job: "slow", Oldest: &inspect.UnsettledWindow{ID: "slow@x", Job: "slow", Due: t0.Add(-30 * time.Second)},
				NewestSettled: &inspect.SettledWindow{Start: t0.Add(-time.Hour)}},
			{Job: "fast", NewestSettled: &inspect.SettledWindow{Start: t0.Add(-10 * time.Second)}},
		},
	}
	for _, jobLabel := range []bool{true, false} {
		now = t0
		reg := prometheus.NewPedanticRegistry()
		c := newTimeLagCollector(f, jobLabel, 0, clock)
		reg.MustRegister(c)
		if n := testutil.CollectAndCount(c, "kjob_oldest_unsettled_window_age_seconds"); n != 0 {
			t.Fatalf("%d age series before the first read, want none", n)
		}
		f.set(rep, nil)
		if err := c.refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		advance(5 * time.Second)
		want := `
# HELP kjob_oldest_unsettled_window_age_seconds Age of the oldest window of the partition that is published and due but not settled (done, dead-lettered, skipped or superseded): now minus its start (for a backfilled window: minus when it was published); 0 if none, NaN while it cannot be computed (kjob_time_lag_error 1) if the last read found none. A lower bound when kjob_time_lag_truncated is 1.
# TYPE kjob_oldest_unsettled_window_age_seconds gauge
kjob_oldest_unsettled_window_age_seconds{partition="0"} 35
kjob_oldest_unsettled_window_age_seconds{partition="1"} 0
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), "kjob_oldest_unsettled_window_age_seconds"); err != nil {
			t.Fatal(err)
		}
		var jobs string
		if jobLabel {
			jobs = `
# HELP kjob_job_oldest_unsettled_window_age_seconds Age of the job's oldest published, due and unsettled window; 0 if none, NaN while it cannot be computed (kjob_time_lag_error 1) if the last read found none.
# TYPE kjob_job_oldest_unsettled_window_age_seconds gauge
kjob_job_oldest_unsettled_window_age_seconds{kjob_job="fast"} 0
kjob_job_oldest_unsettled_window_age_seconds{kjob_job="slow"} 35
# HELP kjob_newest_settled_window_age_seconds Age of the newest settled window of the job seen by this worker: now minus its start.
# TYPE kjob_newest_settled_window_age_seconds gauge
kjob_newest_settled_window_age_seconds{kjob_job="fast"} 15
kjob_newest_settled_window_age_seconds{kjob_job="slow"} 3605
`
		} else {
			jobs = `
# HELP kjob_job_oldest_unsettled_window_age_seconds Age of the job's oldest published, due and unsettled window; 0 if none, NaN while it cannot be computed (kjob_time_lag_error 1) if the last read found none.
# TYPE kjob_job_oldest_unsettled_window_age_seconds gauge
kjob_job_oldest_unsettled_window_age_seconds{kjob_job=""} 35
# HELP kjob_newest_settled_window_age_seconds Age of the newest settled window of the job seen by this worker: now minus its start.
# TYPE kjob_newest_settled_window_age_seconds gauge
kjob_newest_settled_window_age_seconds{kjob_job=""} 3605
`
		}
		if err := testutil.CollectAndCompare(c, strings.NewReader(jobs), "kjob_job_oldest_unsettled_window_age_seconds", "kjob_newest_settled_window_age_seconds"); err != nil {
			t.Fatalf("job label %v: %v", jobLabel, err)
		}
		if got := testutil.ToFloat64(collectOne(t, c, "kjob_time_lag_truncated", "1")); got != 1 {
			t.Fatalf("truncated{partition=1} = %v", got)
		}
		if got := testutil.ToFloat64(collectOne(t, c, "kjob_consumer_lag_windows", "0")); got != 3 {
			t.Fatalf("windows{partition=0} = %v", got)
		}
		// A failing read: the oldest window keeps aging.
		f.set(nil, errors.New("redis down"))
		if err := c.refresh(context.Background()); err == nil {
			t.Fatal("refresh with a failing reader succeeded")
		}
		advance(10 * time.Second)
		if got := testutil.ToFloat64(collectOne(t, c, "kjob_oldest_unsettled_window_age_seconds", "0")); got != 45 {
			t.Fatalf("age after a failed read = %v, want 45 (still growing)", got)
		}
		lint, err := testutil.GatherAndLint(reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range lint {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

// TestTimeLagJobLabelsBounded: job names come from the records, so only
// the first DefaultMaxJobLabels get a series of their own; the rest share
// kjob_job="other" with the largest age among them.
func TestTimeLagJobLabelsBounded(t *testing.T) {
	const timeLagMaxJobs = DefaultMaxJobLabels
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	f := &fakeTimeLag{}
	rep := &inspect.TimeLagReport{}
	for i := range timeLagMaxJobs + 50 {
		name := fmt.Sprintf("job-%04d", i)
		rep.Jobs = append(rep.Jobs, inspect.JobTimeLag{Job: name, Oldest: &inspect.UnsettledWindow{Due: t0.Add(-time.Duration(i) * time.Second)},
			NewestSettled: &inspect.SettledWindow{Start: t0.Add(-time.Duration(i) * time.Minute)}})
	}
	f.set(rep, nil)
	c := newTimeLagCollector(f, true, 0, func() time.Time { return t0 })
	if err := c.refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "kjob_job_oldest_unsettled_window_age_seconds"); n != timeLagMaxJobs+1 {
		t.Fatalf("%d per-job series, want %d and other", n, timeLagMaxJobs)
	}
	if got := testutil.ToFloat64(collectOne(t, c, "kjob_job_oldest_unsettled_window_age_seconds", OtherJobLabel)); got != float64(timeLagMaxJobs+49) {
		t.Fatalf(`kjob_job="other" age = %v, want the largest among the other jobs, %d`, got, timeLagMaxJobs+49)
	}
	if got := testutil.ToFloat64(collectOne(t, c, "kjob_newest_settled_window_age_seconds", OtherJobLabel)); got != float64(60*(timeLagMaxJobs+49)) {
		t.Fatalf(`kjob_job="other" newest settled age = %v, want the stalest, %d`, got, 60*(timeLagMaxJobs+49))
	}
}

// TestTimeLagMaxJobsOption: the worker's --metrics-max-jobs bounds the time
// lag's kjob_job values too (WithTimeLagMaxJobs), not only the other
// metrics'.
func TestTimeLagMaxJobsOption(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	f := &fakeTimeLag{}
	rep := &inspect.TimeLagReport{}
	for i := range 5 {
		rep.Jobs = append(rep.Jobs, inspect.JobTimeLag{Job: fmt.Sprintf("job-%d", i), Oldest: &inspect.UnsettledWindow{Due: t0.Add(-time.Duration(i+1) * time.Second)}})
	}
	f.set(rep, nil)
	reg := prometheus.NewPedanticRegistry()
	l := NewLag(reg, nil, "g", "t", time.Second, nil, WithTimeLag(f, true), WithTimeLagMaxJobs(2),
		func(o *lagOptions) { o.now = func() time.Time { return t0 } })
	if err := l.timeLag.refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(l.timeLag, "kjob_job_oldest_unsettled_window_age_seconds"); n != 3 {
		t.Fatalf("%d per-job series with WithTimeLagMaxJobs(2), want 2 and other", n)
	}
	if got := testutil.ToFloat64(collectOne(t, l.timeLag, "kjob_job_oldest_unsettled_window_age_seconds", OtherJobLabel)); got != 5 {
		t.Fatalf(`kjob_job="other" age = %v, want the largest among jobs 2-4, 5`, got)
	}
}

// collectOne returns the collector's metric name with the one label value
// v, as a Collector for testutil.ToFloat64.
func collectOne(t *testing.T, c prometheus.Collector, name, v string) prometheus.Collector {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	var found prometheus.Collector
	for m := range ch {
		if !strings.Contains(m.Desc().String(), `"`+name+`"`) {
			continue
		}
		d := &dtoMetric{}
		if err := m.Write(&d.Metric); err != nil {
			t.Fatal(err)
		}
		if len(d.Label) > 0 && d.Label[0].GetValue() == v {
			found = constCollector{m}
		}
	}
	if found == nil {
		t.Fatalf("no %s{%q}", name, v)
	}
	return found
}

type constCollector struct{ m prometheus.Metric }

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.m.Desc() }
func (c constCollector) Collect(ch chan<- prometheus.Metric) { ch <- c.m }

// TestLagExportsTimeLag runs the worker's lag collector with the real
// time-lag reader against the embedded broker and a real Redis: one window
// a minute late and unclaimed shows as at least 60 s on its partition, and
// the job's gauge says the same.
func TestLagExportsTimeLag(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "m"})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "kjob.windows"); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	rec, err := jobmsg.Record("kjob.windows", &jobmsg.Message{ID: jobmsg.WindowID("report", start), Job: "report", Handler: "noop",
		Window: jobmsg.Window{Start: start, End: start.Add(time.Minute)}, ScheduledAt: start, PublishedAt: start,
		Trigger: jobmsg.TriggerSchedule, Payload: json.RawMessage(`{}`), Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Minute), MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tl, err := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: brokers, States: store})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	reg := prometheus.NewPedanticRegistry()
	l := NewLag(reg, kadm.NewClient(cl), "kjob-workers", "kjob.windows", 5*time.Second, slog.New(slog.DiscardHandler), WithTimeLag(tl, true))
	l.Refresh(ctx)
	if got := testutil.ToFloat64(collectOne(t, l.timeLag, "kjob_oldest_unsettled_window_age_seconds", "0")); got < 60 || got > 120 {
		t.Fatalf("partition 0 age = %v, want about 60 s", got)
	}
	if got := testutil.ToFloat64(collectOne(t, l.timeLag, "kjob_job_oldest_unsettled_window_age_seconds", "report")); got < 60 {
		t.Fatalf("job report age = %v, want about 60 s", got)
	}
	if got := testutil.ToFloat64(l.timeLag.errors); got != 0 {
		t.Fatalf("%v time lag errors", got)
	}
}

type dtoMetric struct{ dto.Metric }
