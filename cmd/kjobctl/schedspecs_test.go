package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// fakeLeader stands in for the producer leader where a test needs what
// the real one cannot be made to do on cue: a history seeded hours in the
// past, a change landing between a plan and its --execute
// (TestScheduleCommandsAgainstTheLeader in jobsource_test.go runs the
// commands against the real leader). It answers schedule requests on the control topic with
// versions, conflicts, not-found and validation, and writes the schedules
// topic and the change log as the leader does (without a transaction).
type fakeLeader struct {
	t    *testing.T
	d    names.Deployment
	cl   *kgo.Client
	mu   sync.Mutex
	recs map[string]*specs.Record
	gone map[string]int64
	log  map[string][]*specs.Change
	// hold, if set, is called before each request is answered.
	hold func()
}

func startFakeLeader(t *testing.T, brokers []string, d names.Deployment) *fakeLeader {
	t.Helper()
	d = d.WithDefaults()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(d.ControlTopic()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	l := &fakeLeader{t: t, d: d, cl: cl, recs: map[string]*specs.Record{}, gone: map[string]int64{}, log: map[string][]*specs.Change{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				if specs.Kind(r) != specs.KindRequest {
					return
				}
				if q, err := specs.ParseRequest(r); err == nil {
					if l.hold != nil {
						l.hold()
					}
					l.answer(ctx, q)
				}
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return l
}

// seed writes a record as if actor had set it through src at setAt.
func (l *fakeLeader) seed(s schedule.Spec, version int64, actor string, src specs.Source, setAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &specs.Record{Namespace: l.d.Namespace, Job: s.Name, Version: version, Spec: s, SetBy: actor, Source: src, SetAt: setAt, ChangeID: "seed"}
	l.recs[s.Name] = r
	sp := s
	l.log[s.Name] = append(l.log[s.Name], &specs.Change{ID: fmt.Sprintf("seed/%d", version), Job: s.Name, Op: specs.OpPut, VersionAfter: version, Actor: actor, Source: src, At: setAt, Spec: &sp})
	l.write(context.Background(), []*specs.Record{r}, nil, l.log[s.Name][len(l.log[s.Name])-1:])
}

func (l *fakeLeader) write(ctx context.Context, recs []*specs.Record, tombs map[string]int64, changes []*specs.Change) {
	var out []*kgo.Record
	for _, r := range recs {
		kr, err := specs.SpecRecord(l.d.SchedulesTopic(), r)
		if err != nil {
			l.t.Error(err)
			return
		}
		out = append(out, kr)
	}
	for j, v := range tombs {
		out = append(out, specs.Tombstone(l.d.SchedulesTopic(), j, v))
	}
	for _, c := range changes {
		c.Namespace = l.d.Namespace
		kr, err := specs.ChangeRecord(l.d.ScheduleLogTopic(), c)
		if err != nil {
			l.t.Error(err)
			return
		}
		out = append(out, kr)
	}
	if err := l.cl.ProduceSync(ctx, out...).FirstErr(); err != nil && ctx.Err() == nil {
		l.t.Error(err)
	}
}

func (l *fakeLeader) answer(ctx context.Context, q *specs.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now().UTC()
	res := &specs.Result{Namespace: q.Namespace, RequestID: q.ID, Leader: "fake", At: now}
	refuse := func(i int, e specs.Edit, kind, reason string) {
		res.Applied = nil
		res.Refused = &specs.Refusal{Kind: kind, Edit: i, Job: e.Job, Reason: reason}
		if r := l.recs[e.Job]; kind == specs.RefusedConflict && r != nil {
			res.Refused.Current, res.Refused.SetBy, res.Refused.SetAt, res.Refused.Source = r.Version, r.SetBy, r.SetAt, r.Source
		}
	}
	// Work on copies: all or none.
	recs := map[string]*specs.Record{}
	tombs := map[string]int64{}
	var changes []*specs.Change
	for i, e := range q.Edits {
		cur := recs[e.Job]
		if cur == nil {
			cur = l.recs[e.Job]
		}
		if _, deleted := tombs[e.Job]; deleted {
			cur = nil
		}
		var curV int64
		if cur != nil {
			curV = cur.Version
		}
		if e.ExpectVersion != nil && *e.ExpectVersion != curV {
			refuse(i, e, specs.RefusedConflict, "")
			break
		}
		if cur == nil && e.Op != specs.OpPut && e.Op != specs.OpCreate {
			refuse(i, e, specs.RefusedNotFound, fmt.Sprintf("no schedule %q", e.Job))
			break
		}
		base := curV
		if cur == nil {
			base = l.gone[e.Job]
		}
		next := &specs.Record{Namespace: q.Namespace, Job: e.Job, Version: base + 1, SetBy: q.Actor, Source: q.Source, Note: q.Note, SetAt: now, EffectiveFrom: now,
			ChangeID: fmt.Sprintf("%s/%d", q.ID, i)}
		if cur != nil {
			next.Spec, next.Paused, next.FileHash = cur.Spec, cur.Paused, cur.FileHash
		}
		switch e.Op {
		case specs.OpPut, specs.OpCreate, specs.OpUpdate:
			if e.Spec == nil {
				refuse(i, e, specs.RefusedInvalid, "no spec")
				return
			}
			if _, bad := jobsOfSpecs("request", []schedule.Spec{*e.Spec}); len(bad) > 0 {
				refuse(i, e, specs.RefusedInvalid, bad[0].Error())
				break
			}
			next.Spec = *e.Spec
			if e.FileHash != "" {
				next.FileHash = e.FileHash
			}
		case specs.OpPause:
			next.Paused = &specs.Pause{Note: e.Note, By: q.Actor, At: now}
		case specs.OpResume:
			next.Paused = nil
		case specs.OpRevert:
			var found *specs.Change
			for _, c := range l.log[e.Job] {
				if c.VersionAfter == e.ToVersion && c.Spec != nil {
					found = c
				}
			}
			if found == nil {
				refuse(i, e, specs.RefusedNotFound, fmt.Sprintf("no version %d", e.ToVersion))
				break
			}
			next.Spec = *found.Spec
		case specs.OpDelete:
		}
		if res.Refused != nil {
			break
		}
		c := &specs.Change{ID: next.ChangeID, Request: q.ID, Job: e.Job, Op: e.Op, VersionBefore: curV, VersionAfter: next.Version, Actor: q.Actor, Source: q.Source, Note: q.Note, At: now}
		if e.Op == specs.OpDelete {
			tombs[e.Job] = next.Version
			delete(recs, e.Job)
			c.Diff = specs.Diff(&cur.Spec, cur.Paused, nil, nil)
		} else {
			var before *schedule.Spec
			var pb *specs.Pause
			if cur != nil {
				before, pb = &cur.Spec, cur.Paused
			}
			c.Diff = specs.Diff(before, pb, &next.Spec, next.Paused)
			sp := next.Spec
			c.Spec, c.Paused = &sp, next.Paused
			recs[e.Job] = next
			delete(tombs, e.Job)
		}
		changes = append(changes, c)
		res.Applied = append(res.Applied, specs.Applied{Job: e.Job, Op: e.Op, VersionBefore: curV, VersionAfter: next.Version})
	}
	if res.Refused == nil {
		var out []*specs.Record
		for j, r := range recs {
			l.recs[j] = r
			out = append(out, r)
		}
		for j, v := range tombs {
			delete(l.recs, j)
			l.gone[j] = v
		}
		for _, c := range changes {
			l.log[c.Job] = append(l.log[c.Job], c)
		}
		l.write(ctx, out, tombs, changes)
	}
	rec, _ := res.Record(l.d.ControlTopic())
	_ = l.cl.ProduceSync(ctx, rec).FirstErr()
}

// specsEnv is a broker with the deployment's control topic, and flags.
type specsEnv struct {
	t       *testing.T
	brokers []string
	d       names.Deployment
	dir     string
	flags   []string
}

func newSpecsEnv(t *testing.T) *specsEnv {
	t.Helper()
	brokers := testenv.Brokers(t)
	d := names.Deployment{Namespace: "ops"}.WithDefaults()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tp := range []string{d.ControlTopic(), d.SchedulesTopic(), d.ScheduleLogTopic()} {
		if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, tp); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", tp, err, resp.Err)
		}
	}
	t.Setenv("KJOB_TOPIC", "")
	return &specsEnv{t: t, brokers: brokers, d: d, dir: t.TempDir(), flags: []string{"--brokers", strings.Join(brokers, ","), "--namespace", "ops", "--redis-url", "redis://127.0.0.1:1", "--wait", "5s", "--timeout", "30s"}}
}

func (e *specsEnv) kjobctl(args ...string) (int, string, string) {
	e.t.Helper()
	return runCmd(e.t, append(args, e.flags...)...)
}

func (e *specsEnv) file(name, content string) string {
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

const applyFile = `jobs:
  - name: report
    schedule: "30 * * * *"
    handler: ok
  - name: same
    schedule: "@every 1h"
    handler: ok
    timeout: 60s
  - name: fresh
    schedule: "@daily"
    handler: ok
`

// TestScheduleApplyPlanAndExecute: the plan names added, changed (with
// the version it reverts), deleted with --prune and unchanged; nothing
// changes without --execute; --execute commits with versions.
func TestScheduleApplyPlanAndExecute(t *testing.T) {
	e := newSpecsEnv(t)
	l := startFakeLeader(t, e.brokers, e.d)
	path := e.file("jobs.yaml", applyFile)
	l.seed(schedule.Spec{Name: "report", Schedule: "0 * * * *", Handler: "ok"}, 7, "alice", specs.Source{Kind: specs.SourceDashboard}, time.Now().Add(-2*time.Hour-time.Minute))
	l.seed(schedule.Spec{Name: "same", Schedule: "@every 1h", Handler: "ok"}, 1, "bob", specs.Source{Kind: specs.SourceCLI}, time.Now())
	l.seed(schedule.Spec{Name: "old", Schedule: "@hourly", Handler: "ok"}, 2, "bob", specs.Source{Kind: specs.SourceCLI}, time.Now())

	code, out, stderr := e.kjobctl("schedule", "apply", "-f", path, "--prune")
	expect(t, code, stderr, exitDryRun, "kjobctl: schedule apply: dry run: nothing was changed; add --execute to apply it")
	for _, want := range []string{"Add (1):\n  + fresh\n", "Change (1):\n  ~ report (v7)\n      schedule: \"0 * * * *\" -> \"30 * * * *\"\n      ! reverts v7, set by alice through the dashboard 2 h ago\n",
		"Delete (1):\n  - old (v2)\n", "1 to add, 1 to change, 1 to delete, 1 unchanged\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("plan lacks %q:\n%s", want, out)
		}
	}
	t.Logf("plan:\n%s", out)
	if len(l.log["fresh"]) != 0 || l.recs["report"].Version != 7 {
		t.Fatal("a plan changed something")
	}
	// Without --prune old is kept and said so.
	_, out, _ = e.kjobctl("schedule", "apply", "-f", path)
	if !strings.Contains(out, "0 to delete, 1 unchanged; 1 in the topic but not in the file kept (--prune deletes them)") {
		t.Fatalf("plan without --prune:\n%s", out)
	}

	code, out, stderr = e.kjobctl("schedule", "apply", "-f", path, "--prune", "--execute", "--note", "rollout")
	if code != exitOK || !strings.Contains(out, "Applied 3 of 3 changes.") || !strings.Contains(out, "put report: v7 -> v8") || !strings.Contains(out, "delete old: v2 -> v3") {
		t.Fatalf("execute: exit %d\n%s%s", code, out, stderr)
	}
	r := l.recs["report"]
	if r.Source.Kind != specs.SourceFile || r.Source.File != path || r.FileHash == "" || r.Note != "rollout" || r.Spec.Schedule != "30 * * * *" {
		t.Fatalf("record after apply: %+v", r)
	}
	// Applied again: nothing to do.
	code, out, _ = e.kjobctl("schedule", "apply", "-f", path, "--prune")
	if code != exitOK || !strings.Contains(out, "0 to add, 0 to change, 0 to delete, 3 unchanged") {
		t.Fatalf("second apply: exit %d\n%s", code, out)
	}

	// get, list, history, revert, delete, pause, resume.
	code, out, _ = e.kjobctl("schedule", "get", "report")
	if code != exitOK || !strings.Contains(out, "Version:    8") || !strings.Contains(out, "schedule: 30 * * * *") {
		t.Fatalf("get: %d\n%s", code, out)
	}
	code, out, _ = e.kjobctl("schedule", "get", "report", "-o", "json")
	var rec specs.Record
	if code != exitOK || json.Unmarshal([]byte(out), &rec) != nil || rec.Version != 8 {
		t.Fatalf("get -o json: %d\n%s", code, out)
	}
	code, out, _ = e.kjobctl("schedule", "list")
	if code != exitOK || !strings.Contains(out, "3 jobs in kjob.ops.windows.schedules") || !strings.Contains(out, "fresh") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	code, out, _ = e.kjobctl("schedule", "history", "report")
	if code != exitOK || !strings.Contains(out, "v8  put  by ") || !strings.Contains(out, `schedule: "0 * * * *" -> "30 * * * *"`) || !strings.Contains(out, "note: rollout") {
		t.Fatalf("history: %d\n%s", code, out)
	}
	code, out, stderr = e.kjobctl("schedule", "revert", "report", "--to-version", "7")
	if code != exitDryRun || !strings.Contains(out, `schedule: "30 * * * *" -> "0 * * * *"`) {
		t.Fatalf("revert plan: %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = e.kjobctl("schedule", "revert", "report", "--to-version", "7", "--execute", "--note", "too noisy")
	if code != exitOK || !strings.Contains(out, "revert report: v8 -> v9") || l.recs["report"].Spec.Schedule != "0 * * * *" {
		t.Fatalf("revert: %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = e.kjobctl("schedule", "revert", "report", "--to-version", "42", "--execute")
	if code != exitNotFound || !strings.Contains(stderr, `job "report" has no version 42`) {
		t.Fatalf("revert to a missing version: %d %s", code, stderr)
	}
	code, _, stderr = e.kjobctl("schedule", "pause", "report")
	expect(t, code, stderr, exitUsage, "kjobctl: pause: --note is required: say why report is paused: usage")
	code, out, _ = e.kjobctl("schedule", "pause", "report", "--note", "upstream down")
	if code != exitOK || !strings.Contains(out, "pause report: v9 -> v10") || l.recs["report"].Paused == nil {
		t.Fatalf("pause: %d\n%s", code, out)
	}
	code, _, stderr = e.kjobctl("schedule", "pause", "report", "--note", "again")
	if code != exitConflict || !strings.Contains(stderr, "is already paused") {
		t.Fatalf("pause twice: %d %s", code, stderr)
	}
	code, out, _ = e.kjobctl("schedule", "resume", "report")
	if code != exitOK || !strings.Contains(out, "resume report: v10 -> v11") || l.recs["report"].Paused != nil {
		t.Fatalf("resume: %d\n%s", code, out)
	}
	code, _, stderr = e.kjobctl("schedule", "delete", "fresh")
	if code != exitDryRun || l.recs["fresh"] == nil {
		t.Fatalf("delete dry run: %d %s", code, stderr)
	}
	code, out, _ = e.kjobctl("schedule", "delete", "fresh", "--execute", "--note", "gone")
	if code != exitOK || !strings.Contains(out, "delete fresh: v1 -> v2") || l.recs["fresh"] != nil {
		t.Fatalf("delete: %d\n%s", code, out)
	}
	code, _, stderr = e.kjobctl("schedule", "get", "fresh")
	if code != exitNotFound || !strings.Contains(stderr, "deleted at version 2") {
		t.Fatalf("get deleted: %d %s", code, stderr)
	}
	code, _, stderr = e.kjobctl("schedule", "get", "nope")
	if code != exitNotFound || !strings.Contains(stderr, `schedule "nope": no such schedule`) {
		t.Fatalf("get unknown: %d %s", code, stderr)
	}
}

// A change made between plan and execute is a conflict naming who made
// it, and nothing of that request is applied.
func TestScheduleApplyConflict(t *testing.T) {
	e := newSpecsEnv(t)
	l := startFakeLeader(t, e.brokers, e.d)
	l.seed(schedule.Spec{Name: "report", Schedule: "0 * * * *", Handler: "ok"}, 3, "alice", specs.Source{Kind: specs.SourceDashboard}, time.Now())
	path := e.file("jobs.yaml", applyFile)
	// The leader sees carol's change land just before the apply's request.
	var once sync.Once
	l.hold = func() {
		once.Do(func() {
			r := *l.recs["report"]
			r.Version, r.SetBy, r.Spec.Schedule = 4, "carol", "5 * * * *"
			l.recs["report"] = &r
		})
	}
	code, out, stderr := e.kjobctl("schedule", "apply", "-f", path, "--execute")
	if code != exitConflict || !strings.Contains(stderr, "version conflict: expected version 3, it is at version 4, set by carol") || !strings.Contains(out, "Applied 0 of 3 changes") {
		t.Fatalf("conflict: exit %d\n%s%s", code, out, stderr)
	}
	if l.recs["fresh"] != nil {
		t.Fatal("a refused request applied an edit")
	}
}

// Bad input: an invalid file (file:line), a name with control characters,
// no producer leading, an apply over the bound.
func TestScheduleBadInput(t *testing.T) {
	e := newSpecsEnv(t)
	bad := e.file("bad.yaml", "jobs:\n  - name: \"re\\x1bport\"\n    schedule: \"@hourly\"\n    handler: ok\n")
	code, _, stderr := e.kjobctl("schedule", "apply", "-f", bad)
	if code != exitError || !strings.Contains(stderr, bad+":2: jobs[0].name") || strings.Contains(stderr, "\x1b") {
		t.Fatalf("control characters: %d %q", code, stderr)
	}
	// No leader: the client's clear error after the bounded wait.
	path := e.file("jobs.yaml", applyFile)
	code, _, stderr = e.kjobctl("schedule", "apply", "-f", path, "--execute", "--wait", "2s")
	if code != exitError || !strings.Contains(stderr, "no producer leader answered") || !strings.Contains(stderr, `namespace "ops"`) {
		t.Fatalf("no leader: %d %s", code, stderr)
	}
	code, _, stderr = e.kjobctl("schedule", "pause", "nope", "--note", "x")
	if code != exitNotFound {
		t.Fatalf("pause unknown: %d %s", code, stderr)
	}
	// 200,000 jobs: refused with the bound and the flag that raises it.
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range 200_000 {
		fmt.Fprintf(&b, "  - {name: j%d, schedule: \"@hourly\", handler: ok}\n", i)
	}
	big := e.file("big.yaml", b.String())
	code, _, stderr = e.kjobctl("schedule", "apply", "-f", big)
	expect(t, code, stderr, exitUsage, "kjobctl: schedule apply: "+big+" has 200,000 jobs, more than --max-jobs 100,000; split the file, or raise --max-jobs: usage")
}
