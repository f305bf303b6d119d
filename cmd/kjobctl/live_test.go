package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

type leadAlways struct{}

func (leadAlways) Run(ctx context.Context, lead func(context.Context) error) error { return lead(ctx) }

var (
	livePort  = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	liveTime  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	liveSpace = regexp.MustCompile(` {2,}`)
	liveEpoch = regexp.MustCompile(`lease epoch \d+`)
	liveActor = regexp.MustCompile(`unauthenticated:[^\s@]+@[^\s:]+`)
)

// normalise makes the output of a live deployment comparable: ports and
// times that are not the producer's fake clock (it runs on 2026-01-01)
// are replaced, and column padding, which depends on their width, is
// collapsed to two spaces.
func normalise(out string) []byte {
	out = livePort.ReplaceAllString(out, "127.0.0.1:PORT")
	out = liveTime.ReplaceAllStringFunc(out, func(s string) string {
		if strings.HasPrefix(s, "2026-01-01T") {
			return s
		}
		return "TIME"
	})
	out = liveEpoch.ReplaceAllString(out, "lease epoch N")
	out = liveActor.ReplaceAllString(out, "ACTOR") // kjobctl's principal without SASL: the OS user and host
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		b.WriteString(strings.TrimRight(liveSpace.ReplaceAllString(l, "  "), " ") + "\n")
	}
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// The golden tables rendered from a live deployment: a producer (on a fake
// clock) holding the lease and publishing, a worker running the windows,
// one dead letter and a paused job, read by the commands themselves.
//
// The commands read their jobs from the schedules topic, into which the
// producer imported its file: no schedules file is given to kjobctl.
func TestGoldenLive(t *testing.T) {
	e := newOpsEnvForProducer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lock, err := lease.NewRedisLock(e.redis.Client(), names.Deployment{Namespace: "ops"}.LeaseKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := lock.TryAcquire(ctx, "producer-1", time.Minute); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	f, err := schedule.Load(e.sched)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 9, 59, 59, 0, time.UTC)
	clk := clock.NewFake(t0)
	published := make(chan []producer.Published, 10)
	p, err := producer.New(producer.Config{Brokers: e.brokers, Namespace: "ops", Topic: "kjob.windows", Jobs: f.Jobs, Elector: leadAlways{}, Clock: clk, Partitions: 2,
		Logger: slog.New(slog.DiscardHandler), OnPublished: func(ps []producer.Published) { published <- ps }})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	perr := make(chan error, 1)
	go func() { perr <- p.Run(pctx) }()
	defer func() { pcancel(); <-perr }()
	testenv.Eventually(t, 20*time.Second, func() bool { return p.Status().Leading && len(p.Status().Next) > 0 }, "producer not leading")

	var mu sync.Mutex
	failing := true
	l := e.startWorker(&failing, &mu)
	clk.Set(t0.Add(time.Second)) // 10:00:00: report and flaky fall due
	n := 0
	for n < 2 {
		select {
		case ps := <-published:
			n += len(ps)
		case <-ctx.Done():
			t.Fatalf("published %d windows, want 2", n)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count("report@2026-01-01T10:00:00Z", worker.OutcomeDone) == 1 }, "report not run")
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count("flaky@2026-01-01T10:00:00Z", worker.OutcomeDeadLettered) == 1 }, "flaky not dead-lettered")
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, out, _ := e.kjobctl("lag")
		return code == exitOK && strings.Contains(out, "TOTAL                      0") && strings.Count(out, "w1") == 2
	}, "lag 0")
	defer func(f func() time.Time) { nowFunc = f }(nowFunc)
	nowFunc = func() time.Time { return time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC) }
	if code, _, stderr := e.kjobctl("pause", "report", "--note", "upstream down"); code != exitOK {
		t.Fatalf("pause: %s", stderr)
	}

	var all bytes.Buffer
	for _, c := range [][]string{{"status"}, {"lag"}, {"dlq", "list"}, {"replay", "--to-earliest"}, {"dlq", "redrive", "--all"}} {
		code, out, stderr := e.kjobctl(c...)
		all.WriteString("$ kjobctl " + strings.Join(c, " ") + "\n" + out + stderr)
		fmt.Fprintf(&all, "[exit %d]\n\n", code)
	}
	golden(t, "live.golden", normalise(all.String()))
}
