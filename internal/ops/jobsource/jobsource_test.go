package jobsource_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// The follower tails the topic: a job written while it runs is in its
// list without any re-read, a deleted one leaves it, and its answers for
// malformed records, tombstones, specs that do not validate and aborted
// transactions are those of a fresh read (ReadTopic). A Sync after a write
// sees the write, also when the topic did not exist when Run began.
func TestFollowerFollowsTheTopic(t *testing.T) {
	cluster := testenv.Cluster(t)
	brokers := cluster.ListenAddrs()
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	f, err := jobsource.NewFollower(jobsource.FollowerConfig{Opts: opts, Deployment: dep})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(rctx) }()
	defer func() {
		stop()
		if err := testenv.Recv(t, done, 10*time.Second, "Run's return"); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	names := func() string {
		t.Helper()
		js, err := f.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range js {
			out = append(out, j.Name)
		}
		return strings.Join(out, ",")
	}
	// No topic yet: an empty set, as a fresh read gives.
	if s, err := f.Set(ctx); err != nil || !s.Empty() || s.Topic != dep.SchedulesTopic() {
		t.Fatalf("Set before the topic exists: %+v, %v", s, err)
	}
	adm := kadm.NewClient(mustClient(t, opts))
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": ptr("compact")}, dep.SchedulesTopic()); err != nil {
		t.Fatal(err)
	}
	write(t, brokers, spec(t, record("a", "@every 1m", 1)))
	// Sync finds the new topic at once (Run looks for it every second).
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != "a" {
		t.Fatalf("after Sync: jobs %q, want a", got)
	}
	// Followed, not re-read: no Sync.
	write(t, brokers, spec(t, record("b", "@every 1m", 1)))
	testenv.Eventually(t, 20*time.Second, func() bool { return names() == "a,b" }, "b not followed: jobs %q", names())
	write(t, brokers, specs.Tombstone(dep.SchedulesTopic(), "b", 2))
	testenv.Eventually(t, 20*time.Second, func() bool { return names() == "a" }, "b's delete not followed: jobs %q", names())
	if _, err := f.Job(ctx, "b"); err == nil || !strings.Contains(err.Error(), `it was deleted from js.windows.schedules (version 2;`) {
		t.Fatalf("Job(b) after its delete: %v", err)
	}

	// A malformed record, a spec that does not validate, a record of
	// another namespace, a committed and an aborted transaction.
	write(t, brokers, &kgo.Record{Topic: dep.SchedulesTopic(), Key: []byte("a"), Value: []byte("{not json")},
		spec(t, record("broken", "every now and then", 1)))
	other := record("other", "@every 1m", 1)
	other.Namespace = "elsewhere"
	write(t, brokers, spec(t, other))
	txn := func(commit bool, recs ...*kgo.Record) {
		t.Helper()
		cl := mustClient(t, append(opts, kgo.TransactionalID(fmt.Sprintf("js-test-%v", commit)), kgo.ProducerLinger(0)))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(false, spec(t, record("aborted", "@every 1m", 1)))
	txn(true, spec(t, record("c", "@every 1m", 1)), spec(t, record("a", "@every 2m", 2)))
	// The last committed offset is the commit marker: Sync reaches it.
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := f.Set(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := jobsource.ReadTopic(ctx, opts, dep)
	if err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(got.Names(), ","); g != "a,c" || g != strings.Join(want.Names(), ",") {
		t.Errorf("jobs: follower %s, fresh read %s, want a,c", g, strings.Join(want.Names(), ","))
	}
	if j, err := got.Job("a"); err != nil || j.Spec != "@every 2m" {
		t.Errorf("Job(a) = %v, %v, want the committed @every 2m", j, err)
	}
	if fmt.Sprint(got.Deleted) != fmt.Sprint(want.Deleted) || fmt.Sprint(got.Deleted) != "map[b:2]" {
		t.Errorf("deleted: follower %v, fresh read %v, want map[b:2]", got.Deleted, want.Deleted)
	}
	if len(got.Invalid) != 1 || got.Invalid["broken"] == nil || fmt.Sprint(got.Invalid) != fmt.Sprint(want.Invalid) {
		t.Errorf("invalid: follower %v, fresh read %v, want broken", got.Invalid, want.Invalid)
	}
	if fmt.Sprint(got.Malformed) != fmt.Sprint(want.Malformed) || len(got.Malformed) != 2 {
		t.Errorf("malformed: follower %v, fresh read %v, want the bad JSON and the other namespace's", got.Malformed, want.Malformed)
	}
	for name, r := range want.Records {
		if g := got.Records[name]; g == nil || g.Version != r.Version {
			t.Errorf("record %s: follower %+v, fresh read %+v", name, g, r)
		}
	}
	snap, err := f.Snapshot(ctx)
	if err != nil || len(snap.Jobs) != 3 || snap.Jobs["a"].Version != 2 {
		t.Errorf("Snapshot: %+v, %v, want a v2, broken and c", snap, err)
	}
	if _, err := jobsource.NewFollower(jobsource.FollowerConfig{Deployment: dep}); err == nil || !strings.Contains(err.Error(), "FollowerConfig.Opts") {
		t.Errorf("NewFollower without Opts: %v", err)
	}
}

func mustClient(t *testing.T, opts []kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ptr[T any](v T) *T { return &v }
