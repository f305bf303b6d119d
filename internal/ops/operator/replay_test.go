package operator_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/control"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	topic = "w"
	group = "g"
)

type env struct {
	t       *testing.T
	brokers []string
	store   *dedupe.Store
	redis   *testenv.Redis
	prod    *kgo.Client
	adm     *kadm.Client
}

func newEnv(t *testing.T, partitions int32) *env {
	t.Helper()
	brokers := testenv.Brokers(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	r := testenv.NewRedis(t)
	s, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "test", ClaimTTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	adm := kadm.NewClient(prod)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	return &env{t: t, brokers: brokers, store: s, redis: r, prod: prod, adm: adm}
}

func (e *env) publish(ms ...*jobmsg.Message) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range ms {
		rec, err := jobmsg.Record(topic, m)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := e.prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
	}
}

func window(job string, i int) *jobmsg.Message {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour)
	return &jobmsg.Message{
		ID: jobmsg.WindowID(job, start), Job: job, Handler: "h",
		Window:      jobmsg.Window{Start: start, End: start.Add(time.Hour)},
		ScheduledAt: start, PublishedAt: start,
		Trigger: jobmsg.TriggerSchedule,
		Policy:  jobmsg.Policy{Timeout: jobmsg.Duration(5 * time.Second), MaxAttempts: 1, MaxBackoff: jobmsg.Duration(time.Second)},
	}
}

// ledger records every execution of every worker.
type ledger struct {
	mu   sync.Mutex
	runs []run
}

type run struct {
	worker, id, outcome string
	partition           int32
	token               int64
	attempt             int
}

func (l *ledger) add(r run) {
	l.mu.Lock()
	l.runs = append(l.runs, r)
	l.mu.Unlock()
}

func (l *ledger) count(id, outcome string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.runs {
		if r.id == id && r.outcome == outcome {
			n++
		}
	}
	return n
}

func (l *ledger) of(id, outcome string) []run {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []run
	for _, r := range l.runs {
		if r.id == id && r.outcome == outcome {
			out = append(out, r)
		}
	}
	return out
}

// startWorker runs a worker and its control agent until the test ends.
func (e *env) startWorker(ctx context.Context, id string, l *ledger, wg *sync.WaitGroup) *worker.Worker {
	e.t.Helper()
	return e.startWorkerWith(ctx, id, l, wg, func(ctx context.Context, j *handler.Job) error { return nil }, nil)
}

