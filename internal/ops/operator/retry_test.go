package operator_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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

// A plain replay (no Rerun) runs dead-lettered windows again: the issue's
// "re-runs only failed or unfinished ones". The worker keeps running;
// done windows in the range are re-delivered and skipped.
func TestPlainReplayRerunsDeadLettered(t *testing.T) {
	e := newEnv(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var failing atomic.Bool
	failing.Store(true)
	l := &ledger{}
	mux := handler.NewMux()
	mux.HandleFunc("h", func(_ context.Context, j *handler.Job) error {
		if j.Name() == "bad" && failing.Load() {
			return errors.New("upstream down")
		}
		return nil
	})
	w, err := worker.New(worker.Config{
		Brokers: e.brokers, Topic: topic, Group: group, Store: e.store, Handler: mux, WorkerID: "w1",
		Grace: 2 * time.Second, ClaimExtendInterval: time.Second, SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnExecuted: func(x worker.Execution) { l.add(run{worker: "w1", id: x.WindowID, outcome: x.Outcome, token: x.Token}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := control.NewAgent(control.AgentConfig{Brokers: e.brokers, Group: group, Topic: topic, Member: "w1", Seeker: w,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(2)
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	go func() { defer wg.Done(); _ = a.Run(ctx) }()

	good, bad := window("good", 0), window("bad", 1)
	e.publish(good, bad)
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(good.ID, worker.OutcomeDone) == 1 }, "good done")
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(bad.ID, worker.OutcomeDeadLettered) == 1 }, "bad dead-lettered")
	e.drained()
	failing.Store(false)

	r := e.replayer()
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	plan := planOnline(t, rctx, r, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest})
	want := []operator.RetryWindow{{ID: bad.ID, Status: dedupe.StatusDeadLettered}}
	if !slices.Equal(plan.Retry, want) || len(plan.Rerun) != 0 {
		t.Fatalf("plan retry %v rerun %v, want retry %v", plan.Retry, plan.Rerun, want)
	}
	if p := plan.Partitions[0]; p.Replayed != 2 || p.ReplayedOffsets != 2 {
		t.Fatalf("partition plan %+v: want 2 windows over 2 offsets (published without transactions)", p)
	}
	if err := r.Execute(rctx, plan); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(bad.ID, worker.OutcomeDone) == 1 }, "dead-lettered window run again by a plain replay")
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(good.ID, worker.OutcomeSkippedDone) == 1 }, "done window re-delivered and skipped")
	if n := l.count(good.ID, worker.OutcomeDone); n != 1 {
		t.Fatalf("done window ran %d times after a plain replay", n)
	}
	runs := l.of(bad.ID, worker.OutcomeDone)
	dead := l.of(bad.ID, worker.OutcomeDeadLettered)
	if runs[0].token <= dead[0].token {
		t.Fatalf("re-run token %d not above the dead-lettered attempt's %d", runs[0].token, dead[0].token)
	}
	e.drained()
}

