package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/specs"
)

const pauseUsage = `kjobctl pause: stop the producer publishing JOB's windows until "kjobctl
resume JOB". A pause is a change of JOB's spec: the producer leader commits
it as a new version, in the change log with the principal kjobctl
authenticates as and the note (--note is required). Windows that fall due
while paused are not published. Same as "kjobctl schedule pause".

Usage: kjobctl pause JOB --note N [flags]`

const resumeUsage = `kjobctl resume: let the producer publish JOB's windows again, from the first
one after the resume commits (a new version of JOB's spec, in the change
log). Windows that fell due while the job was paused are not caught up
unless --catchup, which then publishes those in (paused at, resumed at]
under their scheduled ids ("<job>@<start>") with trigger=catchup, as
kjobctl backfill publishes (asynchronously, with a progress bar, windows
already run or published left out).

resume --catchup is a dry run unless --execute: it prints the windows it
would publish and changes nothing. It refuses more than --max-windows
windows. If publishing stops partway, the job is resumed and the error
prints the "kjobctl backfill JOB --catchup" command that publishes the
rest under the same ids.

Usage: kjobctl resume JOB [--note N] [--catchup [--execute] [--max-windows N]] [flags]`

func pauseCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseResume(ctx, "pause", args, stdout, stderr)
}

func resumeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseResume(ctx, "resume", args, stdout, stderr)
}

// resumeResult is what resume prints.
type resumeResult = operator.ResumeResult

// pauseResult is what pause prints.
type pauseResult struct {
	Job           string    `json:"job"`
	VersionBefore int64     `json:"version_before"`
	VersionAfter  int64     `json:"version_after"`
	PausedAt      time.Time `json:"paused_at"`
	By            string    `json:"by"`
	Note          string    `json:"note"`
	Leader        string    `json:"leader"`
}

func pauseResume(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	s := &specOpts{}
	var catchup, execute bool
	var maxWindows int
	var progress string
	usage := pauseUsage
	if cmd == "resume" {
		usage = resumeUsage
	}
	f := cli.NewFlags("kjobctl "+cmd, usage)
	f.SetOutput(stdout)
	s.register(f, false)
	if cmd == "resume" {
		s.registerRetention(f)
		f.Bool(&catchup, "catchup", "", false, "publish the windows skipped while paused")
		f.Bool(&execute, "execute", "", false, "with --catchup: resume and publish (without it: dry run)")
		f.Int(&maxWindows, "max-windows", "", maxBackfill, "with --catchup: refuse to publish more windows than this")
		f.String(&progress, "progress", "", "auto", "with --catchup: progress bar on stderr: auto (when stderr is a terminal), always or never")
	}
	pos, err := f.ParseInterspersed(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%s: want exactly one JOB argument, got %d: %w", cmd, len(pos), errUsage)
	}
	job := pos[0]
	if cmd == "pause" && strings.TrimSpace(s.note) == "" {
		return fmt.Errorf("pause: --note is required: say why %s is paused (it is kept in the change log): %w", safe(job), errUsage)
	}
	if execute && !catchup {
		return fmt.Errorf("resume: --execute goes with --catchup (a plain resume changes nothing else and needs no --execute): %w", errUsage)
	}
	if maxWindows < 1 && cmd == "resume" {
		return fmt.Errorf("resume: --max-windows %d: want at least 1: %w", maxWindows, errUsage)
	}
	if progress != "" && progress != "auto" && progress != "always" && progress != "never" {
		return fmt.Errorf("resume: --progress %q: want auto, always or never: %w", progress, errUsage)
	}
	if err := s.setup(); err != nil {
		return err
	}
	defer s.close()
	c, cctx, cancel, err := s.connect(ctx, specs.Source{})
	if err != nil {
		return err
	}
	defer cancel()
	if cmd == "pause" {
		return pauseJob(cctx, s, c, job, stdout)
	}

	cl, err := s.publisherFor(cctx, catchup && execute)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if cl != nil {
		defer cl.Close()
	}
	op, err := s.operator(cl, nil)
	if err != nil {
		return err
	}
	res, err := op.ResumeCatchup(cctx, operator.CatchupSpec{Job: job, Note: s.note, Catchup: catchup, Execute: execute, MaxWindows: maxWindows,
		Hold: s.timeout + time.Minute, NewProgress: progressFor(progress, stderr)})
	var tooMany *operator.TooManyWindowsError
	var failed *operator.CatchupError
	switch {
	case errors.Is(err, operator.ErrNotPaused):
		return fmt.Errorf("resume: job %s is not paused: %w", safe(job), errConflict)
	case errors.As(err, &failed):
		return fmt.Errorf("resume: resumed %s, but the catch-up failed: %w; publish the rest with: kjobctl backfill %s --catchup --from %s --to %s --execute",
			safe(job), failed.Err, safe(job), failed.From.UTC().Format(time.RFC3339Nano), failed.To.UTC().Format(time.RFC3339Nano))
	case errors.As(err, &tooMany):
		return fmt.Errorf("resume: %s has more than %d windows skipped since %s; nothing was changed. Publish them all with --max-windows %d or more, "+
			"or resume without --catchup and publish chosen ranges under their scheduled ids with \"kjobctl backfill %s --catchup --from T1 --to T2\": %w",
			safe(job), tooMany.Max, fmtTime(tooMany.Since), tooMany.Windows, safe(job), errUsage)
	case err != nil:
		return specErr("resume", err)
	}
	if err := renderResume(stdout, s.output, res); err != nil {
		return err
	}
	if !res.Executed {
		return fmt.Errorf("resume: %w", errDryRun)
	}
	return nil
}

