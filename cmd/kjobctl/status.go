package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kjob/kjob/internal/cli"
	"github.com/kjob/kjob/pkg/inspect"
)

const statusUsage = `kjobctl status: the producer leader, the workers and their partitions, and
per job its schedule, next fire times and last window with its outcome.

Usage: kjobctl status [flags]`

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opts
	f := cli.NewFlags("status", statusUsage)
	f.SetOutput(stderr)
	o.register(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	if len(f.Args()) > 0 {
		return fmt.Errorf("status: unexpected argument %q: %w", f.Args()[0], errUsage)
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	in, err := o.inspector()
	if err != nil {
		return err
	}
	defer in.Close()
	ctx, cancel := o.ctx(ctx)
	defer cancel()
	snap, err := in.Snapshot(ctx)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(stdout, snap)
	}
	return renderStatus(stdout, snap)
}

func renderStatus(w io.Writer, s *inspect.Snapshot) error {
	if s.Leader == nil {
		fmt.Fprintln(w, "Producer leader: none (no producer holds the lease)")
	} else {
		fmt.Fprintf(w, "Producer leader: %s (lease epoch %d, since %s)\n", s.Leader.Holder, s.Leader.Epoch, fmtTime(s.Leader.Since))
	}
	if g := s.Group; g != nil {
		fmt.Fprintf(w, "\nGroup %s: %s, %d members, total lag %d\n", g.Name, g.State, len(g.Members), g.TotalLag)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tHOST\tPARTITIONS")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", m.ClientID, m.Host, joinInts(m.Partitions))
		}
		tw.Flush()
	} else {
		fmt.Fprintln(w, "\nGroup: does not exist yet (no worker has joined)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSCHEDULE\tTIME ZONE\tSTATE\tPART\tNEXT (UTC)\tLAST WINDOW\tOUTCOME")
	for _, j := range s.Jobs {
		state := "enabled"
		switch {
		case !j.InFile:
			state = "not in file"
		case j.Paused:
			state = "paused"
		case !j.Enabled:
			state = "disabled"
		}
		last, outcome := "-", "-"
		if j.Last != nil {
			last = j.Last.ID
			outcome = j.Last.Outcome
			if j.Last.Token > 0 {
				outcome += fmt.Sprintf(" (token %d, attempt %d)", j.Last.Token, j.Last.Attempts)
			}
		}
		next := make([]string, 0, len(j.Next))
		for _, t := range j.Next {
			next = append(next, t.UTC().Format(time.RFC3339))
		}
		nx := "-"
		if len(next) > 0 {
			nx = strings.Join(next, " ")
		}
		sched, tz := j.Schedule, j.Timezone
		if sched == "" {
			sched, tz = "?", "?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", j.Name, sched, tz, state, j.Partition, nx, last, outcome)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nDead letters: %d\n", s.DeadLetters)
	for _, e := range s.Errors {
		fmt.Fprintln(w, "warning:", e)
	}
	return nil
}

func joinInts(ps []int32) string {
	if len(ps) == 0 {
		return "-"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}

const lagUsage = `kjobctl lag: per partition of the windows topic, the group's committed
offset, the log end offset, the lag and the owning worker, and the total; the
same numbers kadm and kafka-consumer-groups --describe report.

Usage: kjobctl lag [--group G] [--watch] [flags]`

func lagCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opts
	var watch bool
	var every time.Duration
	f := cli.NewFlags("lag", lagUsage)
	f.SetOutput(stderr)
	o.register(f)
	f.Bool(&watch, "watch", "", false, "refresh in place until interrupted")
	f.Duration(&every, "interval", "", 2*time.Second, "refresh interval of --watch")
	if err := f.Parse(args); err != nil {
		return err
	}
	if len(f.Args()) > 0 {
		return fmt.Errorf("lag: unexpected argument %q: %w", f.Args()[0], errUsage)
	}
	if every <= 0 {
		return fmt.Errorf("lag: --interval %v: must be positive: %w", every, errUsage)
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	in, err := o.inspector()
	if err != nil {
		return err
	}
	defer in.Close()
	if watch {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	for first := true; ; first = false {
		cctx, cancel := o.ctx(ctx)
		g, err := in.Group(cctx)
		cancel()
		if watch && ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, inspect.ErrNoGroup) {
			return fmt.Errorf("lag: group %q does not exist (no members, no committed offsets on %s); check --group: %w", o.group, o.topic, errNotFound)
		}
		if err != nil {
			return fmt.Errorf("lag: %w", err)
		}
		if !watch {
			if o.output == "json" {
				return writeJSON(stdout, g)
			}
			return renderLag(stdout, g)
		}
		if o.output == "json" {
			if err := writeJSON(stdout, g); err != nil {
				return err
			}
		} else {
			if !first {
				fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear screen
			}
			fmt.Fprintf(stdout, "%s  (every %v, Ctrl-C stops)\n", nowFunc().UTC().Format(time.RFC3339), every)
			renderLag(stdout, g)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

func renderLag(w io.Writer, g *inspect.Group) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PARTITION\tCOMMITTED\tEND\tLAG\tOWNER\n")
	for _, p := range g.Partitions {
		owner := p.Owner
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\n", p.Partition, fmtOffset(p.Committed), p.End, p.Lag, owner)
	}
	fmt.Fprintf(tw, "TOTAL\t\t\t%d\t\n", g.TotalLag)
	return tw.Flush()
}
