package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/pause"
)

const pauseUsage = `kjobctl pause: stop the producer publishing JOB's windows until "kjobctl
resume JOB". The pause is kept in Redis, so it survives producer restarts and
leader changes. Windows that fall due while paused are skipped.

Usage: kjobctl pause JOB [flags]`

const resumeUsage = `kjobctl resume: let the producer publish JOB's windows again. Windows
skipped while the job was paused are not caught up unless --catchup, which
publishes them under their scheduled ids ("<job>@<start>") with
trigger=catchup, as kjobctl backfill publishes (asynchronously, with a
progress bar, windows already run or published left out).

resume --catchup is a dry run unless --execute: it prints the windows it
would publish and changes nothing. It refuses more than --max-windows
windows. If publishing stops partway, the job is resumed and the error
prints the "kjobctl backfill JOB --catchup" command that publishes the
rest under the same ids.

Usage: kjobctl resume JOB [--catchup [--execute] [--max-windows N]] [flags]`

func pauseCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseResume(ctx, "pause", args, stdout, stderr)
}

func resumeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseResume(ctx, "resume", args, stdout, stderr)
}

// resumeResult is what resume prints.
type resumeResult = operator.ResumeResult

func pauseResume(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	var o opts
	var catchup, execute bool
	var maxWindows int
	var progress string
	usage := pauseUsage
	if cmd == "resume" {
		usage = resumeUsage
	}
	f := cli.NewFlags("kjobctl "+cmd, usage)
	f.SetOutput(stdout)
	o.register(f)
	if cmd == "resume" {
		o.registerRetention(f)
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
	if execute && !catchup {
		return fmt.Errorf("resume: --execute goes with --catchup (a plain resume changes nothing else and needs no --execute): %w", errUsage)
	}
	if maxWindows < 1 && cmd == "resume" {
		return fmt.Errorf("resume: --max-windows %d: want at least 1: %w", maxWindows, errUsage)
	}
	if progress != "" && progress != "auto" && progress != "always" && progress != "never" {
		return fmt.Errorf("resume: --progress %q: want auto, always or never: %w", progress, errUsage)
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	j, err := o.job(ctx, cmd, pos[0], stderr)
	if err != nil {
		return err
	}
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	if cmd == "pause" {
		op, err := o.operator(nil, nil)
		if err != nil {
			return err
		}
		p, err := op.Pause(cctx, j.Name, kjob.DefaultID())
		if errors.Is(err, pause.ErrAlreadyPaused) {
			return fmt.Errorf("pause: job %s is already paused (since %s by %s): %w", j.Name, fmtTime(p.Since), p.By, errConflict)
		}
		if err != nil {
			return err
		}
		if o.output == "json" {
			return writeJSON(stdout, p)
		}
		fmt.Fprintf(stdout, "paused %s at %s; the producer publishes none of its windows until \"kjobctl resume %s\"\n", j.Name, fmtTime(p.Since), j.Name)
		return nil
	}

	cl, err := o.publisherFor(cctx, catchup && execute)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if cl != nil {
		defer cl.Close()
	}
	op, err := o.operator(cl, nil)
	if err != nil {
		return err
	}
	res, err := op.ResumeCatchup(cctx, operator.CatchupSpec{Job: j.Name, Catchup: catchup, Execute: execute, MaxWindows: maxWindows,
		Hold: o.timeout + time.Minute, NewProgress: progressFor(progress, stderr)})
	var tooMany *operator.TooManyWindowsError
	var failed *operator.CatchupError
	switch {
	case errors.Is(err, operator.ErrResumedMeanwhile):
		return fmt.Errorf("resume: job %s is not paused (resumed meanwhile): %w", j.Name, errConflict)
	case errors.Is(err, pause.ErrNotPaused):
		return fmt.Errorf("resume: job %s is not paused: %w", j.Name, errConflict)
	case errors.As(err, &tooMany):
		return fmt.Errorf("resume: %s has more than %d windows skipped since %s; nothing was changed. Publish them all with --max-windows %d or more, "+
			"or resume without --catchup and publish chosen ranges under their scheduled ids with \"kjobctl backfill %s --catchup --from T1 --to T2\": %w",
			j.Name, tooMany.Max, fmtTime(tooMany.Since), tooMany.Windows, j.Name, errUsage)
	case errors.As(err, &failed):
		return fmt.Errorf("resume: resumed %s, but the catch-up failed: %w; publish the rest with: kjobctl backfill %s --catchup --from %s --to %s --execute",
			j.Name, failed.Err, j.Name, failed.From.UTC().Format(time.RFC3339Nano), failed.To.UTC().Format(time.RFC3339Nano))
	case err != nil:
		return fmt.Errorf("resume: %w", err)
	}
	if err := renderResume(stdout, o.output, res); err != nil {
		return err
	}
	if !res.Executed {
		return fmt.Errorf("resume: %w", errDryRun)
	}
	return nil
}

func renderResume(w io.Writer, output string, r *resumeResult) error {
	if output == "json" {
		return writeJSON(w, r)
	}
	if !r.Executed {
		fmt.Fprintf(w, "would resume %s (paused since %s); %s fell due while paused\n", r.Job, fmtTime(r.PausedSince), plural(r.SkippedWindows, "window"))
	} else {
		fmt.Fprintf(w, "resumed %s (paused since %s); %s fell due while paused", r.Job, fmtTime(r.PausedSince), plural(r.SkippedWindows, "window"))
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