// startWorkerWith is startWorker with handler h for "h" and, if not nil,
// more OnExecuted hooks.
func (e *env) startWorkerWith(ctx context.Context, id string, l *ledger, wg *sync.WaitGroup, h handler.HandlerFunc, also func(worker.Execution)) *worker.Worker {
	e.t.Helper()
	mux := handler.NewMux()
	mux.HandleFunc("h", h)
	w, err := worker.New(worker.Config{
		Brokers: e.brokers, Topic: topic, Group: group, Store: e.store, Handler: mux, WorkerID: id,
		Grace: 2 * time.Second, ClaimExtendInterval: time.Second,
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnExecuted: func(x worker.Execution) {
			l.add(run{worker: id, id: x.WindowID, outcome: x.Outcome, partition: x.Partition, token: x.Token, attempt: x.Attempt})
			if also != nil {
				also(x)
			}
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	a, err := control.NewAgent(control.AgentConfig{Brokers: e.brokers, Group: group, Topic: topic, Member: id, Seeker: w,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		e.t.Fatal(err)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx); err != nil {
			e.t.Errorf("worker %s: %v", id, err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := a.Run(ctx); err != nil {
			e.t.Errorf("agent %s: %v", id, err)
		}
	}()
	return w
}

func (e *env) replayer() *operator.Replayer {
	e.t.Helper()
	r, err := operator.NewReplayer(operator.ReplayerConfig{Brokers: e.brokers, Topic: topic, Store: e.store, AckTimeout: 30 * time.Second, Resend: time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(r.Close)
	return r
}

// drained waits until the group has committed every partition to its end.
func (e *env) drained() {
	e.t.Helper()
	testenv.Eventually(e.t, 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lags, err := e.adm.Lag(ctx, group)
		if err != nil {
			return false
		}
		l := lags[group]
		return l.Error() == nil && l.State == "Stable" && len(l.Lag[topic]) > 0 && l.Lag.Total() == 0
	}, "group %s drained", group)
}

// TestOnlineReplay rewinds a group whose workers keep running: the owners
// seek and commit themselves, the replayed windows are re-delivered to the
// worker that owns their partition, skipped by dedupe without --rerun and
// run again with it.
func TestOnlineReplay(t *testing.T) {
	e := newEnv(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	l := &ledger{}
	workers := map[string]*worker.Worker{
		"wa": e.startWorker(ctx, "wa", l, &wg),
		"wb": e.startWorker(ctx, "wb", l, &wg),
	}
	var ms []*jobmsg.Message
	for i, job := range []string{"alpha", "beta", "gamma", "delta"} {
		for k := range 2 {
			ms = append(ms, window(job, 10*i+k))
		}
	}
	e.publish(ms...)
	for _, m := range ms {
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(m.ID, worker.OutcomeDone) == 1 }, "window %s done", m.ID)
	}
	e.drained()

	// 1. Without --rerun: every window is re-delivered and skipped.
	r := e.replayer()
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	plan := planOnline(t, rctx, r, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest})
	if !plan.Online || len(plan.Partitions) != 3 || len(plan.Rerun) != 0 {
		t.Fatalf("plan: online %v, %d partitions, rerun %v", plan.Online, len(plan.Partitions), plan.Rerun)
	}
	var replayed int64
	for _, p := range plan.Partitions {
		if p.End == 0 {
			continue // no window hashed here
		}
		if p.Target != 0 || p.Before != p.End || p.Owner == "" {
			t.Fatalf("partition plan %+v: want target 0, before = end, an owner", p)
		}
		replayed += p.Replayed
	}
	if replayed != int64(len(ms)) {
		t.Fatalf("plan replays %d records, want %d", replayed, len(ms))
	}
	if err := r.Execute(rctx, plan); err != nil {
		t.Fatal(err)
	}
	for _, p := range plan.Partitions {
		if p.AppliedBy != p.Owner {
			t.Fatalf("partition %d applied by %q, owner %q", p.Partition, p.AppliedBy, p.Owner)
		}
	}
	for _, m := range ms {
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(m.ID, worker.OutcomeSkippedDone) == 1 }, "window %s re-delivered and skipped", m.ID)
		if n := l.count(m.ID, worker.OutcomeDone); n != 1 {
			t.Fatalf("window %s ran %d times after a replay without rerun", m.ID, n)
		}
	}
	e.drained()

	// 2. With --rerun for one job: only its windows run again, on the
	// worker owning their partition, with higher tokens; the other
	// windows on that partition are skipped again.
	plan = planOnline(t, rctx, r, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest, Job: "beta", Rerun: true})
	wantRerun := []string{ms[2].ID, ms[3].ID}
	if !slices.Equal(plan.Rerun, wantRerun) || len(plan.Partitions) != 1 {
		t.Fatalf("plan rerun %v over %d partitions, want %v over 1", plan.Rerun, len(plan.Partitions), wantRerun)
	}
	part := plan.Partitions[0].Partition
	if err := r.Execute(rctx, plan); err != nil {
		t.Fatal(err)
	}
	for _, id := range wantRerun {
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 2 }, "window %s ran again", id)
		runs := l.of(id, worker.OutcomeDone)
		if runs[1].token <= runs[0].token {
			t.Fatalf("re-run of %s has token %d, first run %d: want higher", id, runs[1].token, runs[0].token)
		}
		owner := runs[1].worker
		if !slices.Contains(workers[owner].Assigned(), part) || runs[1].partition != part {
			t.Fatalf("re-run of %s on %s (partition %d), which owns %v; the job's partition is %d", id, owner, runs[1].partition, workers[owner].Assigned(), part)
		}
	}
	for _, m := range ms {
		if m.Job == "beta" {
			continue
		}
		if n := l.count(m.ID, worker.OutcomeDone); n != 1 {
			t.Fatalf("window %s of another job ran %d times after a --job beta --rerun replay", m.ID, n)
		}
		if names.JobPartition(m.Job, 3) == part {
			testenv.Eventually(t, 30*time.Second, func() bool { return l.count(m.ID, worker.OutcomeSkippedDone) == 2 }, "window %s on the same partition re-delivered and skipped", m.ID)
		}
	}
	e.drained()
}

