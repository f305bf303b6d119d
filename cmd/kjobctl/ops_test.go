package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/control"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/signing"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/store/topic"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

const opsSchedules = `jobs:
  - name: report
    schedule: "0 * * * *"
    handler: ok
  - name: flaky
    schedule: "@every 1h"
    handler: fail
    retries: {max_attempts: 1}
`

// opsEnv is a broker, a Redis, a schedules topic holding the jobs of
// opsSchedules as a producer's import of that file writes them, the file
// itself (sched: a producer started on it finds its jobs imported), and
// the flags that point kjobctl at them (the topic is kjobctl's job list:
// no --schedules).
type opsEnv struct {
	t       *testing.T
	brokers []string
	redis   *testenv.Redis
	store   *dedupe.Store
	flags   []string
	adm     *kadm.Client
	sched   string
}

func newOpsEnv(t *testing.T) *opsEnv {
	t.Helper()
	return newOpsEnvOn(t, testenv.Brokers(t, kfake.GroupMinSessionTimeout(100*time.Millisecond)))
}

// newOpsEnvCluster is newOpsEnv on a kfake cluster the test controls.
func newOpsEnvCluster(t *testing.T) (*opsEnv, *kfake.Cluster) {
	t.Helper()
	c := testenv.Cluster(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	return newOpsEnvOn(t, c.ListenAddrs()), c
}

func newOpsEnvOn(t *testing.T, brokers []string) *opsEnv {
	t.Helper()
	return newOpsEnvSeeded(t, brokers, true)
}

// newOpsEnvForProducer is newOpsEnv with an empty schedules topic, for a
// test whose producer, started on sched, imports the jobs itself.
func newOpsEnvForProducer(t *testing.T) *opsEnv {
	t.Helper()
	return newOpsEnvSeeded(t, testenv.Brokers(t, kfake.GroupMinSessionTimeout(100*time.Millisecond)), false)
}

func newOpsEnvSeeded(t *testing.T, brokers []string, seed bool) *opsEnv {
	t.Helper()
	r := testenv.NewRedis(t)
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	sched := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(sched, []byte(opsSchedules), 0o644); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 2, 1, nil, "kjob.windows"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	// The workers of these tests use the default topic and group under
	// the namespace ops, whose own defaults would be kjob.ops.windows and
	// kjob-workers-ops; a command's own --topic or --group still wins.
	t.Setenv("KJOB_TOPIC", "kjob.windows")
	t.Setenv("KJOB_GROUP", "kjob-workers")
	if seed {
		f, err := schedule.Load(sched)
		if err != nil {
			t.Fatal(err)
		}
		seedSpecs(t, brokers, opsDeployment, f)
	}
	return &opsEnv{t: t, brokers: brokers, redis: r, store: store, adm: adm, sched: sched, flags: []string{
		"--brokers", strings.Join(brokers, ","), "--redis-url", r.URL(), "--namespace", "ops", "--timeout", "20s",
	}}
}

// opsDeployment is the deployment of the ops tests.
var opsDeployment = names.Deployment{Namespace: "ops", Topic: "kjob.windows"}

// seedSpecs creates d's schedules topic (compacted, as the producer
// creates it) and writes f's jobs into it as version 1, as a producer's
// import of f writes them (source file, the entry's hash), so a producer
// started on f later finds them imported and leaves them as they are.
func seedSpecs(t *testing.T, brokers []string, d names.Deployment, f *schedule.File) {
	t.Helper()
	d = d.WithDefaults()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := topic.Ensure(ctx, kadm.NewClient(cl), topic.Spec{Name: d.SchedulesTopic(), Partitions: 1, ReplicationFactor: 1, Compacted: true}); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, j := range f.Jobs {
		s := j.ToSpec()
		r, err := specs.SpecRecord(d.SchedulesTopic(), &specs.Record{Namespace: d.Namespace, Job: j.Name, Version: 1, Spec: s, SetBy: "producer test",
			Source: specs.Source{Kind: specs.SourceFile, File: f.Path}, SetAt: time.Now().UTC(), ChangeID: "seed/" + j.Name, FileHash: specs.Hash(s)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// endOffsets sums the end offsets of the windows topic.
func (e *opsEnv) endOffsets() int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o, err := e.adm.ListEndOffsets(ctx, "kjob.windows")
	if err != nil {
		e.t.Fatal(err)
	}
	var n int64
	o.Each(func(x kadm.ListedOffset) { n += x.Offset })
	return n
}

// kjobctl runs a command with the environment's flags appended.
func (e *opsEnv) kjobctl(args ...string) (int, string, string) {
	e.t.Helper()
	return runCmd(e.t, append(args, e.flags...)...)
}

// execLog records the worker's executions.
type execLog struct {
	mu  sync.Mutex
	all []worker.Execution
}

func (l *execLog) count(id, outcome string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, x := range l.all {
		if x.WindowID == id && (outcome == "" || x.Outcome == outcome) {
			n++
		}
	}
	return n
}

// startWorker runs one worker (handlers "ok" and "fail") with its control
// agent until the test ends.
func (e *opsEnv) startWorker(failing *bool, mu *sync.Mutex) *execLog {
	e.t.Helper()
	l := &execLog{}
	mux := handler.NewMux()
	mux.HandleFunc("ok", func(context.Context, *handler.Job) error { return nil })
	mux.HandleFunc("fail", func(context.Context, *handler.Job) error {
		mu.Lock()
		defer mu.Unlock()
		if *failing {
			return errors.New("upstream said no")
		}
		return nil
	})
	w, err := worker.New(worker.Config{
		Brokers: e.brokers, Namespace: "ops", Topic: "kjob.windows", Group: "kjob-workers",
		Store: e.store, Handler: mux, WorkerID: "w1", Grace: time.Second,
		ClaimExtendInterval: time.Second, SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnExecuted: func(x worker.Execution) {
			l.mu.Lock()
			l.all = append(l.all, x)
			l.mu.Unlock()
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	a, err := control.NewAgent(control.AgentConfig{Brokers: e.brokers, Group: "kjob-workers", Topic: "kjob.windows", Member: "w1", Seeker: w, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	go func() { defer wg.Done(); _ = a.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); wg.Wait() })
	return l
}

func expect(t *testing.T, code int, stderr string, wantCode int, wantErr string) {
	t.Helper()
	if code != wantCode || strings.TrimSpace(stderr) != wantErr {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", code, stderr, wantCode, wantErr)
	}
}

// unknownInTopic ends the error of a job the ops tests' schedules topic
// does not have.
const unknownInTopic = "the schedules topic kjob.windows.schedules has flaky, report; create it with kjobctl schedule apply -f FILE " +
	"(kjobctl schedule get JOB shows a job's spec): not found"

// TestOpsRefusals checks every refusal path's exit code and exact text.
func TestOpsRefusals(t *testing.T) {
	e := newOpsEnv(t)
	other := (inspectJobPartition("report", 2) + 1) % 2
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"trigger", "nope"}, exitNotFound, `kjobctl: trigger: unknown job "nope": ` + unknownInTopic},
		{[]string{"backfill", "nope", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z"}, exitNotFound, `kjobctl: backfill: unknown job "nope": ` + unknownInTopic},
		{[]string{"backfill", "report", "--from", "yesterday", "--to", "2026-01-02T00:00:00Z"}, exitUsage, `kjobctl: backfill: --from "yesterday": want an RFC 3339 time such as 2026-11-22T10:00:00Z (or a date, 2026-11-22, for midnight UTC): usage`},
		{[]string{"backfill", "report", "--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00:00Z"}, exitUsage, `kjobctl: backfill: --to 2026-01-01T00:00:00Z is not after --from 2026-01-02T00:00:00Z: usage`},
		{[]string{"replay", "--to-datetime", "last tuesday"}, exitUsage, `kjobctl: replay: --to-datetime "last tuesday": want an RFC 3339 time such as 2026-11-22T10:00:00Z (or a date, 2026-11-22, for midnight UTC): usage`},
		{[]string{"replay", "--to-earliest", "--to-latest"}, exitUsage, `kjobctl: replay: want exactly one of --to-datetime, --by-duration, --to-offset, --shift-by, --to-earliest, --to-latest; got 2 (--to-earliest --to-latest): usage`},
		{[]string{"replay", "--group", "ghosts", "--to-earliest"}, exitNotFound, `kjobctl: replay: group "ghosts": group does not exist (no members, no committed offsets on kjob.windows); check --group: not found`},
		{[]string{"replay", "--to-earliest", "--partition", "9"}, exitNotFound, `kjobctl: replay: --partition 9: no such partition: topic kjob.windows has partitions 0-1: not found`},
		{[]string{"lag", "--group", "ghosts"}, exitNotFound, `kjobctl: lag: group "ghosts" does not exist (no members, no committed offsets on kjob.windows); check --group: not found`},
		{[]string{"trigger", "report", "--payload", "[1]"}, exitUsage, `kjobctl: trigger: --payload "[1]": want a JSON object such as {"url":"http://127.0.0.1:8080/hook"}: usage`},
		{[]string{"dlq", "show", "12"}, exitNotFound, `kjobctl: dlq: dead-letter topic kjob.windows.dlq: topic does not exist (a worker creates it when it starts); check --dlq-topic and --topic`},
		{[]string{"dlq", "show", "x"}, exitUsage, `kjobctl: dlq show: ID "x": want a dead-letter id as "kjobctl dlq list" prints it (an offset such as 12): usage`},
		{[]string{"dlq", "redrive"}, exitUsage, `kjobctl: dlq redrive: want dead-letter IDs or --all (not both): usage`},
		{[]string{"status", "-o", "yaml"}, exitUsage, `kjobctl: --output "yaml": want table or json: usage`},
		{[]string{"status", "--lease-backend", "etcd"}, exitUsage, `kjobctl: --lease-backend "etcd": want redis or kubernetes, as the producer's: usage`},
		{[]string{"resume", "report", "--execute"}, exitUsage, `kjobctl: resume: --execute goes with --catchup (a plain resume changes nothing else and needs no --execute): usage`},
		{[]string{"replay", "--to-earliest", "--job", "nope"}, exitNotFound, `kjobctl: replay: unknown job "nope": ` + unknownInTopic},
		{[]string{"replay", "--to-earliest", "--job", "report", "--partition", fmt.Sprint(other)}, exitUsage,
			fmt.Sprintf("kjobctl: replay: --job report: its windows are on partition %d, not on --partition [%d]: invalid replay: usage", 1-other, other)},
		// An empty --group is the namespace's group, as an empty --topic is its topic.
		{[]string{"replay", "--to-earliest", "--group", ""}, exitNotFound, `kjobctl: replay: group "kjob-workers-ops": group does not exist (no members, no committed offsets on kjob.windows); check --group: not found`},
		{[]string{"lag", "--watch", "--interval", "0s"}, exitUsage, `kjobctl: lag: --interval 0s: must be positive: usage`},
		{[]string{"backfill", "report", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z", "--progress", "sometimes"}, exitUsage,
			`kjobctl: backfill: --progress "sometimes": want auto, always or never: usage`},
		{[]string{"dlq", "redrive", "3", "--all"}, exitUsage, `kjobctl: dlq redrive: want dead-letter IDs or --all (not both): usage`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, _, stderr := e.kjobctl(c.args...)
			expect(t, code, stderr, c.code, c.err)
		})
	}
}

// TestTriggerBackfillPause drives a worker through trigger, an idempotent
// backfill (dry run, execute, execute again), replay dry run, pause/resume,
// status and lag.
func TestTriggerBackfillPause(t *testing.T) {
	e := newOpsEnv(t)
	var mu sync.Mutex
	failing := false
	l := e.startWorker(&failing, &mu)

	code, out, stderr := e.kjobctl("trigger", "report", "--payload", `{"n":1}`)
	if code != exitOK || !strings.HasPrefix(out, "report@") || !strings.Contains(out, "#manual-") {
		t.Fatalf("trigger: exit %d out %q stderr %s", code, out, stderr)
	}
	id := strings.TrimSpace(out)
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 1 }, "triggered window %s not run", id)

	bf := []string{"backfill", "report", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T05:00:00Z"}
	code, out, stderr = e.kjobctl(bf...)
	expect(t, code, stderr, exitDryRun, "kjobctl: backfill: dry run: nothing was changed; add --execute to apply it")
	if !strings.Contains(out, "Backfill report [2026-01-01T00:00:00Z, 2026-01-01T05:00:00Z): 5 windows; would publish 5; left out: 0 already run or running, 0 published before but not yet run") {
		t.Fatalf("dry run output:\n%s", out)
	}
	code, out, stderr = e.kjobctl(append(bf, "--execute")...)
	if code != exitOK || !strings.Contains(out, "published 5; left out: 0 already run or running, 0 published before but not yet run") {
		t.Fatalf("backfill: exit %d\n%s%s", code, out, stderr)
	}
	ids := []string{}
	for h := range 5 {
		ids = append(ids, fmt.Sprintf("report@2026-01-01T%02d:00:00Z#backfill", h))
	}
	for _, id := range ids {
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 1 }, "backfilled %s not run", id)
	}
	ends := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		o, err := e.adm.ListEndOffsets(ctx, "kjob.windows")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		o.Each(func(x kadm.ListedOffset) { n += x.Offset })
		return n
	}
	before := ends()
	code, out, stderr = e.kjobctl(append(bf, "--execute", "-o", "json")...)
	var res backfillResult
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || len(res.Published) != 0 || len(res.Skipped) != 5 {
		t.Fatalf("second backfill: exit %d\n%s%s", code, out, stderr)
	}
	if after := ends(); after != before {
		t.Fatalf("second backfill published %d records", after-before)
	}
	for _, id := range ids {
		if n := l.count(id, worker.OutcomeDone); n != 1 {
			t.Fatalf("%s ran %d times", id, n)
		}
	}
	// --rerun publishes them again and they run again.
	code, out, stderr = e.kjobctl(append(bf, "--execute", "--rerun")...)
	if code != exitOK || !strings.Contains(out, "published 5; left out: 0 already run or running, 0 published before but not yet run") {
		t.Fatalf("backfill --rerun: exit %d\n%s%s", code, out, stderr)
	}
	for _, id := range ids {
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 2 }, "%s not re-run", id)
	}

	// lag agrees with kadm once drained.
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, out, _ := e.kjobctl("lag", "-o", "json")
		var g struct {
			TotalLag   int64 `json:"total_lag"`
			Partitions []struct {
				Committed, End int64
				Owner          string
			} `json:"partitions"`
		}
		if testing.Verbose() {
			t.Logf("lag: %d %s", code, out)
		}
		if code != exitOK || json.Unmarshal([]byte(out), &g) != nil || g.TotalLag != 0 || len(g.Partitions) != 2 {
			return false
		}
		for _, p := range g.Partitions {
			if p.Owner != "w1" || (p.Committed != p.End && !(p.End == 0 && p.Committed == -1)) {
				return false
			}
		}
		return true
	}, "lag 0 on both partitions owned by w1")
	code, out, _ = e.kjobctl("lag")
	if code != exitOK || !strings.Contains(out, "PARTITION  COMMITTED") || !strings.Contains(out, "w1") {
		t.Fatalf("lag table:\n%s", out)
	}

	// replay without --execute is a dry run that shows the plan.
	code, out, stderr = e.kjobctl("replay", "--by-duration", "1h", "--job", "report")
	expect(t, code, stderr, exitDryRun, "kjobctl: replay: dry run: nothing was changed; add --execute to apply it")
	if !strings.Contains(out, "through the control topic") || !strings.Contains(out, "Note: offsets are per partition, not per job.") {
		t.Fatalf("replay dry run:\n%s", out)
	}

	// Executed while the worker runs: the worker applies the seek, and
	// --rerun --job report runs report's windows again.
	code, out, stderr = e.kjobctl("replay", "--to-earliest", "--job", "report", "--rerun", "--execute")
	if code != exitOK || !strings.Contains(out, "APPLIED BY") || !strings.Contains(out, "Done markers of 6 replayed windows were cleared") {
		t.Fatalf("replay --execute: exit %d\n%s%s", code, out, stderr)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 2 }, "triggered window %s not re-run by the replay", id)
	for _, id := range ids {
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 3 }, "%s not re-run by the replay", id)
	}

	// Pause and resume go through the producer leader (on a clock that
	// stands still: it publishes nothing here).
	e.startLeader(clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)))
	code, out, stderr = e.kjobctl("pause", "report", "--note", "maintenance")
	if code != exitOK || !strings.HasPrefix(out, "paused report at ") {
		t.Fatalf("pause: %d %s %s", code, out, stderr)
	}
	code, _, stderr = e.kjobctl("pause", "report", "--note", "again")
	if code != exitConflict || !strings.HasPrefix(stderr, "kjobctl: pause: job report is already paused (since ") {
		t.Fatalf("pause twice: %d %s", code, stderr)
	}
	code, out, _ = e.kjobctl("status")
	if code != exitOK || !strings.Contains(out, "Producer leader: none") || !strings.Contains(out, "paused") || !strings.Contains(out, "w1") {
		t.Fatalf("status:\n%s", out)
	}
	code, out, _ = e.kjobctl("status", "-o", "json")
	var snap struct {
		Group struct {
			Members []struct {
				ClientID   string  `json:"client_id"`
				Partitions []int32 `json:"partitions"`
			} `json:"members"`
		} `json:"group"`
		Jobs []struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
			Next   []time.Time
		} `json:"jobs"`
	}
	// A paused job fires nothing: no next fire times; the other job has 3.
	if code != exitOK || json.Unmarshal([]byte(out), &snap) != nil || len(snap.Jobs) != 2 || snap.Jobs[1].Name != "report" || !snap.Jobs[1].Paused ||
		len(snap.Jobs[1].Next) != 0 || len(snap.Jobs[0].Next) != 3 || len(snap.Group.Members) != 1 || len(snap.Group.Members[0].Partitions) != 2 {
		t.Fatalf("status -o json: exit %d\n%s", code, out)
	}
	code, out, stderr = e.kjobctl("resume", "report")
	if code != exitOK || !strings.HasPrefix(out, "resumed report at 2026-01-01T12:00:00Z (version 2 -> 3; paused since ") {
		t.Fatalf("resume: %d %s %s", code, out, stderr)
	}
}

