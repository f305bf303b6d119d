package jobsource_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/ops/jobsource"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

var dep = names.Deployment{Namespace: "js", Topic: "js.windows"}

func record(name, sched string, version int64) *specs.Record {
	return &specs.Record{Namespace: "js", Job: name, Version: version, Spec: schedule.Spec{Name: name, Schedule: sched, Handler: "h"}, SetBy: "t", SetAt: time.Now().UTC()}
}

func write(t *testing.T, brokers []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func spec(t *testing.T, r *specs.Record) *kgo.Record {
	t.Helper()
	kr, err := specs.SpecRecord(dep.SchedulesTopic(), r)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func snapshotOf(t *testing.T, recs ...*kgo.Record) *specs.Snapshot {
	t.Helper()
	s := specs.NewSnapshot()
	for i, r := range recs {
		r.Offset = int64(i)
		_ = s.Apply(r, "js")
	}
	return s
}

func TestSetJob(t *testing.T) {
	bad := record("broken", "every now and then", 3)
	snap := snapshotOf(t, spec(t, record("b", "@every 1m", 1)), spec(t, record("a", "@every 1h", 2)), spec(t, bad),
		spec(t, record("gone", "@every 1m", 1)), specs.Tombstone(dep.SchedulesTopic(), "gone", 2))
	s := jobsource.FromSnapshot(dep.SchedulesTopic(), snap, time.Now())
	if got := s.Names(); strings.Join(got, ",") != "a,b" {
		t.Fatalf("jobs %v, want a,b (broken does not validate, gone is deleted)", got)
	}
	if j, err := s.Job("a"); err != nil || j.Spec != "@every 1h" {
		t.Fatalf("Job(a) = %v, %v", j, err)
	}
	_, err := s.Job("nope")
	var u *jobsource.UnknownJobError
	if !errors.As(err, &u) || !errors.Is(err, jobsource.ErrUnknownJob) {
		t.Fatalf("Job(nope): %v, want an *UnknownJobError", err)
	}
	want := `unknown job "nope": the schedules topic js.windows.schedules has a, b, broken; create it with kjobctl schedule apply -f FILE (kjobctl schedule get JOB shows a job's spec)`
	if err.Error() != want {
		t.Errorf("Job(nope):\n got %s\nwant %s", err, want)
	}
	_, err = s.Job("gone")
	if want := `unknown job "gone": it was deleted from js.windows.schedules (version 2; kjobctl schedule history gone shows who and when)`; !errors.Is(err, jobsource.ErrUnknownJob) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Job(gone): %v, want it to start %q", err, want)
	}
	_, err = s.Job("broken")
	if !errors.Is(err, jobsource.ErrInvalidSpec) || !strings.Contains(err.Error(), `job "broken", version 3 in js.windows.schedules: spec does not validate: `) {
		t.Errorf("Job(broken): %v, want ErrInvalidSpec naming the version", err)
	}

	// More than 20 jobs: the first 20 are listed.
	var many []*kgo.Record
	for i := range 25 {
		many = append(many, spec(t, record(fmt.Sprintf("j%02d", i), "@every 1m", 1)))
	}
	_, err = jobsource.FromSnapshot("t", snapshotOf(t, many...), time.Now()).Job("x")
	if !strings.Contains(err.Error(), "has j00, j01, j02, j03, j04, j05, j06, j07, j08, j09, j10, j11, j12, j13, j14, j15, j16, j17, j18, j19 and 5 more; ") {
		t.Errorf("Job(x) among 25: %v", err)
	}

	// A file's set: the error names the file.
	f, err := schedule.Parse("ops.yaml", []byte("jobs:\n  - name: z\n    schedule: \"@every 1m\"\n    handler: h\n  - name: y\n    schedule: \"@every 1m\"\n    handler: h\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := jobsource.FromFile(f, time.Now())
	if _, err := fs.Job("x"); err == nil || err.Error() != `unknown job "x": the schedules file ops.yaml has y, z; add it to the file, or drop --schedules to read the schedules topic` {
		t.Errorf("file Job(x): %v", err)
	}
}

// A schedules topic that does not exist, or is empty, reads as an empty
// set whose error says what that means.
func TestReadTopicEmpty(t *testing.T) {
	brokers := testenv.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := jobsource.ReadTopic(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, dep)
	if err != nil || !s.Empty() || s.Topic != "js.windows.schedules" {
		t.Fatalf("ReadTopic of a missing topic: %+v, %v", s, err)
	}
	_, err = s.Job("report")
	want := `unknown job "report": the schedules topic js.windows.schedules has no jobs (it is empty or does not exist): a producer older than schedules as a log does not write it; ` +
		`for such a deployment pass the producer's schedules file with --schedules FILE, or create the jobs with kjobctl schedule apply -f FILE`
	if err == nil || err.Error() != want {
		t.Fatalf("Job on an empty topic:\n got %v\nwant %s", err, want)
	}
}

// The cache reads the topic again once its list is older than MaxAge, and
// a Snapshot (a fresh read) refreshes the list at once.
func TestCacheRefreshes(t *testing.T) {
	brokers := testenv.Brokers(t, kfake.SeedTopics(1, dep.SchedulesTopic()))
	write(t, brokers, spec(t, record("a", "@every 1m", 1)))
	var mu sync.Mutex
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c, err := jobsource.NewCache(jobsource.CacheConfig{Opts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Deployment: dep, MaxAge: time.Minute, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	names := func() string {
		t.Helper()
		js, err := c.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range js {
			out = append(out, j.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(); got != "a" {
		t.Fatalf("jobs %q, want a", got)
	}
	write(t, brokers, spec(t, record("b", "@every 1m", 1)))
	advance(59 * time.Second)
	if got := names(); got != "a" {
		t.Fatalf("within MaxAge: jobs %q, want the cached a", got)
	}
	advance(time.Second)
	if got := names(); got != "a,b" {
		t.Fatalf("after MaxAge: jobs %q, want a,b", got)
	}
	write(t, brokers, spec(t, record("c", "@every 1m", 1)))
	snap, err := c.Snapshot(ctx)
	if err != nil || len(snap.Jobs) != 3 {
		t.Fatalf("Snapshot: %v, %v", snap, err)
	}
	if got := names(); got != "a,b,c" {
		t.Fatalf("after a Snapshot: jobs %q, want a,b,c", got)
	}
	if _, err := c.Job(ctx, "d"); !errors.Is(err, jobsource.ErrUnknownJob) {
		t.Fatalf("Job(d): %v", err)
	}
	if _, err := jobsource.NewCache(jobsource.CacheConfig{Deployment: dep}); err == nil || !strings.Contains(err.Error(), "CacheConfig.Opts") {
		t.Errorf("NewCache without Opts: %v", err)
	}
}
