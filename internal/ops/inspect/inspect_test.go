package inspect_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/ops/jobsource"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type alwaysLeader struct{}

func (alwaysLeader) Run(ctx context.Context, lead func(context.Context) error) error {
	return lead(ctx)
}

// TestSnapshot reads a deployment with a lease holder, a producer that
// published windows, one window done, one job paused, and no workers yet.
func TestSnapshot(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lock, err := lease.NewRedisLock(rdb, names.Deployment{Namespace: "ns"}.LeaseKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := lock.TryAcquire(ctx, "producer-a", time.Minute); err != nil || !ok {
		t.Fatalf("acquire lease: %v %v", ok, err)
	}
	f, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: a\n    schedule: \"@every 10s\"\n    handler: log\n  - name: b\n    schedule: \"0 3 * * *\"\n    timezone: Europe/Berlin\n    handler: log\n"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	var published []producer.Published
	done := make(chan []producer.Published, 10)
	p, err := producer.New(producer.Config{Brokers: brokers, Namespace: "ns", Jobs: f.Jobs, Elector: alwaysLeader{}, Clock: clk, Partitions: 2,
		Logger: slog.New(slog.DiscardHandler), OnPublished: func(ps []producer.Published) { done <- ps }})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	perr := make(chan error, 1)
	go func() { perr <- p.Run(pctx) }()
	defer func() { pcancel(); <-perr }()
	testenv.Eventually(t, 20*time.Second, func() bool { return p.Status().Leading && len(p.Status().Next) > 0 }, "producer not leading")
	clk.Set(t0.Add(5 * time.Second))
	select {
	case published = <-done:
	case <-ctx.Done():
		t.Fatal("window not published")
	}
	if len(published) != 1 || published[0].ID != "a@2026-11-22T10:00:10Z" {
		t.Fatalf("published %+v", published)
	}
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Claim(ctx, published[0].ID, "worker-x")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(ctx, published[0].ID, c.Token); err != nil {
		t.Fatal(err)
	}
	// Pauses are spec changes through the leader, by an actor, with a note.
	sc, err := specs.NewClient(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Deployment: names.Deployment{Namespace: "ns"},
		Actor: "alice", Wait: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Submit(ctx, []specs.Edit{{Op: specs.OpPause, Job: "b", Note: "upstream down"}}, ""); err != nil {
		t.Fatal(err)
	}

	in, err := inspect.New(inspect.Config{Brokers: brokers, Redis: rdb, Namespace: "ns", Jobs: f.Jobs, Pauses: pauses(t, brokers), ChangeLog: sc, NextN: 2,
		Now: func() time.Time { return t0.Add(5 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	s, err := in.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Errors) != 0 {
		t.Fatalf("snapshot errors: %v", s.Errors)
	}
	if s.Leader == nil || s.Leader.Holder != "producer-a" || s.Leader.Epoch < 1 {
		t.Fatalf("leader %+v", s.Leader)
	}
	if s.Group != nil || s.DeadLetters != 0 {
		t.Fatalf("group %+v, dead letters %d: want no group (no worker joined) and 0", s.Group, s.DeadLetters)
	}
	if _, err := in.Group(ctx); !errors.Is(err, inspect.ErrNoGroup) {
		t.Fatalf("Group: %v, want ErrNoGroup", err)
	}
	if len(s.Jobs) != 2 {
		t.Fatalf("jobs %+v", s.Jobs)
	}
	a, b := s.Jobs[0], s.Jobs[1]
	if a.Name != "a" || a.Last == nil || a.Last.ID != "a@2026-11-22T10:00:10Z" || a.Last.Outcome != "done" || a.Last.Holder != "worker-x" ||
		len(a.Next) != 2 || !a.Next[0].Equal(t0.Add(15*time.Second)) || a.Paused || a.Partition != names.JobPartition("a", 2) {
		t.Fatalf("job a: %+v last %+v", a, a.Last)
	}
	// A paused job fires nothing: no next fire times; who paused it, since
	// when and why come from its spec.
	if b.Name != "b" || !b.Paused || b.Last != nil || b.Timezone != "Europe/Berlin" || len(b.Next) != 0 ||
		b.Pause == nil || b.Pause.By != "alice" || b.Pause.Note != "upstream down" || !b.Pause.At.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("job b: %+v pause %+v", b, b.Pause)
	}
	if _, err := sc.Submit(ctx, []specs.Edit{{Op: specs.OpResume, Job: "b"}}, ""); err != nil {
		t.Fatal(err)
	}
	s, _ = in.Snapshot(ctx)
	wantB := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC) // 03:00 CET
	if b := s.Jobs[1]; b.Paused || len(b.Next) != 2 || !b.Next[0].Equal(wantB) {
		t.Fatalf("job b after resume: %+v", b)
	}

	// A window without a record is pending, unless it fell due while the
	// job was paused: then the producer skipped it, also after a resume.
	if err := store.Forget(ctx, published[0].ID); err != nil {
		t.Fatal(err)
	}
	if s, _ = in.Snapshot(ctx); s.Jobs[0].Last.Outcome != "pending" {
		t.Fatalf("window without a record: %+v", s.Jobs[0].Last)
	}
	// A window an operator's replay moved past, settled as skipped.
	if res, err := store.SkipForReplay(ctx, []dedupe.Run{{WindowID: published[0].ID, Job: "a"}}, "request r1 by test", "test"); err != nil || len(res.Skipped) != 1 {
		t.Fatalf("skip for replay: %+v, %v", res, err)
	}
	if s, _ = in.Snapshot(ctx); s.Jobs[0].Last.Outcome != "skipped (replay)" {
		t.Fatalf("window skipped by a replay: %+v", s.Jobs[0].Last)
	}
	if err := store.Forget(ctx, published[0].ID); err != nil {
		t.Fatal(err)
	}
	// A window without a record that started after the job was paused is
	// one the producer did not publish: a producer older than the spec
	// pauses advanced its state past the windows it skipped, and the
	// upgrade moved that pause (since 10:00:05) into the spec. It stays
	// explained after the resume, from the change log.
	pcancel()
	<-perr
	list, err := pause.New(rdb, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if err := list.Add(ctx, pause.Pause{Job: "a", Since: t0, By: "bob"}); err != nil {
		t.Fatal(err)
	}
	p, err = producer.New(producer.Config{Brokers: brokers, Namespace: "ns", Jobs: f.Jobs, Elector: alwaysLeader{}, Clock: clk, Partitions: 2,
		Logger: slog.New(slog.DiscardHandler), LegacyPauses: list})
	if err != nil {
		t.Fatal(err)
	}
	pctx2, pcancel2 := context.WithCancel(ctx)
	pcancel = pcancel2 // for the deferred stop
	go func() { perr <- p.Run(pctx2) }()
	testenv.Eventually(t, 20*time.Second, func() bool { r, err := sc.Get(ctx, "a"); return err == nil && r.Paused != nil }, "a's pause not migrated")
	if s, _ = in.Snapshot(ctx); !s.Jobs[0].Paused || s.Jobs[0].Pause.By != "bob" || s.Jobs[0].Last.Outcome != "skipped (paused)" || s.Err() != nil {
		t.Fatalf("window skipped during a lasting pause: %+v %+v (%v)", s.Jobs[0], s.Jobs[0].Last, s.Err())
	}
	if _, err := sc.Submit(ctx, []specs.Edit{{Op: specs.OpResume, Job: "a"}}, ""); err != nil {
		t.Fatal(err)
	}
	if s, _ = in.Snapshot(ctx); s.Jobs[0].Paused || s.Jobs[0].Last.Outcome != "skipped (paused)" || s.Err() != nil {
		t.Fatalf("window skipped during a finished pause: %+v %+v (%v)", s.Jobs[0], s.Jobs[0].Last, s.Err())
	}
	// Without Redis the leader and outcomes are reported as unavailable,
	// the rest still reads.
	in2, err := inspect.New(inspect.Config{Brokers: brokers, Namespace: "ns", Jobs: f.Jobs})
	if err != nil {
		t.Fatal(err)
	}
	defer in2.Close()
	s2, _ := in2.Snapshot(ctx)
	if s2.Leader != nil || len(s2.Errors) != 1 || s2.Errors[0] != "leader: no Redis configured" || s2.LeaderError != "no Redis configured" ||
		s2.Jobs[0].Last.Outcome != "unknown" || !errors.Is(s2.Err(), inspect.ErrPartial) {
		t.Fatalf("snapshot without Redis: leader %+v errors %v", s2.Leader, s2.Errors)
	}
	// A JobSource is read at every Snapshot: a job it adds shows; when it
	// fails, the jobs known from the state topic are marked SpecUnknown.
	src := &jobList{jobs: f.Jobs[:1]}
	in4, err := inspect.New(inspect.Config{Brokers: brokers, Namespace: "ns", JobSource: src})
	if err != nil {
		t.Fatal(err)
	}
	defer in4.Close()
	inFile := func(s *inspect.Snapshot) (n int) {
		for _, j := range s.Jobs {
			if j.InFile {
				n++
			}
		}
		return n
	}
	if s4, _ := in4.Snapshot(ctx); inFile(s4) != 1 {
		t.Fatalf("JobSource of 1 job: %+v", s4.Jobs)
	}
	src.set(f.Jobs, nil)
	if s4, _ := in4.Snapshot(ctx); inFile(s4) != len(f.Jobs) {
		t.Fatalf("JobSource of %d jobs: %+v", len(f.Jobs), s4.Jobs)
	}
	src.set(nil, errors.New("schedules topic down"))
	s4, _ := in4.Snapshot(ctx)
	if inFile(s4) != 0 || len(s4.Jobs) == 0 || !s4.Jobs[0].SpecUnknown || !strings.Contains(s4.JobsError, "job list: schedules topic down") {
		t.Fatalf("failing JobSource: %+v, %q", s4.Jobs, s4.JobsError)
	}
	if _, err := inspect.New(inspect.Config{Brokers: brokers, Jobs: f.Jobs, JobSource: src}); err == nil || !strings.Contains(err.Error(), "Config.JobSource") {
		t.Errorf("Jobs and JobSource both set: %v", err)
	}
}

// jobList is a JobSource whose answer the test sets.
type jobList struct {
	mu   sync.Mutex
	jobs []*schedule.Job
	err  error
}

func (l *jobList) set(jobs []*schedule.Job, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs, l.err = jobs, err
}

func (l *jobList) Jobs(context.Context) ([]*schedule.Job, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.jobs, l.err
}

// pauses reads the jobs' pauses from the schedules topic at every call.
func pauses(t *testing.T, brokers []string) inspect.Pauses {
	t.Helper()
	return topicPauses{kgo.SeedBrokers(brokers...)}
}

type topicPauses []kgo.Opt

func (p topicPauses) Pauses(ctx context.Context) (map[string]*specs.Pause, error) {
	s, err := jobsource.ReadTopic(ctx, p, names.Deployment{Namespace: "ns"})
	if err != nil {
		return nil, err
	}
	return s.Pauses(), nil
}

// PausePeriods: a pause runs from its At to the change that leaves the
// job unpaused (resume or delete); a pause kept by an update goes on.
func TestPausePeriods(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 11, 22, 10, m, 0, 0, time.UTC) }
	p := func(m int) *specs.Pause { return &specs.Pause{By: "x", At: at(m)} }
	got := inspect.PausePeriods([]*specs.Change{
		{Job: "a", Op: specs.OpPut, At: at(0)},
		{Job: "a", Op: specs.OpPause, At: at(1), Paused: p(1)},
		{Job: "b", Op: specs.OpPause, At: at(2), Paused: p(2)},
		{Job: "a", Op: specs.OpUpdate, At: at(3), Paused: p(1)},
		{Job: "a", Op: specs.OpResume, At: at(4)},
		{Job: "b", Op: specs.OpDelete, At: at(5)},
		{Job: "a", Op: specs.OpPause, At: at(6), Paused: p(6)},
	})
	want := map[string][]inspect.PausePeriod{"a": {{Since: at(1), Until: at(4)}}, "b": {{Since: at(2), Until: at(5)}}}
	if len(got) != 2 || len(got["a"]) != 1 || got["a"][0] != want["a"][0] || len(got["b"]) != 1 || got["b"][0] != want["b"][0] {
		t.Fatalf("PausePeriods = %+v, want %+v", got, want)
	}
}

// With Kafka and Redis down every part carries its error and no zero
// value poses as a fact.
func TestSnapshotDown(t *testing.T) {
	cluster := testenv.Cluster(t)
	brokers := cluster.ListenAddrs()
	r := testenv.NewRedis(t)
	rdb := r.Client()
	cluster.Close()
	r.Kill()
	f, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: a\n    schedule: \"@every 10s\"\n    handler: log\n"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := specs.NewClient(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Deployment: names.Deployment{Namespace: "ns"}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := inspect.New(inspect.Config{Brokers: brokers, Redis: rdb, Namespace: "ns", Jobs: f.Jobs, Pauses: pauses(t, brokers), ChangeLog: sc})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := in.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.LeaderError == "" || s.GroupError == "" || s.JobsError == "" || s.DeadLettersError == "" || s.StallsError == "" || len(s.Errors) != 5 {
		t.Fatalf("part errors: leader %q group %q jobs %q dead letters %q stalls %q", s.LeaderError, s.GroupError, s.JobsError, s.DeadLettersError, s.StallsError)
	}
	if s.Leader != nil || s.Group != nil || s.DeadLetters != 0 || !errors.Is(s.Err(), inspect.ErrPartial) {
		t.Fatalf("snapshot %+v", s)
	}
	if a := s.Jobs[0]; len(s.Jobs) != 1 || !a.PartitionUnknown || !a.PausedUnknown || !a.LastUnknown || a.Last != nil {
		t.Fatalf("job %+v: want partition, pause and last window unknown", a)
	}
}

func TestHostAddress(t *testing.T) {
	for in, want := range map[string]string{"/127.0.0.1:50001": "127.0.0.1", "/[::1]:5000": "::1", "10.0.3.7:9": "10.0.3.7", "worker-0.kjob": "worker-0.kjob", "/[fe80::1]": "fe80::1", "": ""} {
		if got := inspect.HostAddress(in); got != want {
			t.Errorf("HostAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
