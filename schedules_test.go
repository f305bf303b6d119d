package kjob_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/goleak"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/preflight"
	"github.com/kjob/kjob/internal/store/access"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/specleader"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// These tests run kjob.Schedules against the real producer leader
// (internal/testkit/specleader): it answers each Request on the control
// topic, validates and applies its edits all or none with version checks,
// and commits the spec records, tombstones, change-log records and the
// Result in one transaction.

// requests counts the schedule requests written to d's control topic: what
// the callers sent to the leader.
func requests(t *testing.T, brokers []string, d names.Deployment) int {
	t.Helper()
	n := 0
	for _, r := range testenv.ReadCommitted(t, brokers, d.WithDefaults().ControlTopic()) {
		if specs.Kind(r) != specs.KindRequest {
			continue
		}
		if q, err := specs.ParseRequest(r); err == nil && len(q.Edits) == 1 && q.Edits[0].Job == specleader.ProbeJob {
			continue // specleader.Start's own
		}
		n++
	}
	return n
}

func createScheduleTopics(t *testing.T, brokers []string, d names.Deployment, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tp := range []string{d.ControlTopic(), d.SchedulesTopic(), d.ScheduleLogTopic()} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
}

// shop is the deployment of these tests.
var shop = names.Deployment{Namespace: "shop"}

