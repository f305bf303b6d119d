package producer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

func specsClient(t *testing.T, brokers []string, actor string, wait time.Duration) *specs.Client {
	t.Helper()
	c, err := specs.NewClient(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Deployment: names.Deployment{},
		Actor: actor, Wait: wait})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func submit(t *testing.T, c *specs.Client, e specs.Edit) *specs.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Submit(ctx, []specs.Edit{e}, "test")
	if err != nil {
		t.Fatalf("%s %s: %v", e.Op, e.Job, err)
	}
	return res
}

func every(job, d string) *schedule.Spec {
	return &schedule.Spec{Name: job, Schedule: "@every " + d, Handler: "log"}
}

// versions returns the job's published windows as "start-second/version".
func versions(t *testing.T, brokers []string, job string) []string {
	_, msgs := windowIDs(t, brokers)
	var out []string
	for _, m := range msgs {
		if m.Job == job {
			out = append(out, fmt.Sprintf("%02d/v%d", m.Window.Start.Second(), m.ScheduleVersion))
		}
	}
	return out
}

func waitImported(t *testing.T, c *specs.Client, job string) *specs.Record {
	t.Helper()
	var rec *specs.Record
	testenv.Eventually(t, 20*time.Second, func() bool {
		r, err := c.Get(context.Background(), job)
		rec = r
		return err == nil
	}, "job %s not in the schedules topic", job)
	return rec
}

// A committed change applies live: the leader's next publication follows
// the new spec, with its version, without a restart; the old spec's
// windows up to the change were published, none twice.
func TestScheduleChangeAppliesLive(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC)
	clk := clock.NewFake(t0)
	r := startProducer(t, brokers, clk, jobs(t, "jobs:\n  - {name: a, schedule: \"@every 10s\", handler: log}\n"), alwaysLeader{})
	waitLeading(t, r)
	c := specsClient(t, brokers, "alice", 15*time.Second)
	if rec := waitImported(t, c, "a"); rec.Version != 1 || rec.Source.Kind != specs.SourceFile {
		t.Fatalf("imported %+v", rec)
	}
	clk.Set(t0.Add(9 * time.Second)) // :10, the old spec's window
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r.published()) == 1 }, "a@:10")

	clk.Set(t0.Add(11 * time.Second)) // :12: change to every 4s (aligned to the epoch); :16 is the new spec's next
	start := time.Now()
	res := submit(t, c, specs.Edit{Op: specs.OpUpdate, Job: "a", Spec: every("a", "4s")})
	if res.Applied[0].VersionAfter != 2 {
		t.Fatalf("applied %+v", res.Applied)
	}
	t.Logf("change answered in %v (kfake, fake clock)", time.Since(start).Round(time.Millisecond))
	clk.Set(t0.Add(20 * time.Second)) // :21
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r.published()) == 3 }, "the new spec's :16 and :20")
	clk.Set(t0.Add(29 * time.Second)) // :30: the new spec's :24, :28 (the old one's :30 is gone; :20 both call for, published once)
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r.published()) == 5 }, "the new spec's windows")
	r.stop(t)
	got := strings.Join(versions(t, brokers, "a"), " ")
	if want := "10/v1 16/v2 20/v2 24/v2 28/v2"; got != want {
		t.Fatalf("windows %s, want %s", got, want)
	}
	h, err := c.History(context.Background(), "a")
	if err != nil || len(h) != 2 || h[1].Actor != "alice" || h[1].Diff[0].Field != "schedule" || h[1].Diff[0].After != "@every 4s" {
		t.Fatalf("history %+v, %v", h, err)
	}
}

// Two writers that read version 1 both update: one wins, the other gets a
// conflict naming the version and who set it. No update is lost.
func TestConcurrentUpdatesGiveOneConflict(t *testing.T) {
	brokers := testenv.Brokers(t)
	r := startProducer(t, brokers, clock.Real{}, jobs(t, "jobs:\n  - {name: a, schedule: \"@every 1h\", handler: log}\n"), alwaysLeader{})
	waitLeading(t, r)
	alice, bob := specsClient(t, brokers, "alice", 15*time.Second), specsClient(t, brokers, "bob", 15*time.Second)
	waitImported(t, alice, "a")
	one := int64(1)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []*specs.Client{alice, bob} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, errs[i] = c.Submit(ctx, []specs.Edit{{Op: specs.OpUpdate, Job: "a", Spec: every("a", fmt.Sprintf("%dm", i+2)), ExpectVersion: &one}}, "")
		}()
	}
	wg.Wait()
	ok, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, specs.ErrConflict):
			conflicts++
			if !strings.Contains(err.Error(), "version 2") || !(strings.Contains(err.Error(), "alice") || strings.Contains(err.Error(), "bob")) {
				t.Errorf("conflict does not name the version and the winner: %v", err)
			}
		default:
			t.Errorf("unexpected: %v", err)
		}
	}
	if ok != 1 || conflicts != 1 {
		t.Fatalf("%d applied, %d conflicts (%v); want 1 and 1", ok, conflicts, errs)
	}
	if rec := waitImported(t, alice, "a"); rec.Version != 2 {
		t.Fatalf("version %d", rec.Version)
	}
}

