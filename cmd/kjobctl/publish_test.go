package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/window"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// Two backfills back to back with no worker running: the second publishes
// nothing (the windows are published, not yet run) and says so; once a
// worker ran them a third run leaves them out as run.
func TestBackfillTwiceBeforeRun(t *testing.T) {
	e := newOpsEnv(t)
	bf := []string{"backfill", "report", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T05:00:00Z", "--execute"}
	code, out, stderr := e.kjobctl(bf...)
	if code != exitOK || !strings.HasPrefix(out, "Backfill report [2026-01-01T00:00:00Z, 2026-01-01T05:00:00Z): 5 windows; published 5; left out: 0 already run or running, 0 published before but not yet run") {
		t.Fatalf("first backfill: exit %d\n%s%s", code, out, stderr)
	}
	before := e.endOffsets()
	code, out, stderr = e.kjobctl(bf...)
	want := "Backfill report [2026-01-01T00:00:00Z, 2026-01-01T05:00:00Z): 5 windows; published 0; left out: 0 already run or running, 5 published before but not yet run (--rerun publishes them again)\n"
	if code != exitOK || out != want {
		t.Fatalf("second backfill: exit %d\n%s%s\nwant\n%s", code, out, stderr, want)
	}
	if after := e.endOffsets(); after != before {
		t.Fatalf("second backfill moved the end offsets from %d to %d", before, after)
	}
	// The dry run agrees.
	code, out, _ = e.kjobctl(bf[:len(bf)-1]...)
	if code != exitDryRun || !strings.Contains(out, "would publish 0; left out: 0 already run or running, 5 published before but not yet run") {
		t.Fatalf("dry run after: exit %d\n%s", code, out)
	}

	var mu sync.Mutex
	failing := false
	l := e.startWorker(&failing, &mu)
	for h := range 5 {
		id := fmt.Sprintf("report@2026-01-01T%02d:00:00Z#backfill", h)
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 1 }, "%s not run", id)
	}
	code, out, _ = e.kjobctl(append(bf, "-o", "json")...)
	var res backfillResult
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || len(res.Published) != 0 || len(res.Skipped) != 5 || len(res.PublishedBefore) != 0 {
		t.Fatalf("third backfill: exit %d\n%s", code, out)
	}
	if after := e.endOffsets(); after != before {
		t.Fatalf("third backfill moved the end offsets from %d to %d", before, after)
	}
}

// backfill refuses --to in the future unless --allow-future, and draws a
// progress bar with rate and ETA (on stderr when it is a terminal, or
// with --progress always).
func TestBackfillFutureAndProgress(t *testing.T) {
	e := newOpsEnv(t)
	defer func(f func() time.Time) { nowFunc = f }(nowFunc)
	now := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	nowFunc = func() time.Time { return now }
	future := []string{"backfill", "report", "--from", "2026-03-01T10:00:00Z", "--to", "2026-03-01T15:00:00Z"}
	code, _, stderr := e.kjobctl(future...)
	expect(t, code, stderr, exitUsage, "kjobctl: backfill: --to 2026-03-01T15:00:00Z is in the future (now 2026-03-01T12:30:00Z): windows that have not fallen due "+
		"would run now and again at their scheduled time; use --to 2026-03-01T12:30:00Z, or --allow-future: usage")
	code, out, stderr := e.kjobctl(append(future, "--allow-future")...)
	if code != exitDryRun || !strings.Contains(out, "5 windows; would publish 5") {
		t.Fatalf("--allow-future: exit %d\n%s%s", code, out, stderr)
	}

	// 60 hourly windows; stderr is not a terminal.
	big := []string{"backfill", "report", "--from", "2026-02-20T00:00:00Z", "--to", "2026-02-22T12:00:00Z", "--execute"}
	code, out, stderr = e.kjobctl(big...)
	if code != exitOK || stderr != "" || !strings.Contains(out, "60 windows; published 60") || !strings.Contains(out, "  ... and 40 more (-o json lists them all)\n") {
		t.Fatalf("backfill of 60 windows: exit %d\n%sstderr %q", code, out, stderr)
	}
	big[3], big[5] = "2026-02-23T00:00:00Z", "2026-02-25T12:00:00Z"
	code, _, stderr = e.kjobctl(append(big, "--progress", "always")...)
	if code != exitOK || !strings.HasPrefix(stderr, "\r[") || !strings.Contains(stderr, "[##############################] 60/60 windows  ") ||
		!strings.Contains(stderr, "/s  ETA ") || !strings.HasSuffix(stderr, "\n") {
		t.Fatalf("progress bar: exit %d, stderr %q", code, stderr)
	}
}

