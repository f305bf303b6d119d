package main

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// startLeader runs the producer of the environment's schedules file on
// clk, leading at once: it imports the jobs into the schedules topic and
// answers kjobctl's pause and resume. It is stopped when the test ends.
func (e *opsEnv) startLeader(clk clock.Clock) *producer.Producer {
	e.t.Helper()
	f, err := schedule.Load(e.sched)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := producer.New(producer.Config{Brokers: e.brokers, Namespace: "ops", Topic: "kjob.windows", Jobs: f.Jobs, Elector: leadAlways{}, Clock: clk,
		Partitions: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	testenv.Eventually(e.t, 20*time.Second, func() bool { return len(p.Status().Next) == len(f.Jobs) }, "producer not leading")
	return p
}

// windowsOf reads the windows topic: job's records.
func (e *opsEnv) windowsOf(job string) []*jobmsg.Message {
	e.t.Helper()
	var out []*jobmsg.Message
	for _, r := range testenv.ReadCommitted(e.t, e.brokers, "kjob.windows") {
		m, err := jobmsg.FromRecord(r)
		if err != nil {
			e.t.Fatal(err)
		}
		if m.Job == job {
			out = append(out, m)
		}
	}
	return out
}

// kjobctl pause and resume are spec changes through the producer leader:
// a pause needs a note and becomes a version in the change log under
// kjobctl's principal; the producer publishes none of the job's windows
// after it; status says who paused it, since when and why; resume
// --catchup plans, refuses more than --max-windows, and with --execute
// resumes through the leader and publishes the windows in (pause, resume]
// under their scheduled ids, each run once, none of them twice with the
// producer's own.
func TestPauseResumeThroughTheLeader(t *testing.T) {
	e := newOpsEnv(t)
	defer func(f func() time.Time) { nowFunc = f }(nowFunc)
	clk := clock.NewFake(time.Date(2026, 1, 1, 5, 30, 0, 0, time.UTC))
	nowFunc = clk.Now // kjobctl plans on the leader's clock
	e.startLeader(clk)
	actor := specs.DefaultActor()

	code, _, stderr := e.kjobctl("pause", "report")
	expect(t, code, stderr, exitUsage, "kjobctl: pause: --note is required: say why report is paused (it is kept in the change log): usage")
	code, _, stderr = e.kjobctl("pause", "nope", "--note", "x")
	expect(t, code, stderr, exitNotFound, `kjobctl: pause: schedule "nope": no such schedule in namespace "ops": not found`)
	code, _, stderr = e.kjobctl("resume", "report")
	expect(t, code, stderr, exitConflict, "kjobctl: resume: job report is not paused: refused")
	code, out, stderr := e.kjobctl("pause", "report", "--note", "upstream down, INC-7")
	if want := "paused report at 2026-01-01T05:30:00Z (version 1 -> 2, by " + actor + `); the producer publishes none of its windows until "kjobctl resume report"` + "\n"; code != exitOK || out != want {
		t.Fatalf("pause: exit %d\n%s%s\nwant\n%s", code, out, stderr, want)
	}
	code, _, stderr = e.kjobctl("pause", "report", "--note", "again")
	expect(t, code, stderr, exitConflict, "kjobctl: pause: job report is already paused (since 2026-01-01T05:30:00Z by "+actor+": upstream down, INC-7): refused")
	_, out, _ = e.kjobctl("status") // exit 1: no worker group yet
	if !strings.Contains(out, "report  0 * * * *  UTC        paused") || !strings.Contains(out, "\nPaused: report since 2026-01-01T05:30:00Z by "+actor+": upstream down, INC-7\n") {
		t.Fatalf("status:\n%s", out)
	}

	// 06:00 ... 10:00 fall due while paused: flaky's windows go out,
	// report's do not.
	clk.Set(time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC))
	testenv.Eventually(t, 20*time.Second, func() bool { return len(e.windowsOf("flaky")) == 5 }, "flaky's windows up to 10:30")
	if ws := e.windowsOf("report"); len(ws) != 0 {
		t.Fatalf("report published while paused: %v", ws[0].ID)
	}

	code, out, stderr = e.kjobctl("resume", "report", "--catchup")
	expect(t, code, stderr, exitDryRun, "kjobctl: resume: dry run: nothing was changed; add --execute to apply it")
	want := `would resume report (paused since 2026-01-01T05:30:00Z by ` + actor + `: upstream down, INC-7); 5 windows fell due while paused
Catch-up report [2026-01-01T05:30:00Z, 2026-01-01T10:30:00Z): 5 windows; would publish 5; left out: 0 already run or running, 0 published before but not yet run (--rerun publishes them again)
  report@2026-01-01T06:00:00Z
  report@2026-01-01T07:00:00Z
  report@2026-01-01T08:00:00Z
  report@2026-01-01T09:00:00Z
  report@2026-01-01T10:00:00Z
`
	if out != want {
		t.Fatalf("resume --catchup dry run:\n%s\nwant\n%s", out, want)
	}
	code, _, stderr = e.kjobctl("resume", "report", "--catchup", "--execute", "--max-windows", "3")
	expect(t, code, stderr, exitUsage, `kjobctl: resume: report has more than 3 windows skipped since 2026-01-01T05:30:00Z; nothing was changed. `+
		`Publish them all with --max-windows 4 or more, or resume without --catchup and publish chosen ranges under their scheduled ids with "kjobctl backfill report --catchup --from T1 --to T2": usage`)
	code, _, stderr = e.kjobctl("pause", "report", "--note", "still")
	if code != exitConflict {
		t.Fatalf("report not paused any more after a dry run and a refusal: %d %s", code, stderr)
	}

	var mu sync.Mutex
	failing := false
	l := e.startWorker(&failing, &mu)
	code, out, stderr = e.kjobctl("resume", "report", "--catchup", "--execute", "--note", "upstream back")
	if code != exitOK || !strings.HasPrefix(out, "resumed report at 2026-01-01T10:30:00Z (version 2 -> 3; paused since 2026-01-01T05:30:00Z by "+actor+
		": upstream down, INC-7); 5 windows fell due while paused\nCatch-up report [2026-01-01T05:30:00Z, 2026-01-01T10:30:00Z): 5 windows; published 5;") {
		t.Fatalf("resume --catchup --execute: exit %d\n%s%s", code, out, stderr)
	}
	for h := 6; h <= 10; h++ {
		id := jobmsg.WindowID("report", time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC))
		testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 1 }, "caught-up %s not run", id)
	}
	// The producer goes on from the first window after the resume.
	clk.Set(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))
	testenv.Eventually(t, 20*time.Second, func() bool { return len(e.windowsOf("report")) == 6 }, "report@11:00")
	var got []string
	for _, m := range e.windowsOf("report") {
		got = append(got, m.Window.Start.Format("15:04")+"/"+string(m.Trigger)+"/v"+itoa(m.ScheduleVersion))
	}
	if w := "06:00/catchup/v2 07:00/catchup/v2 08:00/catchup/v2 09:00/catchup/v2 10:00/catchup/v2 11:00/schedule/v3"; strings.Join(got, " ") != w {
		t.Fatalf("report's windows: %s\nwant %s", strings.Join(got, " "), w)
	}
	code, _, stderr = e.kjobctl("resume", "report", "--catchup", "--execute")
	expect(t, code, stderr, exitConflict, "kjobctl: resume: job report is not paused: refused")
	// A catch-up that stopped partway is finished with backfill --catchup:
	// same ids, so windows already caught up are left out.
	code, out, stderr = e.kjobctl("backfill", "report", "--catchup", "--from", "2026-01-01T05:30:00Z", "--to", "2026-01-01T10:30:00Z", "--execute")
	if code != exitOK || !strings.HasPrefix(out, "Catch-up report [2026-01-01T05:30:00Z, 2026-01-01T10:30:00Z): 5 windows; published 0; left out: 5 already run") {
		t.Fatalf("backfill --catchup: exit %d\n%s%s", code, out, stderr)
	}

	// Both changes are in the change log, by kjobctl's principal, with
	// their notes (version 1 is the environment's import of the jobs).
	c, err := specs.NewClient(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(e.brokers...)}, Deployment: names.Deployment{Namespace: "ops", Topic: "kjob.windows"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hist, err := c.History(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for _, h := range hist {
		if h.Op != specs.OpPause && h.Op != specs.OpResume {
			continue // the environment's own import of the jobs
		}
		log = append(log, itoa(h.VersionAfter)+" "+string(h.Op)+" "+h.Actor+" "+h.Source.Kind+" "+h.Note+" "+h.At.Format("15:04"))
	}
	if w := []string{"2 pause " + actor + " cli upstream down, INC-7 05:30",
		"3 resume " + actor + " cli upstream back 10:30"}; strings.Join(log, "\n") != strings.Join(w, "\n") {
		t.Fatalf("change log:\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(w, "\n"))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