// A deleted or paused job publishes nothing after the change committed;
// a resumed one goes on from its next window, without catching up the
// pause; a re-created one continues its versions.
func TestDeletePauseResume(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC)
	clk := clock.NewFake(t0)
	r := startProducer(t, brokers, clk, jobs(t, "jobs:\n  - {name: a, schedule: \"@every 10s\", handler: log}\n  - {name: b, schedule: \"@every 10s\", handler: log}\n"), alwaysLeader{})
	waitLeading(t, r)
	c := specsClient(t, brokers, "alice", 15*time.Second)
	waitImported(t, c, "a")
	waitImported(t, c, "b")
	submit(t, c, specs.Edit{Op: specs.OpPause, Job: "a", Note: "migration"})
	submit(t, c, specs.Edit{Op: specs.OpDelete, Job: "b"})
	clk.Set(t0.Add(19 * time.Second)) // :20
	clk.Set(t0.Add(22 * time.Second)) // :23: resume; next is :30
	submit(t, c, specs.Edit{Op: specs.OpResume, Job: "a"})
	clk.Set(t0.Add(29 * time.Second)) // :30
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r.published()) == 1 }, "a@:30 after the resume")
	res := submit(t, c, specs.Edit{Op: specs.OpCreate, Job: "b", Spec: every("b", "10s")})
	if res.Applied[0].VersionAfter != 3 { // 1 import, 2 delete, 3 re-create
		t.Fatalf("re-created b at %+v, want version 3", res.Applied[0])
	}
	clk.Set(t0.Add(39 * time.Second)) // :40
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r.published()) == 3 }, "a@:40 and b@:40")
	r.stop(t)
	if got := strings.Join(versions(t, brokers, "a"), " "); got != "30/v3 40/v3" {
		t.Fatalf("a published %s, want only after the resume (version 3)", got)
	}
	if got := strings.Join(versions(t, brokers, "b"), " "); got != "40/v3" {
		t.Fatalf("b published %s, want only after the re-create", got)
	}
	// Unknown jobs and bad specs are refused with the field, the value and
	// the fix; nothing changes.
	r = startProducer(t, brokers, clk, nil, alwaysLeader{})
	waitLeading(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Submit(ctx, []specs.Edit{{Op: specs.OpDelete, Job: "nope"}}, ""); !errors.Is(err, specs.ErrNotFound) {
		t.Fatalf("delete of an unknown job: %v", err)
	}
	bad := every("a", "10s")
	bad.Timezone = "Europe/Berln"
	_, err := c.Submit(ctx, []specs.Edit{{Op: specs.OpUpdate, Job: "a", Spec: bad}}, "")
	var re *specs.RefusedError
	if !errors.As(err, &re) || re.Field != "timezone" || re.Value != "Europe/Berln" || !strings.Contains(re.Reason, "IANA") {
		t.Fatalf("bad timezone: %v", err)
	}
}

// A garbage record written into the schedules topic by hand is logged,
// counted and skipped; the other jobs run. A request written while no
// producer ran is answered by the next leader.
func TestMalformedSpecAndRequestWithoutLeader(t *testing.T) {
	brokers := testenv.Brokers(t)
	clk := clock.NewFake(time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC))
	js := jobs(t, "jobs:\n  - {name: a, schedule: \"@every 10s\", handler: log}\n")
	r := startProducer(t, brokers, clk, js, alwaysLeader{})
	waitLeading(t, r)
	c := specsClient(t, brokers, "alice", 2*time.Second)
	waitImported(t, c, "a")
	r.stop(t)

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kjob.windows.schedules", Key: []byte("a"), Value: []byte("{garbage")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, []specs.Edit{{Op: specs.OpPause, Job: "a", Note: "later"}}, ""); !errors.Is(err, specs.ErrNoLeader) {
		t.Fatalf("without a producer: %v", err)
	}
	var bad atomic.Int64
	r = startProducer(t, brokers, clk, js, alwaysLeader{}, func(c *producer.Config) {
		c.OnMalformed = func(string) { bad.Add(1) }
	})
	// Not waitLeading: the pending pause may leave the job nothing to time.
	testenv.Eventually(t, 20*time.Second, func() bool { return r.p.Status().Leading }, "the next producer never led")
	testenv.Eventually(t, 20*time.Second, func() bool {
		rec, err := c.Get(ctx, "a")
		return err == nil && rec.Paused != nil && rec.Paused.Note == "later"
	}, "the pause asked while no producer ran was not applied by the next leader")
	if bad.Load() < 1 {
		t.Fatalf("the garbage record was not counted")
	}
}

