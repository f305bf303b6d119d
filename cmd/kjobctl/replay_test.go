package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// An online replay while a producer keeps publishing and the worker keeps
// running: the windows done before it run again (--rerun), the windows
// published after it run once, and nothing runs a third time.
func TestReplayWhilePublishing(t *testing.T) {
	e := newOpsEnv(t)
	sched := filepath.Join(t.TempDir(), "tick.yaml")
	if err := os.WriteFile(sched, []byte("jobs:\n  - name: tick\n    schedule: \"@every 1s\"\n    handler: ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := schedule.Load(sched)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := producer.New(producer.Config{Brokers: e.brokers, Namespace: "ops", Topic: "kjob.windows", Jobs: f.Jobs, Elector: leadAlways{}, Clock: clock.Real{}, Partitions: 2,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	perr := make(chan error, 1)
	go func() { perr <- p.Run(ctx) }()
	var once sync.Once
	stopProducer := func() { once.Do(func() { cancel(); <-perr }) }
	defer stopProducer()
	var mu sync.Mutex
	failing := false
	l := e.startWorker(&failing, &mu)
	done := func() map[string]int {
		l.mu.Lock()
		defer l.mu.Unlock()
		m := map[string]int{}
		for _, x := range l.all {
			if x.Outcome == worker.OutcomeDone {
				m[x.WindowID]++
			}
		}
		return m
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return len(done()) >= 4 }, "4 tick windows run")
	before := done()

	// tick is in the schedules topic because the producer imported it.
	code, out, stderr := e.kjobctl("replay", "--to-earliest", "--job", "tick", "--rerun", "--execute", "-o", "json")
	var plan struct {
		operator.ReplayPlan
		Executed bool `json:"executed"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &plan) != nil || !plan.Executed || !plan.Online || len(plan.Partitions) != 1 ||
		plan.Partitions[0].AppliedBy != "w1" || plan.Partitions[0].Partition != names.JobPartition("tick", 2) {
		t.Fatalf("replay: exit %d\n%s%s", code, out, stderr)
	}
	rerun := map[string]bool{}
	for _, id := range plan.Rerun {
		rerun[id] = true
	}
	// The replay covers the windows below the committed offset when it
	// planned (BEFORE); a window that ran but was not committed yet is
	// not replayed.
	again := 0
	for _, id := range plan.Rerun {
		if before[id] > 0 {
			again++
			testenv.Eventually(t, 30*time.Second, func() bool { return done()[id] == 2 }, "%s not run again by the replay", id)
		}
	}
	if again < 1 {
		t.Fatalf("only %d of the windows done before the replay (%v) are in its rerun list %v", again, before, plan.Rerun)
	}
	// Windows published after the replay started run once.
	testenv.Eventually(t, 30*time.Second, func() bool {
		n := 0
		for id, c := range done() {
			if !rerun[id] && c == 1 {
				n++
			}
		}
		return n >= 2
	}, "windows published after the replay run")
	stopProducer()
	// Let the worker drain what was published, then no window ran a
	// third time and none published after the replay ran twice.
	testenv.Eventually(t, 30*time.Second, func() bool {
		c, out, _ := e.kjobctl("lag", "-o", "json")
		var g inspect.Group
		return c == exitOK && json.Unmarshal([]byte(out), &g) == nil && g.TotalLag == 0
	}, "drained")
	for id, c := range done() {
		if c > 2 || (!rerun[id] && c != 1) {
			t.Fatalf("window %s ran %d times (in the rerun list: %v)", id, c, rerun[id])
		}
	}
}

// An empty group (no worker running) gets its offsets committed directly,
// through the command.
func TestReplayEmptyGroupCommand(t *testing.T) {
	e := newOpsEnv(t)
	for range 3 {
		if code, _, stderr := e.kjobctl("trigger", "report"); code != exitOK {
			t.Fatalf("trigger: %s", stderr)
		}
	}
	part := names.JobPartition("report", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.adm.CommitOffsets(ctx, "kjob-workers", kadm.OffsetsFromRecords(kgo.Record{Topic: "kjob.windows", Partition: part, Offset: 2, LeaderEpoch: -1}))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := e.kjobctl("replay", "--shift-by", "-2", "--partition", fmt.Sprint(part), "--execute")
	if code != exitOK || !strings.HasPrefix(out, "Group kjob-workers on kjob.windows (Empty): group has no members: offsets are committed directly\n") {
		t.Fatalf("replay of an empty group: exit %d\n%s%s", code, out, stderr)
	}
	if f := strings.Fields(strings.Split(out, "\n")[2]); len(f) < 9 || f[2] != "3" || f[3] != "1" || f[4] != "1" || f[5] != "2" || f[8] != "kadm" {
		t.Fatalf("want BEFORE 3, TARGET 1, AFTER 1, REPLAYED 2, APPLIED BY kadm:\n%s", out)
	}
}

// A replay forward past windows not settled yet (here of a group without
// members: three triggered windows nobody ran) lists them with their job
// and state, refuses --execute without --skip-unsettled, and with it
// settles them as skipped (replay), which history shows.
func TestReplayForwardSkipUnsettledCommand(t *testing.T) {
	e := newOpsEnv(t)
	for range 3 {
		if code, _, stderr := e.kjobctl("trigger", "report"); code != exitOK {
			t.Fatalf("trigger: %s", stderr)
		}
	}
	part := names.JobPartition("report", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.adm.CommitOffsets(ctx, "kjob-workers", kadm.OffsetsFromRecords(kgo.Record{Topic: "kjob.windows", Partition: part, Offset: -1, LeaderEpoch: -1}))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"replay", "--to-latest", "--partition", fmt.Sprint(part)}
	code, out, stderr := e.kjobctl(args...)
	if code == exitOK || !strings.Contains(out, "3 windows moved past are not settled") || strings.Count(out, "report@") != 3 ||
		!strings.Contains(out, "skips 3 unsettled windows") || !strings.Contains(out, " pending ") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = e.kjobctl(append(args, "--execute")...)
	if code != exitUsage || !strings.Contains(stderr, "--skip-unsettled") || !strings.Contains(stderr, "not settled") {
		t.Fatalf("execute without --skip-unsettled: exit %d, want %d naming --skip-unsettled\n%s%s", code, exitUsage, out, stderr)
	}
	if f := strings.Fields(strings.Split(out, "\n")[2]); len(f) < 3 || f[2] != "0" {
		t.Fatalf("a refused replay moved the offsets? %s", out)
	}
	code, out, stderr = e.kjobctl(append(args, "--execute", "--skip-unsettled")...)
	if code != exitOK || !strings.Contains(out, "3 windows moved past before they were settled were settled as skipped (replay)") {
		t.Fatalf("execute with --skip-unsettled: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = e.kjobctl("history", "report")
	if code != exitOK || strings.Count(out, "skipped (replay)") != 3 || strings.Contains(out, "failed") {
		t.Fatalf("history: exit %d\n%s%s", code, out, stderr)
	}
	// status shows a job's last scheduled window (these were triggered):
	// internal/ops/inspect's TestSnapshot shows one skipped by a replay.
}
