package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/ops/dashboard"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/topic"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// startTopicProducer runs a producer of the ops deployment with no
// schedules file: its jobs are those of the schedules topic only.
func startTopicProducer(t *testing.T, e *opsEnv) *producer.Producer {
	t.Helper()
	p, err := producer.New(producer.Config{Brokers: e.brokers, Namespace: "ops", Topic: "kjob.windows", Elector: leadAlways{}, Clock: clock.Real{}, Partitions: 2,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	perr := make(chan error, 1)
	go func() { perr <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := testenv.Recv(t, perr, 30*time.Second, "the producer's exit"); err != nil {
			t.Errorf("producer: %v", err)
		}
	})
	testenv.Eventually(t, 20*time.Second, func() bool { return p.Status().Leading }, "producer not leading")
	return p
}

// apiSchedules is the Go API (kjob.Schedules) of the ops deployment.
func apiSchedules(t *testing.T, e *opsEnv) *kjob.Schedules {
	t.Helper()
	s, err := kjob.NewSchedules(kjob.SchedulesConfig{Brokers: e.brokers, Namespace: "ops", Topic: "kjob.windows", Actor: "test-api", Wait: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A job created through the API (kjob.Schedules, answered by the real
// producer leader) is known to trigger, backfill, status and history,
// with no schedules file anywhere; an unknown job's error names the topic
// and lists its jobs; a deleted job's error says it was deleted.
func TestCommandsSeeJobsCreatedThroughTheAPI(t *testing.T) {
	t.Chdir(t.TempDir()) // no schedules.yaml to fall back on
	e := newOpsEnvForProducer(t)
	if _, err := os.Stat("schedules.yaml"); !os.IsNotExist(err) {
		t.Fatalf("a schedules file is present: %v", err)
	}
	p := startTopicProducer(t, e)
	var mu sync.Mutex
	failing := false
	l := e.startWorker(&failing, &mu)
	api := apiSchedules(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if v, err := api.Create(ctx, schedule.Spec{Name: "api-report", Schedule: "@every 1h", Handler: "ok", Overlap: "allow"}, "made by the API test"); err != nil || v != 1 {
		t.Fatalf("create through the API: version %d, %v", v, err)
	}
	// The producer leader took it up as a live job.
	testenv.Eventually(t, 20*time.Second, func() bool { _, ok := p.Status().Next["api-report"]; return ok }, "the producer does not schedule api-report")

	code, out, stderr := e.kjobctl("trigger", "api-report")
	if code != exitOK || !strings.HasPrefix(out, "api-report@") || stderr != "" {
		t.Fatalf("trigger: exit %d\n%s%s", code, out, stderr)
	}
	id := strings.TrimSpace(out)
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 1 }, "triggered window %s not run", id)

	code, out, stderr = e.kjobctl("backfill", "api-report", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T03:00:00Z", "--execute")
	if code != exitOK || !strings.Contains(out, "Backfill api-report [2026-01-01T00:00:00Z, 2026-01-01T03:00:00Z): 3 windows; published 3;") {
		t.Fatalf("backfill: exit %d\n%s%s", code, out, stderr)
	}
	for _, h := range []string{"00", "01", "02"} {
		bid := "api-report@2026-01-01T" + h + ":00:00Z#backfill"
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(bid, worker.OutcomeDone) == 1 }, "backfilled %s not run", bid)
	}

	// status: the job's row has its spec (schedule, overlap), not "no spec".
	code, out, stderr = e.kjobctl("status", "-o", "json")
	var snap inspect.Snapshot
	if code != exitOK || json.Unmarshal([]byte(out), &snap) != nil {
		t.Fatalf("status: exit %d\n%s%s", code, out, stderr)
	}
	var row *inspect.JobStatus
	for i := range snap.Jobs {
		if snap.Jobs[i].Name == "api-report" {
			row = &snap.Jobs[i]
		}
	}
	if row == nil || !row.InFile || row.Schedule != "@every 1h" || row.Overlap != "allow" || !row.Enabled || len(row.Next) == 0 {
		t.Fatalf("status -o json: api-report is %+v, want it with its spec (@every 1h, overlap allow, enabled, next times)\n%s", row, out)
	}
	code, out, _ = e.kjobctl("status")
	if code != exitOK || !regexp.MustCompile(`(?m)^api-report +@every 1h +UTC +enabled +allow `).MatchString(out) {
		t.Fatalf("status: exit %d, no enabled api-report row:\n%s", code, out)
	}

	// history: the runs the trigger and the backfill made.
	// (The worker records a run as it settles the window, after running it.)
	testenv.Eventually(t, 20*time.Second, func() bool {
		var hist historyResult
		code, out, stderr = e.kjobctl("history", "api-report", "-o", "json")
		return code == exitOK && json.Unmarshal([]byte(out), &hist) == nil && len(hist.Runs) == 4
	}, "history of api-report: want 4 runs, last exit %d\n%s%s", code, &out, &stderr)

	// An unknown job: the topic is named, its jobs are listed, and the
	// way to create one is given.
	code, _, stderr = e.kjobctl("trigger", "api-reprot")
	expect(t, code, stderr, exitNotFound, `kjobctl: trigger: unknown job "api-reprot": the schedules topic kjob.windows.schedules has api-report; `+
		`create it with kjobctl schedule apply -f FILE (kjobctl schedule get JOB shows a job's spec): not found`)
	code, _, stderr = e.kjobctl("history", "api-reprot")
	expect(t, code, stderr, exitNotFound, `kjobctl: history: unknown job "api-reprot": the schedules topic kjob.windows.schedules has api-report; `+
		`create it with kjobctl schedule apply -f FILE (kjobctl schedule get JOB shows a job's spec): not found`)

	// Deleted through the API: gone from the job list, and the error says
	// it was deleted rather than that it never existed.
	if _, err := api.Delete(ctx, "api-report", 1, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = e.kjobctl("backfill", "api-report", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T03:00:00Z")
	expect(t, code, stderr, exitNotFound, `kjobctl: backfill: unknown job "api-report": it was deleted from kjob.windows.schedules (version 2; `+
		`kjobctl schedule history api-report shows who and when); create it with kjobctl schedule apply -f FILE (kjobctl schedule get JOB shows a job's spec): not found`)
	code, out, _ = e.kjobctl("status")
	if code != exitOK || strings.Contains(out, "@every 1h") {
		t.Fatalf("status after the delete: exit %d, want api-report without its spec:\n%s", code, out)
	}
}

// A deployment whose producer does not write the schedules topic (it does
// not exist, or is empty): the commands say so and point at --schedules,
// which still works.
func TestCommandsOnAnEmptySchedulesTopic(t *testing.T) {
	e := newOpsEnvForProducer(t)
	const noJobs = "the schedules topic kjob.windows.schedules has no jobs (it is empty or does not exist): a producer older than schedules as a log " +
		"does not write it; for such a deployment pass the producer's schedules file with --schedules FILE"
	check := func(what string) {
		t.Helper()
		code, _, stderr := e.kjobctl("trigger", "report")
		expect(t, code, stderr, exitNotFound, `kjobctl: trigger: unknown job "report": `+noJobs+", or create the jobs with kjobctl schedule apply -f FILE: not found")
		code, out, stderr := e.kjobctl("status")
		if !strings.Contains(stderr, "kjobctl: warning: "+noJobs+"\n") || strings.Contains(out, "report") {
			t.Fatalf("status with %s: exit %d, want the warning and no job\n%s%s", what, code, out, stderr)
		}
	}
	check("no schedules topic")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := topic.Ensure(ctx, e.adm, topic.Spec{Name: "kjob.windows.schedules", Partitions: 1, ReplicationFactor: 1, Compacted: true}); err != nil {
		t.Fatal(err)
	}
	check("an empty schedules topic")
	// The offline override: the producer's file.
	code, out, stderr := e.kjobctl("backfill", "report", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T02:00:00Z", "--schedules", e.sched)
	if code != exitDryRun || !strings.Contains(out, "Backfill report [2026-01-01T00:00:00Z, 2026-01-01T02:00:00Z): 2 windows; would publish 2;") ||
		!strings.HasPrefix(stderr, "kjobctl: using the jobs of the schedules file "+e.sched+" (--schedules/KJOB_SCHEDULES), not the schedules topic kjob.windows.schedules") {
		t.Fatalf("backfill --schedules: exit %d\n%s%s", code, out, stderr)
	}
}

// The dashboard's job list comes from the schedules topic and follows it:
// a job created through the API while the dashboard runs shows up, a
// deleted one leaves, each within a bounded wait (no re-read period).
func TestDashboardJobsFollowTheSchedulesTopic(t *testing.T) {
	e := newOpsEnvForProducer(t)
	startTopicProducer(t, e)
	api := apiSchedules(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := api.Create(ctx, schedule.Spec{Name: "first", Schedule: "@every 1h", Handler: "ok"}, ""); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithCancel(ctx)
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(dctx, append([]string{"dashboard", "--listen", "127.0.0.1:0", "--interval", "200ms"}, e.flags...), &out, &errb)
	}()
	defer func() {
		dcancel()
		if code := testenv.Recv(t, done, 30*time.Second, "the dashboard's exit"); code != exitOK {
			t.Errorf("dashboard: exit %d: %s", code, &errb)
		}
	}()
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)
	testenv.Eventually(t, 30*time.Second, func() bool { return url.MatchString(out.String()) }, "the dashboard did not start: %s%s", &out, &errb)
	base := url.FindString(out.String())
	jobs := func() map[string]inspect.JobStatus {
		resp, err := http.Get(base + "api/state")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var st dashboard.State
		if err := json.Unmarshal(b, &st); err != nil || st.Snapshot == nil {
			return nil
		}
		m := map[string]inspect.JobStatus{}
		for _, j := range st.Snapshot.Jobs {
			m[j.Name] = j
		}
		return m
	}
	testenv.Eventually(t, 20*time.Second, func() bool { j, ok := jobs()["first"]; return ok && j.InFile && j.Schedule == "@every 1h" }, "first not on the dashboard")
	if _, err := api.Create(ctx, schedule.Spec{Name: "second", Schedule: "@every 2h", Handler: "ok"}, ""); err != nil {
		t.Fatal(err)
	}
	// The job list follows the topic: the change shows at the dashboard's
	// next refresh (--interval 200ms here) after the follower read it.
	start := time.Now()
	testenv.Eventually(t, 10*time.Second, func() bool { j, ok := jobs()["second"]; return ok && j.InFile && j.Schedule == "@every 2h" }, "second not on the dashboard")
	t.Logf("second on the dashboard %v after Create returned", time.Since(start).Round(10*time.Millisecond))
	if _, err := api.Delete(ctx, "first", 0, "gone"); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	// A deleted job leaves the schedules' list (the state topic may still
	// know it, without a schedule).
	testenv.Eventually(t, 10*time.Second, func() bool { j, ok := jobs()["first"]; return !ok || !j.InFile }, "first still on the dashboard after its delete")
	t.Logf("first off the dashboard %v after Delete returned", time.Since(start).Round(10*time.Millisecond))
}

// The schedule commands against the real producer leader (the tests of
// schedspecs_test.go use a stand-in, to seed an old history and to land a
// change between plan and execute): apply's plan changes nothing, its
// --execute commits versions the leader schedules; history lists them;
// a revert writes a new version with the old spec; a concurrent edit made
// through the API is named in the next plan as the version it reverts.
func TestScheduleCommandsAgainstTheLeader(t *testing.T) {
	t.Chdir(t.TempDir())
	e := newOpsEnvForProducer(t)
	p := startTopicProducer(t, e)
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(path, []byte("jobs:\n  - name: report\n    schedule: \"30 * * * *\"\n    handler: ok\n  - name: sweep\n    schedule: \"@every 1h\"\n    handler: ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := e.kjobctl("schedule", "apply", "-f", path)
	expect(t, code, stderr, exitDryRun, "kjobctl: schedule apply: dry run: nothing was changed; add --execute to apply it")
	if !strings.Contains(out, "Add (2):") || !strings.Contains(out, "2 to add, 0 to change") {
		t.Fatalf("plan:\n%s", out)
	}
	if _, ok := p.Status().Next["report"]; ok {
		t.Fatal("the plan created a job")
	}
	code, out, stderr = e.kjobctl("schedule", "apply", "-f", path, "--execute", "--note", "first rollout")
	if code != exitOK || !strings.Contains(out, "Applied 2 of 2 changes.") {
		t.Fatalf("execute: exit %d\n%s%s", code, out, stderr)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, a := p.Status().Next["report"]
		_, b := p.Status().Next["sweep"]
		return a && b
	}, "the leader does not schedule the applied jobs")

	// Another actor changes report through the API; the next apply of the
	// file names the version it would revert.
	api := apiSchedules(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if v, err := api.Update(ctx, schedule.Spec{Name: "report", Schedule: "45 * * * *", Handler: "ok"}, 1, "later"); err != nil || v != 2 {
		t.Fatalf("update through the API: version %d, %v", v, err)
	}
	code, out, _ = e.kjobctl("schedule", "apply", "-f", path)
	if code != exitDryRun || !strings.Contains(out, `schedule: "45 * * * *" -> "30 * * * *"`) || !strings.Contains(out, "! reverts v2, set by test-api through the API") {
		t.Fatalf("plan over an API change: exit %d\n%s", code, out)
	}

	code, out, _ = e.kjobctl("schedule", "history", "report")
	if code != exitOK || !strings.Contains(out, "v2  update  by test-api") || !strings.Contains(out, "note: first rollout") {
		t.Fatalf("history: %d\n%s", code, out)
	}
	code, out, stderr = e.kjobctl("schedule", "revert", "report", "--to-version", "1", "--execute", "--note", "back")
	if code != exitOK || !strings.Contains(out, "revert report: v2 -> v3") {
		t.Fatalf("revert: %d\n%s%s", code, out, stderr)
	}
	code, out, _ = e.kjobctl("schedule", "get", "report")
	if code != exitOK || !strings.Contains(out, "Version:    3") || !strings.Contains(out, "schedule: 30 * * * *") {
		t.Fatalf("get after the revert: %d\n%s", code, out)
	}
}
