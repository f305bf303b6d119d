package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kjob/kjob/internal/cli"
	"github.com/kjob/kjob/pkg/control"
	"github.com/kjob/kjob/pkg/jobmsg"
)

const pauseUsage = `kjobctl pause: stop the producer publishing JOB's windows until "kjobctl
resume JOB". The pause is kept in Redis, so it survives producer restarts and
leader changes. Windows that fall due while paused are skipped.

Usage: kjobctl pause JOB [flags]`

const resumeUsage = `kjobctl resume: let the producer publish JOB's windows again. Windows
skipped while the job was paused are not caught up unless --catchup, which
publishes them now (trigger=catchup, their scheduled ids).

Usage: kjobctl resume JOB [--catchup] [flags]`

func pauseCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseResume(ctx, "pause", args, stdout, stderr)
}

func resumeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseResume(ctx, "resume", args, stdout, stderr)
}

func pauseResume(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	var o opts
	var catchup bool
	usage := pauseUsage
	if cmd == "resume" {
		usage = resumeUsage
	}
	f := cli.NewFlags(cmd, usage)
	f.SetOutput(stderr)
	o.register(f)
	o.needSchedules = true
	if cmd == "resume" {
		f.Bool(&catchup, "catchup", "", false, "publish the windows skipped while paused")
	}
	pos, err := f.ParseInterspersed(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%s: want exactly one JOB argument, got %d: %w", cmd, len(pos), errUsage)
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	j, err := o.job(cmd, pos[0])
	if err != nil {
		return err
	}
	ps, err := o.pauses()
	if err != nil {
		return err
	}
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	now := nowFunc().UTC()
	if cmd == "pause" {
		p, err := ps.Pause(cctx, control.Pause{Job: j.Name, Since: now, By: cli.DefaultID()})
		if errors.Is(err, control.ErrAlreadyPaused) {
			return fmt.Errorf("pause: job %s is already paused (since %s by %s): %w", j.Name, fmtTime(p.Since), p.By, errConflict)
		}
		if err != nil {
			return err
		}
		if o.output == "json" {
			return writeJSON(stdout, p)
		}
		fmt.Fprintf(stdout, "paused %s at %s; the producer publishes none of its windows until \"kjobctl resume %s\"\n", j.Name, fmtTime(now), j.Name)
		return nil
	}
	p, err := ps.Resume(cctx, j.Name)
	if errors.Is(err, control.ErrNotPaused) {
		return fmt.Errorf("resume: job %s is not paused: %w", j.Name, errConflict)
	}
	if err != nil {
		return err
	}
	skipped := j.Windows(p.Since.Add(-time.Nanosecond), now, maxBackfill)
	var published []string
	if catchup && len(skipped) > 0 {
		cl, err := o.publisher()
		if err != nil {
			return err
		}
		defer cl.Close()
		for _, s := range skipped {
			id := jobmsg.WindowID(j.Name, s)
			rec, err := jobmsg.Record(o.topic, message(j, id, s, jobmsg.TriggerCatchup, nil, now))
			if err != nil {
				return fmt.Errorf("resume: %w", err)
			}
			if err := cl.ProduceSync(cctx, rec).FirstErr(); err != nil {
				return fmt.Errorf("resume: resumed %s, but publishing catch-up window %s failed: %w (publish the rest with kjobctl backfill)", j.Name, id, err)
			}
			published = append(published, id)
		}
	}
	if o.output == "json" {
		return writeJSON(stdout, map[string]any{"job": j.Name, "paused_since": p.Since, "resumed_at": now, "skipped_windows": len(skipped), "caught_up": published})
	}
	fmt.Fprintf(stdout, "resumed %s (paused since %s); %d windows fell due while paused", j.Name, fmtTime(p.Since), len(skipped))
	switch {
	case catchup:
		fmt.Fprintf(stdout, "; published %d of them now (trigger=catchup)\n", len(published))
		for _, id := range published {
			fmt.Fprintln(stdout, "  "+id)
		}
	case len(skipped) > 0:
		fmt.Fprintln(stdout, " and are not caught up (resume with --catchup to publish them)")
	default:
		fmt.Fprintln(stdout)
	}
	return nil
}
