package producer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// viewSpec is the i-th spec of the 100k-schedules workloads (test/perf's
// mixedSpec): a quarter each of 6-field specs, @every, hourly and daily
// specs, in four zones.
func viewSpec(i int) schedule.Spec {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"}
	var cron string
	switch i % 4 {
	case 0:
		cron = fmt.Sprintf("%d %d/5 * * * *", i%60, (i/4)%5)
	case 1:
		cron = fmt.Sprintf("@every %ds", 60+(i/4)%240)
	case 2:
		cron = fmt.Sprintf("%d * * * *", (i/4)%60)
	case 3:
		cron = fmt.Sprintf("%d %d * * *", (i/4)%60, (i/240)%24)
	}
	return schedule.Spec{Name: fmt.Sprintf("job-%06d", i), Schedule: cron, Timezone: zones[i%len(zones)], Handler: "noop", Catchup: "0s"}
}

// BenchmarkViewMemory measures the live heap of one replica's view of
// 100,000 jobs (the mix of the 100k-schedules workloads), in process, no
// broker:
//
//   - follower: the records of the schedules topic, as a standby reads
//     them (applySpec, then settle), 1,000 to a transaction;
//   - leader: 100 requests of 1,000 puts planned and adopted as the
//     leader's apply does (plan, adopt, the timer heap).
//
// It reports the view's bytes per job (live heap after a collection,
// minus the heap before). KJOB_VIEW_HEAP_PROFILE=path writes a heap
// profile while the view is live.
//
//	go test -run '^$' -bench ViewMemory -benchtime 1x ./internal/exec/producer/
func BenchmarkViewMemory(b *testing.B) {
	const jobs = 100_000
	p, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Elector: noElector{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	profile := func(b *testing.B, name string) {
		path := os.Getenv("KJOB_VIEW_HEAP_PROFILE")
		if path == "" {
			return
		}
		f, err := os.Create(path + "." + name)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("follower", func(b *testing.B) {
		for range b.N {
			// The topic's records, encoded before the measure.
			var recs []*kgo.Record
			for i := range jobs {
				name := fmt.Sprintf("job-%06d", i)
				r, err := specs.SpecRecord(p.cfg.SchedulesTopic, &specs.Record{Namespace: p.cfg.Namespace, Job: name, Version: 1,
					Spec: mustCanonical(b, viewSpec(i)), SetBy: "bench", Source: specs.Source{Kind: specs.SourceAPI}, SetAt: t0,
					ChangeID: fmt.Sprintf("apply-%d/%d", i/specs.MaxEdits, i%specs.MaxEdits), EffectiveFrom: t0})
				if err != nil {
					b.Fatal(err)
				}
				r.Offset = int64(i)
				recs = append(recs, r)
			}
			base := heapInUse()
			v := newSpecView()
			touched := map[string]bool{}
			for i, r := range recs {
				p.applySpec(v, r, touched)
				if (i+1)%specs.MaxEdits == 0 {
					p.settle(v, touched)
				}
			}
			p.settle(v, touched)
			if len(v.live) != jobs {
				b.Fatalf("%d jobs in the view, want %d", len(v.live), jobs)
			}
			used := heapInUse() - base
			profile(b, "follower")
			b.ReportMetric(float64(used)/jobs, "B/job")
			b.ReportMetric(float64(used)/(1<<20), "view-MiB")
			runtime.KeepAlive(v)
			runtime.KeepAlive(recs) // counted in base: the view's strings are its own (decoded)
		}
	})
	b.Run("leader", func(b *testing.B) {
		for range b.N {
			base := heapInUse()
			v := newSpecView()
			q := newQueue()
			for k := 0; k < jobs; k += specs.MaxEdits {
				req := &specs.Request{ID: fmt.Sprintf("apply-%d", k/specs.MaxEdits), Namespace: p.cfg.Namespace, Actor: "bench",
					Source: specs.Source{Kind: specs.SourceAPI}, IssuedAt: t0}
				for i := k; i < min(jobs, k+specs.MaxEdits); i++ {
					s := viewSpec(i)
					req.Edits = append(req.Edits, specs.Edit{Op: specs.OpPut, Job: s.Name, Spec: &s})
				}
				f := t0.Add(time.Duration(k) * time.Millisecond)
				_, changes, res := p.plan(context.Background(), req, v.snap, v.live, f, f, false)
				if res.Refused != nil {
					b.Fatalf("refused: %+v", res.Refused)
				}
				p.adopt(req, changes, v.snap, v.live, q, f)
			}
			if len(v.live) != jobs || len(q.h) != jobs {
				b.Fatalf("%d jobs in the view, %d in the heap, want %d", len(v.live), len(q.h), jobs)
			}
			used := heapInUse() - base
			profile(b, "leader")
			b.ReportMetric(float64(used)/jobs, "B/job")
			b.ReportMetric(float64(used)/(1<<20), "view-MiB")
			runtime.KeepAlive(v)
			runtime.KeepAlive(q)
		}
	})
}

// mustCanonical is s as a leader writes it: the validated job's ToSpec.
func mustCanonical(tb testing.TB, s schedule.Spec) schedule.Spec {
	tb.Helper()
	j, err := s.Job("bench")
	if err != nil {
		tb.Fatal(err)
	}
	return j.ToSpec()
}