// TestDLQ dead-letters a window, lists and shows it, refuses a redrive
// without --execute, and redrives it once the cause is fixed.
func TestDLQ(t *testing.T) {
	e := newOpsEnv(t)
	var mu sync.Mutex
	failing := true
	l := e.startWorker(&failing, &mu)
	code, out, stderr := e.kjobctl("trigger", "flaky")
	if code != exitOK {
		t.Fatalf("trigger: %d %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDeadLettered) == 1 }, "%s not dead-lettered", id)
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, out, _ := e.kjobctl("dlq", "list")
		return code == exitOK && strings.Contains(out, id) && strings.Contains(out, "1 dead letter")
	}, "dlq list does not show %s", id)
	code, out, _ = e.kjobctl("dlq", "show", "0")
	if code != exitOK || !strings.Contains(out, "Reason:         upstream said no") || !strings.Contains(out, "Attempts:       1") || !strings.Contains(out, "Origin:         kjob.windows[") {
		t.Fatalf("dlq show:\n%s", out)
	}
	code, _, stderr = e.kjobctl("dlq", "redrive", "0")
	expect(t, code, stderr, exitDryRun, "kjobctl: dlq redrive: dry run: nothing was changed; add --execute to apply it")
	mu.Lock()
	failing = false
	mu.Unlock()
	code, out, stderr = e.kjobctl("dlq", "redrive", "--all", "--execute")
	if code != exitOK || !strings.Contains(out, "Redrove 1 dead letter") {
		t.Fatalf("redrive: %d\n%s%s", code, out, stderr)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 1 }, "redriven %s did not run", id)
}

// With signing keys, the windows kjobctl creates are signed as the
// producer's are, so workers that require signatures run them.
func TestTriggerSigns(t *testing.T) {
	e := newOpsEnv(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k1"), []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := e.kjobctl("trigger", "report", "--signing-keys-dir", dir, "--signing-key-id", "k1")
	if code != exitOK {
		t.Fatalf("trigger: exit %d out %q stderr %s", code, out, stderr)
	}
	keys, err := signing.LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signing.NewVerifier(true, keys...)
	if err != nil {
		t.Fatal(err)
	}
	recs := testenv.ReadCommitted(t, e.brokers, "kjob.windows")
	if len(recs) != 1 {
		t.Fatalf("%d records in the windows topic, want 1", len(recs))
	}
	if err := v.Verify(recs[0]); err != nil {
		t.Fatalf("triggered window does not verify: %v", err)
	}
	code, _, stderr = e.kjobctl("trigger", "report", "--signing-key-id", "k1")
	expect(t, code, stderr, exitUsage, `kjobctl: --signing-key-id "k1" needs --signing-keys-dir: usage`)
}

func inspectJobPartition(job string, n int) int32 { return names.JobPartition(job, n) }