// pauseJob pauses job through the producer leader, expecting the version
// it read: a change made meanwhile is a conflict, not overwritten.
func pauseJob(ctx context.Context, s *specOpts, c *specs.Client, job string, stdout io.Writer) error {
	r, err := c.Get(ctx, job)
	if err != nil {
		return specErr("pause", err)
	}
	if p := r.Paused; p != nil {
		return fmt.Errorf("pause: job %s is already paused (since %s by %s: %s): %w", safe(job), fmtTime(p.At), safe(p.By), safe(p.Note), errConflict)
	}
	v := r.Version
	res, err := c.Submit(ctx, []specs.Edit{{Op: specs.OpPause, Job: job, Note: s.note, ExpectVersion: &v}}, s.note)
	if err != nil {
		return specErr("pause", err)
	}
	out := pauseResult{Job: job, VersionBefore: v, VersionAfter: v, PausedAt: res.At.UTC(), By: c.Actor(), Note: s.note, Leader: res.Leader}
	if len(res.Applied) > 0 {
		out.VersionAfter = res.Applied[0].VersionAfter
	}
	if s.output == "json" {
		return writeJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "paused %s at %s (version %d -> %d, by %s); the producer publishes none of its windows until \"kjobctl resume %s\"\n",
		safe(job), fmtTime(out.PausedAt), out.VersionBefore, out.VersionAfter, safe(out.By), safe(job))
	return nil
}

func renderResume(w io.Writer, output string, r *resumeResult) error {
	if output == "json" {
		return writeJSON(w, r)
	}
	by := fmt.Sprintf("paused since %s by %s", fmtTime(r.PausedSince), safe(r.PausedBy))
	if r.PauseNote != "" {
		by += ": " + safe(r.PauseNote)
	}
	if !r.Executed {
		fmt.Fprintf(w, "would resume %s (%s); %s fell due while paused\n", safe(r.Job), by, plural(r.SkippedWindows, "window"))
	} else {
		fmt.Fprintf(w, "resumed %s at %s (version %d -> %d; %s); %s fell due while paused", safe(r.Job), fmtTime(r.ResumedAt), r.VersionBefore, r.VersionAfter,
			by, plural(r.SkippedWindows, "window"))
		if r.Catchup == nil && r.SkippedWindows > 0 {
			fmt.Fprint(w, ", not caught up (resume with --catchup to publish them)")
		}
		fmt.Fprintln(w)
	}
	if r.Catchup != nil {
		return renderBackfill(w, "table", r.Catchup)
	}
	return nil
}