// trigger publishes a manual window of a paused or disabled job, and
// warns that it runs anyway.
func TestTriggerWarns(t *testing.T) {
	e := newOpsEnv(t)
	e.startLeader(clock.NewFake(time.Date(2026, 1, 1, 5, 30, 0, 0, time.UTC)))
	code, _, stderr := e.kjobctl("pause", "report", "--note", "upstream down")
	if code != exitOK {
		t.Fatalf("pause failed: %s", stderr)
	}
	code, out, stderr := e.kjobctl("trigger", "report")
	if code != exitOK || !strings.HasPrefix(out, "report@") || !strings.HasPrefix(stderr, "kjobctl: warning: job report is paused (since 2026-01-01T05:30:00Z by ") ||
		!strings.HasSuffix(stderr, ": upstream down); this manual window runs anyway\n") {
		t.Fatalf("trigger of a paused job: exit %d\n%s%s", code, out, stderr)
	}
	sched := filepath.Join(t.TempDir(), "off.yaml")
	if err := os.WriteFile(sched, []byte("jobs:\n  - name: off\n    schedule: \"@every 1h\"\n    handler: ok\n    enabled: false\n    overlap: skip\n    timeout: 2h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A job of a --schedules file (the offline override) is not in the
	// topic: the file is the job list, and a notice says so.
	code, out, stderr = e.kjobctl("trigger", "off", "--schedules", sched)
	want := "kjobctl: using the jobs of the schedules file " + sched + " (--schedules/KJOB_SCHEDULES), not the schedules topic kjob.windows.schedules: " +
		"jobs created through the API are not seen; unset it to read the topic\n" +
		"kjobctl: warning: job off is disabled in the schedules file " + sched + "; this manual window runs anyway\n"
	if code != exitOK || !strings.HasPrefix(out, "off@") || stderr != want {
		t.Fatalf("trigger of a disabled job: exit %d\n%s%q\nwant %q", code, out, stderr, want)
	}
	// The manual window carries the job's policy, overlap included, as
	// the producer's windows do.
	found := false
	for _, r := range testenv.ReadCommitted(t, e.brokers, "kjob.windows") {
		m, err := jobmsg.FromRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if m.Job == "off" {
			found = true
			if m.Policy.Overlap != jobmsg.OverlapSkip || time.Duration(m.Policy.Timeout) != 2*time.Hour {
				t.Errorf("manual window of off: policy %+v, want overlap skip and timeout 2h", m.Policy)
			}
		}
	}
	if !found {
		t.Fatal("manual window of off not in the topic")
	}
}

// Every window kjobctl builds (trigger, backfill, resume --catchup all go
// through window.Message, as the producer) carries the job's whole
// policy, as the producer's do.
func TestWindowMessageCarriesJobPolicy(t *testing.T) {
	f, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: a\n    schedule: \"@every 1m\"\n    handler: log\n"+
		"    timeout: 5m\n    retries: {max_attempts: 7, backoff: 3s, max_backoff: 2m}\n    overlap: latest\n"))
	if err != nil {
		t.Fatal(err)
	}
	j := f.Jobs[0]
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := jobmsg.Policy{Timeout: jobmsg.Duration(5 * time.Minute), MaxAttempts: 7, Backoff: jobmsg.Duration(3 * time.Second),
		MaxBackoff: jobmsg.Duration(2 * time.Minute), Overlap: jobmsg.OverlapLatest}
	for _, trig := range []jobmsg.Trigger{jobmsg.TriggerManual, jobmsg.TriggerBackfill, jobmsg.TriggerCatchup} {
		m := window.Message(j, window.Publication{Start: start, Trigger: trig, ID: jobmsg.BackfillID("a", start), PublishedAt: start})
		if m.Policy != want || m.Policy != window.Policy(j) {
			t.Errorf("%s: policy %+v, want %+v", trig, m.Policy, want)
		}
		r, err := jobmsg.Record("kjob.windows", m)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(r.Value), `"overlap":"latest"`) {
			t.Errorf("%s: record lacks the overlap: %s", trig, r.Value)
		}
	}
}