// Plain replay of an empty group: failed and dead-lettered windows in the
// range are cleared, done ones kept; REPLAYED counts windows, not the
// transaction markers of a transactional topic.
func TestPlainReplayClearsOnlyFailedAndDead(t *testing.T) {
	e := newEnv(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Publish 4 windows, each in a transaction of its own, as the producer
	// does: 8 offsets.
	txn, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.TransactionalID("retry-test"), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	var ms []*jobmsg.Message
	for i := range 4 {
		m := window("job", i)
		ms = append(ms, m)
		rec, err := jobmsg.Record(topic, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	// done, failed, dead, no record.
	set := func(id string, f func(c dedupe.Claim) error) {
		c, err := e.store.Claim(ctx, id, "test")
		if err != nil {
			t.Fatal(err)
		}
		if err := f(c); err != nil {
			t.Fatal(err)
		}
	}
	set(ms[0].ID, func(c dedupe.Claim) error { return e.store.Complete(ctx, ms[0].ID, c.Token) })
	set(ms[1].ID, func(c dedupe.Claim) error { return e.store.Release(ctx, ms[1].ID, c.Token, "boom") })
	set(ms[2].ID, func(c dedupe.Claim) error { return e.store.DeadLetter(ctx, ms[2].ID, c.Token, "boom") })
	resp, err := e.adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 7, LeaderEpoch: -1}))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	r := e.replayer()
	plan, err := r.Plan(ctx, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if p := plan.Partitions[0]; p.Before != 8 || p.Target != 0 || p.Replayed != 4 || p.ReplayedOffsets != 8 {
		t.Fatalf("partition plan %+v: want before 8, target 0, 4 windows over 8 offsets", p)
	}
	want := []operator.RetryWindow{{ID: ms[1].ID, Status: dedupe.StatusFailed}, {ID: ms[2].ID, Status: dedupe.StatusDeadLettered}}
	if !slices.Equal(plan.Retry, want) {
		t.Fatalf("retry %v, want %v", plan.Retry, want)
	}
	if err := r.Execute(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Retry, want) || plan.Partitions[0].After != 0 {
		t.Fatalf("after execute: retry %v, partition %+v", plan.Retry, plan.Partitions[0])
	}
	for i, m := range ms {
		_, err := e.store.State(ctx, m.ID)
		cleared := errors.Is(err, dedupe.ErrNotFound)
		if wantCleared := i != 0; cleared != wantCleared {
			t.Fatalf("window %d (%s): cleared %v, want %v (%v)", i, m.ID, cleared, wantCleared, err)
		}
	}
}

// Plan's own usage errors match ErrInvalidSpec, so kjobctl exits 2, and
// name the ReplaySpec field (kjobctl names its flag instead).
func TestPlanInvalidSpec(t *testing.T) {
	e := newEnv(t, 3)
	r := e.replayer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jp := names.JobPartition("alpha", 3)
	other := (jp + 1) % 3
	for _, c := range []struct {
		spec  operator.ReplaySpec
		want  string
		field string
	}{
		{operator.ReplaySpec{Mode: operator.ToEarliest}, "replay: ReplaySpec.Group is empty; name the workers' consumer group, e.g. kjob-workers: invalid replay", "ReplaySpec.Group"},
		{operator.ReplaySpec{Group: group, Mode: "sideways"}, `replay: ReplaySpec.Mode = "sideways": want one of to-datetime, by-duration, to-offset, shift-by, to-earliest, to-latest: invalid replay`, "ReplaySpec.Mode"},
		{operator.ReplaySpec{Group: group, Mode: operator.ToEarliest, Job: "alpha", Partitions: []int32{other}},
			`replay: ReplaySpec.Job = "alpha": its windows are on partition ` + itoa(jp) + ", not on ReplaySpec.Partitions [" + itoa(other) + "]: invalid replay", "ReplaySpec.Job"},
	} {
		_, err := r.Plan(ctx, c.spec)
		if ce := configerr.As(err); !errors.Is(err, operator.ErrInvalidSpec) || err.Error() != c.want || ce == nil || ce.Field != c.field {
			t.Errorf("Plan(%+v) = %v\nwant %s, a *configerr.Error about %s", c.spec, err, c.want, c.field)
		}
	}
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

// When no worker applies the seek, Execute says that the records it
// cleared stay cleared while the offsets did not move.
func TestNotAcknowledgedSaysWhatWasCleared(t *testing.T) {
	e := newEnv(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ms := []*jobmsg.Message{window("x", 0), window("x", 1)}
	e.publish(ms...)
	// A group member without a control agent (not a kjob worker).
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pctx.Err() == nil {
			cl.PollFetches(pctx)
		}
	}()
	defer func() { pcancel(); <-polled; cl.Close() }()
	testenv.Eventually(t, 30*time.Second, func() bool {
		dg, err := e.adm.DescribeGroups(ctx, group)
		return err == nil && dg[group].State == "Stable" && len(dg[group].Members) == 1
	}, "group stable with the plain consumer")
	r, err := operator.NewReplayer(operator.ReplayerConfig{Brokers: e.brokers, Topic: topic, Store: e.store, AckTimeout: time.Second, Resend: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	plan, err := r.Plan(ctx, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest, Rerun: true})
	if err != nil {
		t.Fatal(err)
	}
	// The consumer has not committed: BEFORE is the log start, nothing is
	// replayed backwards; use an explicit shift to have windows in range.
	if len(plan.Rerun) != 0 {
		t.Fatalf("rerun %v on a group without commits", plan.Rerun)
	}
	if err := cl.CommitRecords(ctx, &kgo.Record{Topic: topic, Partition: 0, Offset: 1, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	plan, err = r.Plan(ctx, operator.ReplaySpec{Group: group, Mode: operator.ToEarliest, Rerun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Rerun, []string{ms[0].ID, ms[1].ID}) {
		t.Fatalf("rerun %v", plan.Rerun)
	}
	err = r.Execute(ctx, plan)
	want := "replay: seek not acknowledged by any worker within 1s for partitions 0; are the workers running a kjob with the control agent? " +
		"(nothing was rolled back: the records of 2 windows in the replayed range were already cleared, so they run again when re-delivered, " +
		"but the offsets of those partitions did not move; run the replay again once the workers answer)"
	if !errors.Is(err, operator.ErrNotAcknowledged) || err.Error() != want {
		t.Fatalf("Execute: %v\nwant %s", err, want)
	}
}
