package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// While reads fail, an age whose last read found nothing unsettled is
// unknown: NaN, not 0; a window known unsettled keeps aging; and
// kjob_time_lag_error is 1 until a read succeeds again.
func TestTimeLagUnknownWhileReadsFail(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0
	f := &fakeTimeLag{}
	f.set(&inspect.TimeLagReport{
		Partitions: []inspect.PartitionTimeLag{
			{Partition: 0, Oldest: &inspect.UnsettledWindow{Due: t0.Add(-30 * time.Second)}},
			{Partition: 1},
		},
		Jobs: []inspect.JobTimeLag{{Job: "slow", Oldest: &inspect.UnsettledWindow{Due: t0.Add(-30 * time.Second)}}, {Job: "quiet"}},
	}, nil)
	for _, jobLabel := range []bool{true, false} {
		c := newTimeLagCollector(f, jobLabel, 0, func() time.Time { return now })
		if err := c.refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := testutil.ToFloat64(c.failing); got != 0 {
			t.Fatalf("kjob_time_lag_error = %v after a successful read", got)
		}
		if got := testutil.ToFloat64(collectOne(t, c, "kjob_oldest_unsettled_window_age_seconds", "1")); got != 0 {
			t.Fatalf("partition 1 age = %v after a read that found nothing unsettled, want 0", got)
		}
		good := f.rep
		f.set(nil, errors.New("redis: connection refused"))
		if err := c.refresh(context.Background()); err == nil {
			t.Fatal("refresh with a failing reader succeeded")
		}
		if got := testutil.ToFloat64(collectOne(t, c, "kjob_oldest_unsettled_window_age_seconds", "1")); !math.IsNaN(got) {
			t.Errorf("partition 1 age = %v while the time lag cannot be computed, want NaN (not a false 0)", got)
		}
		if got := testutil.ToFloat64(collectOne(t, c, "kjob_oldest_unsettled_window_age_seconds", "0")); got != 30 {
			t.Errorf("partition 0 age = %v while reads fail, want its last known window's age, 30", got)
		}
		if jobLabel {
			if got := testutil.ToFloat64(collectOne(t, c, "kjob_job_oldest_unsettled_window_age_seconds", "quiet")); !math.IsNaN(got) {
				t.Errorf("job quiet age = %v while reads fail, want NaN", got)
			}
		} else if got := testutil.ToFloat64(collectOne(t, c, "kjob_job_oldest_unsettled_window_age_seconds", "")); got != 30 {
			t.Errorf(`kjob_job="" age = %v while reads fail, want the largest known, 30`, got)
		}
		if got := testutil.ToFloat64(c.failing); got != 1 {
			t.Errorf("kjob_time_lag_error = %v while reads fail, want 1", got)
		}
		f.set(good, nil)
		if err := c.refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := testutil.ToFloat64(c.failing); got != 0 {
			t.Errorf("kjob_time_lag_error = %v after reads recovered", got)
		}
		if got := testutil.ToFloat64(collectOne(t, c, "kjob_oldest_unsettled_window_age_seconds", "1")); got != 0 {
			t.Errorf("partition 1 age = %v after reads recovered, want 0", got)
		}
	}
}

// TestTimeLagWhileRedisIsDown: the real reader against the embedded broker
// and a real Redis. The first read finds nothing unsettled (0). Then a
// window falls due and Redis goes down: its state cannot be read, so the
// time lag cannot be computed; the partition's gauge must not stay at 0,
// and the error gauge says why.
func TestTimeLagWhileRedisIsDown(t *testing.T) {
	brokers := testenv.Brokers(t)
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "m"})
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
	tl, err := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: brokers, States: store})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	reg := prometheus.NewPedanticRegistry()
	l := NewLag(reg, kadm.NewClient(cl), "kjob-workers", "kjob.windows", time.Second, slog.New(slog.DiscardHandler), WithTimeLag(tl, true))
	l.Refresh(ctx)
	if got := testutil.ToFloat64(collectOne(t, l.timeLag, "kjob_oldest_unsettled_window_age_seconds", "0")); got != 0 {
		t.Fatalf("partition 0 age = %v with nothing published, want 0", got)
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
	r.Kill()
	l.Refresh(ctx)
	if got := testutil.ToFloat64(collectOne(t, l.timeLag, "kjob_oldest_unsettled_window_age_seconds", "0")); got == 0 {
		t.Fatalf("partition 0 age = 0 while Redis is down and a window a minute late is unsettled; want NaN (unknown)")
	}
	if got := testutil.ToFloat64(l.timeLag.failing); got != 1 {
		t.Fatalf("kjob_time_lag_error = %v while Redis is down, want 1", got)
	}
	if got := testutil.ToFloat64(l.timeLag.errors); got < 1 {
		t.Fatalf("kjob_time_lag_errors_total = %v, want the failed read counted", got)
	}
}
