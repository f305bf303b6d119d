package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/dedupe"
)

func historyRuns(t0 time.Time) []dedupe.Run {
	run := func(min int, outcome string, d time.Duration, attempt int, token int64, errText string) dedupe.Run {
		start := t0.Add(time.Duration(min) * time.Minute)
		return dedupe.Run{WindowID: "report@" + start.Format(time.RFC3339), Trigger: "schedule", Outcome: outcome, WindowStart: start,
			Started: start.Add(12 * time.Millisecond), Finished: start.Add(12*time.Millisecond + d), Attempt: attempt, Token: token, Worker: "worker-1", Error: errText}
	}
	runs := []dedupe.Run{
		run(0, dedupe.RunDone, 1200*time.Millisecond, 1, 1, ""),
		run(1, dedupe.RunFailed, 300*time.Millisecond, 1, 2, "http: POST http://127.0.0.1:9/hook: 503 Service Unavailable"),
		run(1, dedupe.RunDone, 900*time.Millisecond, 2, 3, ""),
		run(2, dedupe.RunDone, 450*time.Microsecond, 1, 4, ""),
		run(3, dedupe.RunDeadLettered, 2*time.Second, 3, 5, "retries exhausted:\x1b]0;pwned\x07 upstream said no"),
		{WindowID: "report@" + t0.Add(4*time.Minute).Format(time.RFC3339) + "#manual-1f2e", Trigger: "manual", Outcome: dedupe.RunSkipped,
			WindowStart: t0.Add(4 * time.Minute), Finished: t0.Add(4 * time.Minute), Worker: "worker-\x1b[2J2"},
	}
	// Schedule versions: the first run's window from before versions (0),
	// then version 2, then the spec edited to version 3; the manual
	// window's publisher set none.
	for i, v := range []int64{0, 2, 2, 2, 3, 0} {
		runs[i].ScheduleVersion = v
	}
	return runs
}

func TestGoldenHistory(t *testing.T) {
	runs := historyRuns(t0)
	// Newest first, as Runs returns them.
	slices.SortFunc(runs, func(a, b dedupe.Run) int { return b.Finished.Compare(a.Finished) })
	h := historyResult{Job: "report", Stats: dedupe.SummarizeRuns(runs)}
	for _, r := range runs {
		h.Runs = append(h.Runs, historyRun{Run: r, DurationSeconds: r.Duration().Seconds()})
	}
	var b bytes.Buffer
	if err := renderHistory(&b, &h); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07") {
		t.Fatalf("control characters from a record reached the output:\n%q", b.String())
	}
	golden(t, "history.golden", b.Bytes())
}

// TestHistory runs kjobctl history against runs recorded in a real Redis.
func TestHistory(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	t1 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Minute)
	if err := e.store.AppendRuns(ctx, historyRuns(t1)); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := e.kjobctl("history", "report")
	if code != exitOK || !strings.Contains(out, "6 runs of report, newest first: 3 done, 1 failed, 1 dead-lettered, 1 skipped. Success rate 60.0% (3 of 5 attempts).") ||
		strings.Index(out, "#manual-1f2e") > strings.Index(out, "report@"+t1.Format(time.RFC3339)) {
		t.Fatalf("history report: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = e.kjobctl("history", "report", "--outcome", "failed,dead-lettered", "--limit", "1")
	if code != exitOK || !strings.Contains(out, "dead-lettered") || strings.Contains(out, " failed ") || !strings.Contains(out, "1 run of report") {
		t.Fatalf("history --outcome failed,dead-lettered --limit 1: exit %d\n%s", code, out)
	}
	code, out, _ = e.kjobctl("history", "report", "--since", t1.Add(2*time.Minute).Format(time.RFC3339), "-o", "json")
	var h historyResult
	if err := json.Unmarshal([]byte(out), &h); code != exitOK || err != nil {
		t.Fatalf("history -o json: exit %d, %v\n%s", code, err, out)
	}
	// Runs that finished at or after minute 2.
	if len(h.Runs) != 3 || h.Runs[0].Outcome != dedupe.RunSkipped || h.Runs[2].Token != 4 || h.Runs[2].DurationSeconds != 0.00045 || h.Stats.Runs != 3 ||
		h.Runs[0].ScheduleVersion != 0 || h.Runs[1].ScheduleVersion != 3 || h.Runs[2].ScheduleVersion != 2 {
		t.Fatalf("history --since T -o json: %+v", h)
	}
	if !strings.Contains(out, `"schedule_version": 3`) {
		t.Fatalf("history -o json does not name the schedule version as schedule_version:\n%s", out)
	}
	// The text output has a VER column: "-" for a run without a version.
	code, out, _ = e.kjobctl("history", "report")
	if code != exitOK || !strings.Contains(out, " VER ") {
		t.Fatalf("history: exit %d, no VER column:\n%s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		for id, ver := range map[string]string{"report@" + t1.Add(3*time.Minute).Format(time.RFC3339): "3", "report@" + t1.Format(time.RFC3339): "-"} {
			if f := strings.Fields(line); len(f) > 2 && f[1] == id && f[2] != ver {
				t.Errorf("history: run of %s shows version %q, want %q:\n%s", id, f[2], ver, line)
			}
		}
	}
	if code, out, _ := e.kjobctl("history", "report", "--since", "1h"); code != exitOK || !strings.Contains(out, "6 runs of report") {
		t.Fatalf("history --since 1h: exit %d\n%s", code, out)
	}
	code, out, stderr = e.kjobctl("history", "flaky")
	if code != exitOK || !strings.Contains(out, "No runs of flaky recorded") {
		t.Fatalf("history of a job without runs: exit %d\n%s%s", code, out, stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"history", "nope"}, exitNotFound, `kjobctl: history: unknown job "nope": ` + unknownInTopic},
		{[]string{"history", "report", "--outcome", "done,ok"}, exitUsage, `kjobctl: history: --outcome "done,ok": "ok" is not an outcome; want some of done, failed, dead-lettered, skipped, superseded, fenced, abandoned, stepped-down, skipped-replay: usage`},
		{[]string{"history", "report", "--limit", "0"}, exitUsage, `kjobctl: history: --limit 0: want 1 to 10000: usage`},
		{[]string{"history", "report", "--since", "last week"}, exitUsage, `kjobctl: history: --since "last week": want an RFC 3339 time such as 2026-11-22T10:00:00Z, or a duration such as 24h: usage`},
		{[]string{"history"}, exitUsage, `kjobctl: history: want exactly one JOB argument, got 0: usage`},
	} {
		code, _, stderr := e.kjobctl(tc.args...)
		expect(t, code, stderr, tc.code, tc.err)
	}
}