// A producer restarting with the same file does not undo a change made
// through the API; a changed entry of the file is applied as a new
// version.
func TestFileOwnership(t *testing.T) {
	brokers := testenv.Brokers(t)
	clk := clock.NewFake(time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC))
	file := "jobs:\n  - {name: a, schedule: \"@every 10s\", handler: log}\n"
	r := startProducer(t, brokers, clk, jobs(t, file), alwaysLeader{})
	waitLeading(t, r)
	c := specsClient(t, brokers, "alice", 15*time.Second)
	waitImported(t, c, "a")
	submit(t, c, specs.Edit{Op: specs.OpUpdate, Job: "a", Spec: every("a", "1m")})
	r.stop(t)

	r = startProducer(t, brokers, clk, jobs(t, file), alwaysLeader{})
	waitLeading(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if rec, err := c.Get(ctx, "a"); err != nil || rec.Version != 2 || rec.Spec.Schedule != "@every 1m" {
		t.Fatalf("after a restart with the same file: %+v %v; want alice's version 2 kept", rec, err)
	}
	r.stop(t)

	r = startProducer(t, brokers, clk, jobs(t, "jobs:\n  - {name: a, schedule: \"@every 20s\", handler: log}\n"), alwaysLeader{})
	waitLeading(t, r)
	testenv.Eventually(t, 20*time.Second, func() bool {
		rec, err := c.Get(ctx, "a")
		return err == nil && rec.Version == 3 && rec.Spec.Schedule == "@every 20s"
	}, "the changed file entry was not applied as version 3")
	h, err := c.History(ctx, "a")
	if err != nil || len(h) != 3 || h[2].Source.Kind != specs.SourceFile || h[2].Diff[0].Before != "@every 1m" {
		t.Fatalf("history %+v %v", h, err)
	}
	r.stop(t)

	// A revert reads the change log while the request reader runs, with
	// per-client metrics hooks on the term's client as every kjob binary
	// wires them (kprom): the readers run without them (ReaderOpts), with
	// client ids of their own.
	r = startProducer(t, brokers, clk, nil, alwaysLeader{}, func(c *producer.Config) {
		c.ClientOpts = []kgo.Opt{kgo.WithHooks(kprom.NewMetrics("kjob", kprom.Registerer(prometheus.NewRegistry()), kprom.WithClientLabel()))}
		c.ReaderOpts = []kgo.Opt{} // as kjob.NewProducer wires it: the readers without the hooks
	})
	testenv.Eventually(t, 20*time.Second, func() bool { return r.p.Status().Leading }, "the producer never led")
	res := submit(t, c, specs.Edit{Op: specs.OpRevert, Job: "a", ToVersion: 2})
	if got := res.Applied[0]; got.VersionAfter != 4 {
		t.Fatalf("revert applied %+v, want version 4", got)
	}
	if rec, err := c.Get(ctx, "a"); err != nil || rec.Spec.Schedule != "@every 1m" {
		t.Fatalf("after the revert to version 2: %+v %v", rec, err)
	}
}

// gateElector leads once open is closed, until ctx ends.
type gateElector struct{ open chan struct{} }

func (g gateElector) Run(ctx context.Context, lead func(context.Context) error) error {
	select {
	case <-g.open:
		return lead(ctx)
	case <-ctx.Done():
		return nil
	}
}

// A standby follows the schedules topic while another replica leads: when
// it takes over it reads only what was committed since its last fetch
// (here nothing), and publishes the latest spec's windows with its
// version.
func TestStandbyTakesOverFromItsFollowedView(t *testing.T) {
	brokers := testenv.Brokers(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC)
	clk := clock.NewFake(t0)
	js := jobs(t, "jobs:\n  - {name: a, schedule: \"@every 10s\", handler: log}\n")
	r1 := startProducer(t, brokers, clk, js, alwaysLeader{})
	waitLeading(t, r1)
	c := specsClient(t, brokers, "alice", 15*time.Second)
	waitImported(t, c, "a")
	submit(t, c, specs.Edit{Op: specs.OpUpdate, Job: "a", Spec: every("a", "4s")})

	gate := gateElector{open: make(chan struct{})}
	logs := testenv.NewLogBuffer(t)
	r2 := startProducer(t, brokers, clk, js, gate, func(c *producer.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	testenv.Eventually(t, 20*time.Second, func() bool {
		return strings.Contains(logs.String(), "following the schedules topic: read up to its end") && strings.Contains(logs.String(), "jobs=1")
	}, "the standby did not follow the schedules topic")
	r1.stop(t)
	close(gate.open)
	waitLeading(t, r2)
	out := logs.String()
	if !strings.Contains(out, "msg=\"publishing as leader\"") || !strings.Contains(out, "schedules_read=0 ") {
		t.Fatalf("the new leader read more than the tail its standby view lacked (nothing):\n%s", out)
	}
	clk.Set(t0.Add(7 * time.Second)) // :08: the v2 spec's :04 and :08
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r2.published()) == 2 }, "r2's first windows")
	if got := strings.Join(versions(t, brokers, "a"), " "); got != "04/v2 08/v2" {
		t.Fatalf("windows %s, want the update's (version 2) at :04 and :08", got)
	}
}