// TestReplayEmptyGroup commits directly when no worker runs, and refuses
// unknown groups and partitions with errors that say what to fix.
func TestReplayEmptyGroup(t *testing.T) {
	e := newEnv(t, 2)
	r := e.replayer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, err := r.Plan(ctx, operator.ReplaySpec{Group: "nobody", Mode: operator.ToEarliest})
	want := `replay: group "nobody": group does not exist (no members, no committed offsets on w)`
	if !errors.Is(err, operator.ErrNoGroup) || err.Error() != want {
		t.Fatalf("unknown group: %v\nwant %s", err, want)
	}
	_, err = r.Plan(ctx, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest, Partitions: []int32{7}})
	want = "replay: ReplaySpec.Partitions = 7: no such partition: topic w has partitions 0-1"
	if ce := configerr.As(err); !errors.Is(err, operator.ErrNoPartition) || err.Error() != want || ce == nil || ce.Field != "ReplaySpec.Partitions" || ce.Value != int32(7) {
		t.Fatalf("bad partition: %#v\nwant %s, a *configerr.Error about ReplaySpec.Partitions", err, want)
	}

	var ms []*jobmsg.Message
	for i := range 6 {
		ms = append(ms, window("solo", i))
	}
	e.publish(ms...)
	p := names.JobPartition("solo", 2)
	// A group that consumed once and stopped: commit 5 directly.
	resp, err := e.adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: p, Offset: 4, LeaderEpoch: -1}))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Plan(ctx, operator.ReplaySpec{Group: group, Mode: operator.ShiftBy, Offset: -3, Partitions: []int32{p}, Rerun: true})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Online || plan.Partitions[0].Before != 5 || plan.Partitions[0].Target != 2 || plan.Partitions[0].Replayed != 3 {
		t.Fatalf("plan %+v", plan)
	}
	if !slices.Equal(plan.Rerun, []string{ms[2].ID, ms[3].ID, ms[4].ID}) {
		t.Fatalf("rerun %v", plan.Rerun)
	}
	// Mark them done so the rerun has something to clear.
	for _, m := range ms[2:5] {
		c, err := e.store.Claim(ctx, m.ID, "test")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.Complete(ctx, m.ID, c.Token); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Execute(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if got := plan.Partitions[0]; got.After != 2 || got.AppliedBy != "kadm" {
		t.Fatalf("after execute: %+v", got)
	}
	for _, m := range ms[2:5] {
		if _, err := e.store.State(ctx, m.ID); !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("done marker of %s not cleared: %v", m.ID, err)
		}
	}
	// Clamping, as kafka-consumer-groups does.
	plan, err = r.Plan(ctx, operator.ReplaySpec{Group: group, Mode: operator.ToOffset, Offset: 99, Partitions: []int32{p}})
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Partitions[0]; got.Target != 6 || got.Clamped != "latest" {
		t.Fatalf("to-offset 99: %+v", got)
	}
	_ = fmt.Sprint
}

// planOnline plans a replay the way an operator does when told "run the command
// again in a few seconds": a group of live workers can be between
// assignments for a moment even after it reported Stable (KIP-848 members
// reconcile one at a time), and Plan refuses then with ErrRebalancing.
// Any other error, or a rebalance that lasts past the deadline, fails.
func planOnline(t *testing.T, ctx context.Context, r *operator.Replayer, spec operator.ReplaySpec) *operator.ReplayPlan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := r.Plan(ctx, spec)
		if err == nil {
			return p
		}
		if !errors.Is(err, operator.ErrRebalancing) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOperatorReplay: the Operator's replay (the entry point kjobctl
// replay and the dashboard call) plans and executes through its Replayer,
// passes the spec's options through (Rerun clears the done markers), and
// without a Replayer names the missing part.
func TestOperatorReplay(t *testing.T) {
	e := newEnv(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	bare, err := operator.New(operator.Config{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bare.PlanReplay(ctx, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest})
	if ce := configerr.As(err); ce == nil || ce.Field != "Config.Replayer" {
		t.Fatalf("plan without a replayer: %v, want a *configerr.Error naming Config.Replayer", err)
	}
	if err := bare.ExecuteReplay(ctx, &operator.ReplayPlan{}); configerr.As(err) == nil || configerr.As(err).Field != "Config.Replayer" {
		t.Fatalf("execute without a replayer: %v, want a *configerr.Error naming Config.Replayer", err)
	}

	op, err := operator.New(operator.Config{Topic: topic, Store: e.store, Replayer: e.replayer()})
	if err != nil {
		t.Fatal(err)
	}
	var ms []*jobmsg.Message
	for i := range 4 {
		ms = append(ms, window("solo", i))
	}
	e.publish(ms...)
	p := names.JobPartition("solo", 2)
	resp, err := e.adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: p, Offset: 3, LeaderEpoch: -1}))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[2:4] {
		c, err := e.store.Claim(ctx, m.ID, "test")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.Complete(ctx, m.ID, c.Token); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := op.PlanReplay(ctx, operator.ReplaySpec{Group: group, Mode: operator.ShiftBy, Offset: -2, Partitions: []int32{p}, Rerun: true})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Online || plan.Partitions[0].Before != 4 || plan.Partitions[0].Target != 2 || !slices.Equal(plan.Rerun, []string{ms[2].ID, ms[3].ID}) {
		t.Fatalf("plan %+v, rerun %v", plan, plan.Rerun)
	}
	if err := op.ExecuteReplay(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if got := plan.Partitions[0]; got.After != 2 || got.AppliedBy != "kadm" {
		t.Fatalf("after execute: %+v", got)
	}
	for _, m := range ms[2:4] {
		if _, err := e.store.State(ctx, m.ID); !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("done marker of %s not cleared: %v", m.ID, err)
		}
	}
}