func newSchedules(t *testing.T, brokers []string, actor string) *kjob.Schedules {
	t.Helper()
	s, err := kjob.NewSchedules(kjob.SchedulesConfig{Brokers: brokers, Namespace: "shop", Actor: actor, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func report(name, cron string) schedule.Spec {
	return schedule.Spec{Name: name, Schedule: cron, Timezone: "Europe/Berlin", Handler: "report", Payload: []byte(`{"tenant": "` + name + `"}`)}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noLeaks checks, after every other cleanup of the test (the broker, the
// producer), that the Schedules calls left no goroutine behind.
func noLeaks(t *testing.T) {
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

func TestSchedulesCreateUpdateDeleteGetListHistory(t *testing.T) {
	noLeaks(t)
	brokers := testenv.Brokers(t)
	specleader.Start(t, brokers, shop)
	s := newSchedules(t, brokers, "alice")
	ctx := testCtx(t)

	v, err := s.Create(ctx, report("tenant-1", "0 8 * * 1"), "onboarding")
	if err != nil || v != 1 {
		t.Fatalf("create: version %d, %v; want 1", v, err)
	}
	if _, err := s.Create(ctx, report("tenant-1", "0 9 * * 1"), ""); !errors.Is(err, kjob.ErrScheduleConflict) {
		t.Fatalf("create of an existing job: %v, want a conflict", err)
	}
	if _, err := s.Create(ctx, report("tenant-2", "0 8 * * *"), ""); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "tenant-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || got.Spec.Schedule != "0 8 * * 1" || got.SetBy != "alice" || got.Source != "api" || got.Note != "onboarding" || got.SetAt.IsZero() || got.Paused {
		t.Fatalf("get: %+v", got)
	}

	v, err = s.Update(ctx, report("tenant-1", "0 9 * * 1"), 1, "later")
	if err != nil || v != 2 {
		t.Fatalf("update from 1: version %d, %v; want 2", v, err)
	}
	_, err = s.Update(ctx, report("tenant-1", "0 10 * * 1"), 1, "stale")
	var se *kjob.ScheduleError
	if !errors.Is(err, kjob.ErrScheduleConflict) || !errors.As(err, &se) || se.Current != 2 || se.SetBy != "alice" || se.Source != "api" {
		t.Fatalf("update from a stale version: %v (%+v), want a conflict naming version 2 and alice", err, se)
	}
	if !strings.Contains(err.Error(), "expected version 1, it is at version 2, set by alice through the API") {
		t.Fatalf("conflict text: %q", err)
	}
	if _, err := s.Update(ctx, report("nobody", "@daily"), 0, ""); !errors.Is(err, kjob.ErrScheduleNotFound) {
		t.Fatalf("update of an unknown job: %v, want not found", err)
	}
	if _, err := s.Get(ctx, "nobody"); !errors.Is(err, kjob.ErrScheduleNotFound) {
		t.Fatalf("get of an unknown job: %v", err)
	}

	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].Spec.Name != "tenant-1" || list[0].Version != 2 || list[1].Spec.Name != "tenant-2" {
		t.Fatalf("list: %+v, %v", list, err)
	}

	if _, err := s.Delete(ctx, "tenant-2", 5, ""); !errors.Is(err, kjob.ErrScheduleConflict) {
		t.Fatalf("delete from a wrong version: %v", err)
	}
	if v, err := s.Delete(ctx, "tenant-2", 1, "churned"); err != nil || v != 2 {
		t.Fatalf("delete: version %d, %v; want 2", v, err)
	}
	if _, err := s.Get(ctx, "tenant-2"); !errors.Is(err, kjob.ErrScheduleNotFound) || !strings.Contains(err.Error(), "deleted at version 2") {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := s.Delete(ctx, "tenant-2", 0, ""); !errors.Is(err, kjob.ErrScheduleNotFound) {
		t.Fatalf("delete of a deleted job: %v", err)
	}
	// Re-created, the job continues its versions.
	if v, err := s.Create(ctx, report("tenant-2", "0 7 * * *"), "back"); err != nil || v != 3 {
		t.Fatalf("re-create: version %d, %v; want 3", v, err)
	}

	h, err := s.History(ctx, "tenant-2")
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, c := range h {
		ops = append(ops, fmt.Sprintf("%s %d->%d %s %q", c.Op, c.VersionBefore, c.VersionAfter, c.Actor, c.Note))
	}
	want := []string{`create 0->1 alice ""`, `delete 1->2 alice "churned"`, `create 0->3 alice "back"`}
	if strings.Join(ops, "; ") != strings.Join(want, "; ") {
		t.Fatalf("history:\n got %q\nwant %q", ops, want)
	}
	if h[1].Spec != nil || h[2].Spec == nil || h[2].Spec.Schedule != "0 7 * * *" {
		t.Fatalf("history specs: %+v", h)
	}
	h1, err := s.History(ctx, "tenant-1")
	if err != nil || len(h1) != 2 {
		t.Fatalf("history of tenant-1: %+v, %v", h1, err)
	}
	if d := h1[1].Diff; len(d) != 1 || d[0] != (kjob.ScheduleDiff{Field: "schedule", Before: "0 8 * * 1", After: "0 9 * * 1"}) {
		t.Fatalf("diff of the update: %+v", d)
	}
	all, err := s.History(ctx, "")
	if err != nil || len(all) != 5 {
		t.Fatalf("every job's history: %d changes, %v; want 5", len(all), err)
	}
}

func TestSchedulesPauseResumeRevert(t *testing.T) {
	brokers := testenv.Brokers(t)
	specleader.Start(t, brokers, shop)
	s := newSchedules(t, brokers, "bob")
	ctx := testCtx(t)

	if _, err := s.Create(ctx, report("tenant-7", "0 8 * * 1"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, report("tenant-7", "*/5 * * * *"), 1, "too often, by mistake"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Pause(ctx, "tenant-7", "customer asked"); err != nil || v != 3 {
		t.Fatalf("pause: version %d, %v", v, err)
	}
	got, err := s.Get(ctx, "tenant-7")
	if err != nil || !got.Paused || got.PauseNote != "customer asked" || got.Version != 3 {
		t.Fatalf("after pause: %+v, %v", got, err)
	}
	if v, err := s.Resume(ctx, "tenant-7", "customer is back"); err != nil || v != 4 {
		t.Fatalf("resume: version %d, %v", v, err)
	}
	if v, err := s.Revert(ctx, "tenant-7", 1, "undo the mistake"); err != nil || v != 5 {
		t.Fatalf("revert: version %d, %v", v, err)
	}
	got, err = s.Get(ctx, "tenant-7")
	if err != nil || got.Paused || got.Spec.Schedule != "0 8 * * 1" || got.Version != 5 || got.Note != "undo the mistake" {
		t.Fatalf("after revert to 1: %+v, %v", got, err)
	}
	if _, err := s.Revert(ctx, "tenant-7", 99, ""); !errors.Is(err, kjob.ErrScheduleNotFound) {
		t.Fatalf("revert to an unknown version: %v", err)
	}
	if _, err := s.Revert(ctx, "tenant-7", 0, ""); !errors.Is(err, kjob.ErrScheduleInvalid) {
		t.Fatalf("revert to version 0: %v", err)
	}
	if _, err := s.Pause(ctx, "nobody", ""); !errors.Is(err, kjob.ErrScheduleNotFound) {
		t.Fatalf("pause of an unknown job: %v", err)
	}
	h, err := s.History(ctx, "tenant-7")
	if err != nil || len(h) != 5 {
		t.Fatalf("history: %+v, %v", h, err)
	}
	if h[2].Op != "pause" || !h[2].Paused || h[2].Actor != "bob" || h[3].Op != "resume" || h[4].Op != "revert" {
		t.Fatalf("history: %+v", h)
	}
	if d := h[2].Diff; len(d) != 1 || d[0].Field != "paused" || d[0].After != "customer asked" {
		t.Fatalf("pause diff: %+v", d)
	}
}

// Two writers update one job from the same version at once: one succeeds,
// the other gets a conflict naming the version the first set and who set
// it. No update is lost: the job holds the winner's spec.
func TestSchedulesConcurrentUpdatesGiveOneConflict(t *testing.T) {
	noLeaks(t)
	brokers := testenv.Brokers(t)
	specleader.Start(t, brokers, shop)
	ctx := testCtx(t)
	if _, err := newSchedules(t, brokers, "setup").Create(ctx, report("tenant-9", "0 8 * * *"), ""); err != nil {
		t.Fatal(err)
	}
	actors := []string{"alice", "bob"}
	crons := []string{"0 6 * * *", "0 7 * * *"}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range actors {
		s := newSchedules(t, brokers, actors[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = s.Update(ctx, report("tenant-9", crons[i]), 1, "")
		}()
	}
	close(start)
	wg.Wait()
	won, lost := -1, -1
	for i, err := range errs {
		switch {
		case err == nil:
			won = i
		case errors.Is(err, kjob.ErrScheduleConflict):
			lost = i
		default:
			t.Fatalf("%s: %v", actors[i], err)
		}
	}
	if won < 0 || lost < 0 {
		t.Fatalf("want one success and one conflict, got %v", errs)
	}
	var se *kjob.ScheduleError
	if !errors.As(errs[lost], &se) || se.Current != 2 || se.SetBy != actors[won] {
		t.Fatalf("the conflict names %+v, want version 2 set by %s", se, actors[won])
	}
	t.Logf("%s won; %s got: %v", actors[won], actors[lost], errs[lost])
	got, err := newSchedules(t, brokers, "reader").Get(ctx, "tenant-9")
	if err != nil || got.Version != 2 || got.Spec.Schedule != crons[won] || got.SetBy != actors[won] {
		t.Fatalf("the job is %+v, %v; want the winner's spec at version 2", got, err)
	}
}

// An invalid spec or job name is refused before anything is sent, with the
// field, the value and the fix.
func TestSchedulesInvalidRefusedBeforeSending(t *testing.T) {
	brokers := testenv.Brokers(t)
	specleader.Start(t, brokers, shop)
	s := newSchedules(t, brokers, "alice")
	ctx := testCtx(t)

	bad := report("tenant-1", "0 8 * * 1")
	bad.Timezone = "Europe/Berln"
	_, err := s.Create(ctx, bad, "")
	var se *kjob.ScheduleError
	if !errors.Is(err, kjob.ErrScheduleInvalid) || !errors.As(err, &se) || se.Field != "timezone" || se.Value != "Europe/Berln" || !strings.Contains(se.Reason, "IANA") {
		t.Fatalf("bad timezone: %v (%+v)", err, se)
	}
	t.Logf("bad timezone: %v", err)

	two := report("tenant-1", "not a cron")
	two.Handler = ""
	_, err = s.Update(ctx, two, 0, "")
	if !errors.Is(err, kjob.ErrScheduleInvalid) || !strings.Contains(err.Error(), "also") {
		t.Fatalf("two problems: %v", err)
	}
	t.Logf("two problems: %v", err)

	for _, name := range []string{"tenant\x00one", "tenant\n1", "Tenant-1", "-x", strings.Repeat("a", 64), ""} {
		sp := report(name, "@daily")
		_, err := s.Create(ctx, sp, "")
		if !errors.Is(err, kjob.ErrScheduleInvalid) || !errors.As(err, &se) || se.Field != "name" {
			t.Fatalf("create %q: %v", name, err)
		}
		for what, err := range map[string]error{
			"get":    second(s.Get(ctx, name)),
			"delete": second(s.Delete(ctx, name, 0, "")),
			"pause":  second(s.Pause(ctx, name, "")),
		} {
			if !errors.Is(err, kjob.ErrScheduleInvalid) {
				t.Fatalf("%s %q: %v", what, name, err)
			}
		}
	}
	_, err = s.Get(ctx, "tenant\x07one")
	if !strings.Contains(err.Error(), `"tenant\aone"`) || !strings.Contains(err.Error(), "control character") {
		t.Fatalf("a control character shows escaped and named: %q", err)
	}
	t.Logf("control character: %v", err)
	if _, err := s.Update(ctx, report("tenant-1", "@daily"), -1, ""); !errors.Is(err, kjob.ErrScheduleInvalid) {
		t.Fatalf("negative expected version: %v", err)
	}
	if n := requests(t, brokers, shop); n != 0 {
		t.Fatalf("the producer got %d requests; invalid input must not be sent", n)
	}
}

func second[T any](_ T, err error) error { return err }

func TestSchedulesApply(t *testing.T) {
	brokers := testenv.Brokers(t)
	specleader.Start(t, brokers, shop)
	s := newSchedules(t, brokers, "deployer")
	ctx := testCtx(t)

	// 2,500 jobs: three batches of at most 1,000.
	var list []schedule.Spec
	for i := range 2500 {
		list = append(list, report(fmt.Sprintf("tenant-%d", i), fmt.Sprintf("%d 8 * * 1", i%60)))
	}
	res, err := s.Apply(ctx, list, kjob.ApplyOptions{Note: "initial"})
	if err != nil || len(res.Created) != 2500 || len(res.Updated)+len(res.Deleted)+len(res.Unchanged) != 0 {
		t.Fatalf("first apply: %d created, %d updated, %d deleted, %d unchanged, %v", len(res.Created), len(res.Updated), len(res.Deleted), len(res.Unchanged), err)
	}
	if n := requests(t, brokers, shop); n != 3 {
		t.Fatalf("%d requests, want 3 batches", n)
	}

	// Change one, drop one, add one, prune.
	list[1].Schedule = "0 9 * * 1"
	list = append(list[:2], list[3:]...)
	list = append(list, report("tenant-new", "@daily"))
	res, err = s.Apply(ctx, list, kjob.ApplyOptions{Prune: true, Note: "weekly"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Created, res.Updated, res.Deleted) != "[tenant-new] [tenant-1] [tenant-2]" || len(res.Unchanged) != 2498 {
		t.Fatalf("second apply: created %v updated %v deleted %v, %d unchanged", res.Created, res.Updated, res.Deleted, len(res.Unchanged))
	}
	got, err := s.Get(ctx, "tenant-1")
	if err != nil || got.Version != 2 || got.Note != "weekly" || got.SetBy != "deployer" {
		t.Fatalf("tenant-1 after the apply: %+v, %v", got, err)
	}
	// Without Prune, a job missing from the list stays.
	if res, err := s.Apply(ctx, list[:1], kjob.ApplyOptions{}); err != nil || len(res.Deleted) != 0 || len(res.Unchanged) != 1 {
		t.Fatalf("apply without prune: %+v, %v", res, err)
	}

	// One invalid spec or a name given twice refuses the whole apply.
	before := requests(t, brokers, shop)
	bad := append([]schedule.Spec{report("tenant-x", "@daily")}, report("tenant-y", "61 * * * *"))
	if _, err := s.Apply(ctx, bad, kjob.ApplyOptions{}); !errors.Is(err, kjob.ErrScheduleInvalid) || !strings.Contains(err.Error(), "spec 2 of 2") {
		t.Fatalf("apply with an invalid spec: %v", err)
	}
	dup := []schedule.Spec{report("tenant-x", "@daily"), report("tenant-x", "@hourly")}
	if _, err := s.Apply(ctx, dup, kjob.ApplyOptions{}); !errors.Is(err, kjob.ErrScheduleInvalid) || !strings.Contains(err.Error(), "given twice") {
		t.Fatalf("apply with a name twice: %v", err)
	}
	if n := requests(t, brokers, shop); n != before {
		t.Fatalf("a refused apply sent %d requests", n-before)
	}
}

// An apply of 200,000 jobs is refused before anything is read or sent,
// unless ApplyOptions.MaxJobs allows it.
func TestSchedulesApplyTooLarge(t *testing.T) {
	brokers := testenv.Brokers(t)
	specleader.Start(t, brokers, shop)
	s := newSchedules(t, brokers, "deployer")
	ctx := testCtx(t)

	list := make([]schedule.Spec, 200_000)
	for i := range list {
		list[i] = report(fmt.Sprintf("tenant-%d", i), "@daily")
	}
	start := time.Now()
	_, err := s.Apply(ctx, list, kjob.ApplyOptions{})
	if !errors.Is(err, kjob.ErrScheduleTooLarge) || !strings.Contains(err.Error(), "200000 jobs") || !strings.Contains(err.Error(), "MaxJobs (100000") {
		t.Fatalf("apply of 200,000 jobs: %v", err)
	}
	t.Logf("refused in %v: %v", time.Since(start), err)

	// The bound is the caller's to raise; pruning counts too.
	small := list[:3]
	if _, err := s.Apply(ctx, small, kjob.ApplyOptions{MaxJobs: 2}); !errors.Is(err, kjob.ErrScheduleTooLarge) {
		t.Fatalf("3 jobs with MaxJobs 2: %v", err)
	}
	if _, err := s.Apply(ctx, small, kjob.ApplyOptions{MaxJobs: 3}); err != nil {
		t.Fatalf("3 jobs with MaxJobs 3: %v", err)
	}
	if _, err := s.Apply(ctx, list[3:4], kjob.ApplyOptions{MaxJobs: 3, Prune: true}); !errors.Is(err, kjob.ErrScheduleTooLarge) {
		t.Fatalf("1 new and 3 pruned with MaxJobs 3: %v", err)
	}
	if n := requests(t, brokers, shop); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestSchedulesWithoutProducer(t *testing.T) {
	noLeaks(t)
	brokers := testenv.Brokers(t)
	createScheduleTopics(t, brokers, names.Deployment{Namespace: "shop"}.WithDefaults())
	s, err := kjob.NewSchedules(kjob.SchedulesConfig{Brokers: brokers, Namespace: "shop", Wait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.Create(testCtx(t), report("tenant-1", "@daily"), "")
	if !errors.Is(err, kjob.ErrNoProducer) || !strings.Contains(err.Error(), `namespace "shop"`) {
		t.Fatalf("no producer: %v", err)
	}
	if el := time.Since(start); el > 8*time.Second {
		t.Fatalf("waited %v, want about the 2s wait", el)
	}
	t.Logf("no producer: %v", err)
}

func TestSchedulesConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   kjob.SchedulesConfig
		field string
	}{
		{kjob.SchedulesConfig{}, "SchedulesConfig.Brokers"},
		{kjob.SchedulesConfig{Brokers: []string{"kafka"}}, "SchedulesConfig.Brokers[0]"},
		{kjob.SchedulesConfig{Brokers: []string{"kafka:9092"}, Namespace: "a b"}, "SchedulesConfig.Namespace"},
		{kjob.SchedulesConfig{Brokers: []string{"kafka:9092"}, Wait: time.Minute}, "SchedulesConfig.Wait"},
		{kjob.SchedulesConfig{Brokers: []string{"kafka:9092"}, Wait: -time.Second}, "SchedulesConfig.Wait"},
		{kjob.SchedulesConfig{Brokers: []string{"kafka:9092"}, Actor: "  "}, "SchedulesConfig.Actor"},
		{kjob.SchedulesConfig{Brokers: []string{"kafka:9092"}, Actor: "al\nice"}, "SchedulesConfig.Actor"},
	} {
		_, err := kjob.NewSchedules(tc.cfg)
		var ce *kjob.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: %v, want a ConfigError of %s", tc.cfg, err, tc.field)
		}
	}
}

// The functions of ExampleSchedules (example_schedules_test.go), run
// against the leader: sign-up, a change of preferences that meets an
// operator's concurrent change, and the nightly sync with prune.
func TestScheduleExamplePerCustomer(t *testing.T) {
	brokers := testenv.Brokers(t)
	specleader.Start(t, brokers, shop)
	s := newSchedules(t, brokers, "svc-reports")
	ctx := testCtx(t)

	tenants := []tenant{{ID: 1, Zone: "Europe/Berlin", Hour: 8}, {ID: 2, Zone: "Asia/Tokyo", Hour: 6}, {ID: 3, Zone: "UTC", Hour: 0}}
	for _, tn := range tenants {
		if err := onSignup(ctx, s, tn); err != nil {
			t.Fatal(err)
		}
	}
	if err := onSignup(ctx, s, tenants[0]); err != nil {
		t.Fatalf("a retried sign-up: %v", err)
	}
	bad := tenant{ID: 9, Zone: "Mars/Olympus", Hour: 8}
	var se *kjob.ScheduleError
	if err := onSignup(ctx, s, bad); !errors.As(err, &se) || se.Field != "timezone" {
		t.Fatalf("sign-up with a bad zone: %v", err)
	}

	tenants[0].Hour = 9
	if err := onPreferencesChanged(ctx, s, tenants[0]); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "report-tenant-1")
	if err != nil || got.Spec.Schedule != "0 9 * * 1" || got.Version != 2 {
		t.Fatalf("after the change: %+v, %v", got, err)
	}
	if _, err := newSchedules(t, brokers, "operator").Pause(ctx, "report-tenant-2", "billing dispute"); err != nil {
		t.Fatal(err)
	}
	tenants[1].Hour = 7
	if err := onPreferencesChanged(ctx, s, tenants[1]); err == nil || !strings.Contains(err.Error(), "paused by operator (billing dispute)") {
		t.Fatalf("change of a paused tenant: %v", err)
	}

	res, err := nightlySync(ctx, s, append(tenants[:1], tenant{ID: 4, Zone: "Europe/Paris", Hour: 10}))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Created, res.Updated, res.Deleted, res.Unchanged) != "[report-tenant-4] [] [report-tenant-2 report-tenant-3] [report-tenant-1]" {
		t.Fatalf("nightly sync: %+v", res)
	}
	h, err := s.History(ctx, "report-tenant-1")
	if err != nil || len(h) != 2 || h[1].Note != "tenant changed the report time" {
		t.Fatalf("history: %+v, %v", h, err)
	}
}

// Apply expects the version it read: a job another writer changed after
// the read is a conflict, not overwritten, and the batches before the
// refused one stay committed.
func TestSchedulesApplyDoesNotOverwriteAConcurrentChange(t *testing.T) {
	brokers := testenv.Brokers(t)
	specleader.Start(t, brokers, shop)
	s := newSchedules(t, brokers, "deployer")
	ctx := testCtx(t)
	var list []schedule.Spec
	for i := range 1500 {
		list = append(list, report(fmt.Sprintf("tenant-%d", i), "@daily"))
	}
	if _, err := s.Apply(ctx, list, kjob.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another writer changes tenant-1200 between Apply's read and its
	// first request: Apply read version 1, alice's update made it 2.
	kjob.SetApplyAfterRead(s, func() {
		if _, err := newSchedules(t, brokers, "alice").Update(ctx, report("tenant-1200", "@weekly"), 1, "alice's change"); err != nil {
			t.Errorf("alice's concurrent update: %v", err)
		}
	})
	for i := range list {
		list[i].Schedule = "@hourly"
	}
	res, err := s.Apply(ctx, list, kjob.ApplyOptions{Note: "hourly"})
	var se *kjob.ScheduleError
	if !errors.Is(err, kjob.ErrScheduleConflict) || !errors.As(err, &se) || se.Job != "tenant-1200" || se.Current != 2 || se.SetBy != "alice" {
		t.Fatalf("apply over a concurrent change: %v", err)
	}
	for j, want := range map[string]string{"tenant-999": "@hourly", "tenant-1000": "@daily", "tenant-1199": "@daily", "tenant-1200": "@weekly", "tenant-1499": "@daily"} {
		if got, err := s.Get(ctx, j); err != nil || got.Spec.Schedule != want {
			t.Errorf("%s after the apply: %+v, %v; want %s", j, got, err, want)
		}
	}
	if len(res.Updated) != 1000 || !strings.Contains(err.Error(), "1000 of 1500 changes committed") {
		t.Fatalf("the first batch stays committed: %d updated, %v", len(res.Updated), err)
	}
	t.Logf("%v", err)
}

// A service with its own SASL principal and exactly the writer grants of
// deploy/SECURITY.md uses every Schedules call; the changes are recorded
// under that principal, with no Actor configured. The leader runs as the
// producer's principal with the producer's documented grants.
func TestSchedulesWithTheDocumentedGrants(t *testing.T) {
	d := names.Deployment{Namespace: "shop"}.WithDefaults()
	acls := func(ps []access.Permission) []kfake.ACL {
		ops := map[string]kmsg.ACLOperation{access.Read: kmsg.ACLOperationRead, access.Write: kmsg.ACLOperationWrite,
			access.Create: kmsg.ACLOperationCreate, access.DescribeConfigs: kmsg.ACLOperationDescribeConfigs}
		var out []kfake.ACL
		for _, p := range ps {
			rt := kmsg.ACLResourceTypeTopic
			if p.Resource == access.TransactionalID {
				rt = kmsg.ACLResourceTypeTransactionalId
			}
			out = append(out, kfake.ACL{Resource: rt, Name: p.Name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: ops[p.Operation], Allow: true})
		}
		return out
	}
	brokers := testenv.Brokers(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.User("SCRAM-SHA-512", "kjob-producer", "pw", acls(access.Producer(d.Topic, d.StateTopic(), d.TransactionalID()))...),
		kfake.User("SCRAM-SHA-512", "svc-reports", "pw", acls(preflight.ScheduleWriterGrants(d.Topic))...))
	as := func(user string) kgo.Opt { return kgo.SASL(scram.Auth{User: user, Pass: "pw"}.AsSha512Mechanism()) }
	specleader.Start(t, brokers, d, as("kjob-producer"))
	s, err := kjob.NewSchedules(kjob.SchedulesConfig{Brokers: brokers, Namespace: "shop", KafkaOpts: []kgo.Opt{as("svc-reports")}, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if _, err := s.Create(ctx, report("tenant-1", "@daily"), "sign-up"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pause(ctx, "tenant-1", "dispute"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, []schedule.Spec{report("tenant-1", "@hourly"), report("tenant-2", "@daily")}, kjob.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "tenant-1")
	if err != nil || got.SetBy != "svc-reports" || got.Version != 3 {
		t.Fatalf("get: %+v, %v; want version 3 set by the SASL user", got, err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	h, err := s.History(ctx, "tenant-1")
	if err != nil || len(h) != 3 || h[0].Actor != "svc-reports" {
		t.Fatalf("history: %+v, %v", h, err)
	}
}
