package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/ops/inspect"
)

const statusUsage = `kjobctl status: the producer leader, the workers and their partitions, and
per job its schedule, overlap policy, next fire times (in the job's time zone and in UTC)
and last window with its outcome.

A part that cannot be read (Kafka or Redis down) is shown as "unknown
(<error>)", never as an empty value, and status then exits 1 (with -o json
it still prints what it could read, with the errors in leader_error,
group_error, jobs_error, dead_letters_error and stalls_error).

With no worker running (the group has no member, or does not exist yet)
status exits 6 after printing everything: no window runs meanwhile.

A partition a worker reports it cannot move (its oldest record cannot be
settled: a dead letter the broker does not take, Redis not answering) is
listed under "Stalled partitions", and status then exits 1 too.

With --lease-backend kubernetes (KJOB_LEASE_BACKEND, as the producer's) the
leader is read from the coordination.k8s.io Lease: holderIdentity,
acquireTime, and leaseTransitions as the lease epoch.

Usage: kjobctl status [flags]`

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opts
	f := cli.NewFlags("kjobctl status", statusUsage)
	f.SetOutput(stdout)
	o.register(f)
	o.registerLease(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	in, err := o.inspector(jobsOf{&o, stderr})
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
	o.warnNoJobs(stderr)
	if o.output == "json" {
		err = writeJSON(stdout, snap)
	} else {
		err = renderStatus(stdout, snap, statusInfo{group: o.group, lease: o.leaseDesc()})
	}
	if err != nil {
		return err
	}
	if err := partialErr(snap); err != nil {
		return err
	}
	if len(snap.Stalls) > 0 {
		return fmt.Errorf("status: %d partition(s) cannot move (see Stalled partitions)", len(snap.Stalls))
	}
	if g := snap.Group; g == nil || len(g.Members) == 0 {
		return fmt.Errorf("status: no worker is running in group %s, so no window runs: start the workers, or check --group/KJOB_GROUP against theirs: %w", o.group, errNoWorker)
	}
	return nil
}

// errNoWorker is status's error when the workers' group has no member.
var errNoWorker = errors.New("no worker")

// partialErr is status's error when parts of the snapshot are unknown.
func partialErr(s *inspect.Snapshot) error {
	if s.Err() == nil {
		return nil
	}
	var parts []string
	for _, p := range []struct{ name, err string }{
		{"the producer leader", s.LeaderError}, {"the group", s.GroupError}, {"the jobs", s.JobsError}, {"the dead letters", s.DeadLettersError},
		{"the stalled partitions", s.StallsError},
	} {
		if p.err != "" {
			parts = append(parts, p.name)
		}
	}
	return fmt.Errorf("status: could not read %s (the errors are in the output): %w", strings.Join(parts, ", "), inspect.ErrPartial)
}

// statusInfo is what the table needs besides the snapshot.
type statusInfo struct {
	group string // the --group
	lease string // where the producers keep their lease
}

func renderStatus(w io.Writer, s *inspect.Snapshot, info statusInfo) error {
	switch l := s.Leader; {
	case s.LeaderError != "":
		fmt.Fprintf(w, "Producer leader: unknown (%s)\n", safe(s.LeaderError))
	case l == nil:
		fmt.Fprintf(w, "Producer leader: none (no producer holds the %s)\n", info.lease)
	case l.Expired:
		fmt.Fprintf(w, "Producer leader: none: %s, last held by %s (lease epoch %d, since %s), was not renewed in time (last renewal %s)\n",
			safe(l.Source), safe(l.Holder), l.Epoch, fmtTime(l.Since), fmtTime(l.RenewedAt))
	default:
		fmt.Fprintf(w, "Producer leader: %s (lease epoch %d, since %s)\n", safe(l.Holder), l.Epoch, fmtTime(l.Since))
	}
	switch g := s.Group; {
	case s.GroupError != "":
		fmt.Fprintf(w, "\nGroup %s: unknown (%s)\n", safe(info.group), safe(s.GroupError))
	case g == nil:
		fmt.Fprintf(w, "\nGroup %s: does not exist yet (no worker has joined)\n", info.group)
	case len(g.Members) == 0:
		fmt.Fprintf(w, "\nGroup %s: %s, no members (no worker is running; the committed offsets are kept), total lag %d\n", g.Name, g.State, g.TotalLag)
	default:
		fmt.Fprintf(w, "\nGroup %s: %s, %s, total lag %d\n", g.Name, g.State, plural(len(g.Members), "member"), g.TotalLag)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tHOST\tPARTITIONS")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(m.ClientID), safe(m.Host), joinInts(m.Partitions))
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSCHEDULE\tTIME ZONE\tSTATE\tOVERLAP\tPART\tNEXT (JOB'S ZONE)\tNEXT (UTC)\tLAST WINDOW\tOUTCOME")
	for _, j := range s.Jobs {
		state := "enabled"
		switch {
		case j.SpecUnknown:
			state = "unknown"
		case !j.InFile:
			state = "no spec"
		case j.Paused:
			state = "paused"
		case !j.Enabled:
			state = "disabled"
		case j.PausedUnknown:
			state = "unknown"
		}
		last, outcome := "-", "-"
		switch {
		case j.Last != nil:
			last = j.Last.ID
			outcome = j.Last.Outcome
			if j.Last.OutcomeError != "" {
				outcome = "unknown"
			}
			if j.Last.Token > 0 {
				outcome += fmt.Sprintf(" (token %d, attempt %d)", j.Last.Token, j.Last.Attempts)
			}
			if settledByOverlap(j.Last.Outcome) && j.Last.OutcomeError == "" && j.Last.LastError != "" {
				outcome += ": " + oneLine(j.Last.LastError, 80)
			}
		case j.LastUnknown:
			last, outcome = "?", "unknown"
		}
		sched, tz, overlap := j.Schedule, j.Timezone, j.Overlap
		if sched == "" {
			sched, tz = "?", "?"
		}
		if overlap == "" {
			overlap = "?"
		}
		part := fmt.Sprint(j.Partition)
		if j.PartitionUnknown {
			part = "?"
		}
		local, utc := nextTimes(j)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(j.Name), safe(sched), safe(tz), state, overlap, part, local[0], utc[0], safe(last), safe(outcome))
		for i := 1; i < len(local); i++ {
			// As many cells as a job's row, so the columns after NEXT
			// stay aligned across the rows (tabwriter aligns a column
			// over consecutive lines that have it).
			fmt.Fprintf(tw, "\t\t\t\t\t\t%s\t%s\t\t\n", local[i], utc[i])
		}
	}
	tw.Flush()
	if s.JobsError != "" {
		fmt.Fprintf(w, "Jobs: partly unknown (%s)\n", safe(s.JobsError))
	}
	for _, j := range s.Jobs { // who paused what, since when and why: from the spec
		if p := j.Pause; p != nil {
			fmt.Fprintf(w, "Paused: %s since %s by %s: %s\n", safe(j.Name), fmtTime(p.At), safe(p.By), safe(p.Note))
		}
	}
	if s.DeadLettersError != "" {
		fmt.Fprintf(w, "\nDead letters: unknown (%s)\n", safe(s.DeadLettersError))
	} else {
		fmt.Fprintf(w, "\nDead letters: %d\n", s.DeadLetters)
	}
	switch {
	case s.StallsError != "":
		fmt.Fprintf(w, "Stalled partitions: unknown (%s)\n", safe(s.StallsError))
	case len(s.Stalls) > 0:
		fmt.Fprintf(w, "Stalled partitions: %d\n", len(s.Stalls))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  PARTITION\tOFFSET\tWORKER\tSINCE\tREASON")
		for _, st := range s.Stalls {
			off := strconv.FormatInt(st.Offset, 10)
			if st.Offset < 0 {
				off = "-"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", st.Partition, off, safe(st.Worker), st.Since.UTC().Format(time.RFC3339), safe(st.Reason))
		}
		tw.Flush()
	}
	return nil
}

// settledByOverlap reports whether outcome is a window the workers settled
// without running it to completion because of its job's overlap policy:
// skipped (skip, latest) or superseded (replace). Its reason follows it in
// the table.
func settledByOverlap(outcome string) bool {
	return outcome == "skipped" || outcome == "superseded" || outcome == "skipped (replay)" // dedupe.ReplaySkipLabel
}

// nextTimes formats a job's next fire times in its zone and in UTC, one
// entry per row (at least one).
func nextTimes(j inspect.JobStatus) (local, utc []string) {
	switch {
	case !j.InFile:
		return []string{"-"}, []string{"-"}
	case j.Paused:
		return []string{"- (paused)"}, []string{"-"}
	case !j.Enabled:
		return []string{"- (disabled)"}, []string{"-"}
	case len(j.Next) == 0:
		return []string{"-"}, []string{"-"}
	}
	loc, err := time.LoadLocation(j.Timezone)
	if err != nil {
		loc = time.UTC
	}
	for _, t := range j.Next {
		local = append(local, t.In(loc).Format("2006-01-02 15:04:05 MST"))
		utc = append(utc, t.UTC().Format(time.RFC3339))
	}
	return local, utc
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
offset, the log end offset, the lag and the owning worker, and the total,
as kadm computes them (kadm.Client.Lag); then the time lag: how late the
work is.

These are the numbers kafka-consumer-groups --describe prints, with one
difference: for a partition without a committed offset kjobctl (like kadm)
shows COMMITTED "-" and LAG = log end - log start (the records a worker
would read from the start), where kafka-consumer-groups shows "-" for both.
LAG counts offsets, and on kjob's transactional topic a transaction's
commit marker takes one: one running window reads LAG 2.

TIME LAG is the age of the oldest window of the partition that is
published and due but not settled (done, dead-lettered, skipped or
superseded), read from the committed offset on (read committed, at most
5000 records; "≥" when there were more) and the windows' records in
Redis; OLDEST UNSETTLED names that window and its state (pending: not
claimed yet, running, failed); WINDOWS counts the window records past the
committed offset. It does not need the workers to run. A time lag that
cannot be read (Redis down) is shown as "?" with the reason, and lag then
exits 1 (--watch goes on). -o json has it per partition (time_lag) and per
job (time_lag_jobs).

--watch refreshes until interrupted; a failed refresh (a Kafka blip) is
shown in its frame and the watch goes on. On a terminal each frame
replaces the last; otherwise frames are appended, and with -o json each
frame is one JSON object per line (NDJSON: at, and group or error).

Usage: kjobctl lag [--group G] [--watch [--interval D]] [flags]`

// isTerminal reports whether w is a terminal (tests replace it).
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// lagFrame is one line of lag --watch -o json.
type lagFrame struct {
	At    time.Time      `json:"at"`
	Group *inspect.Group `json:"group,omitempty"`
	Error string         `json:"error,omitempty"`
}

func lagCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opts
	var watch bool
	var every time.Duration
	f := cli.NewFlags("kjobctl lag", lagUsage)
	f.SetOutput(stdout)
	o.register(f)
	f.Bool(&watch, "watch", "", false, "refresh until interrupted")
	f.Duration(&every, "interval", "", 2*time.Second, "refresh interval of --watch")
	if err := f.Parse(args); err != nil {
		return err
	}
	if every <= 0 {
		return fmt.Errorf("lag: --interval %v: must be positive: %w", every, errUsage)
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	in, err := o.inspector(nil)
	if err != nil {
		return err
	}
	defer in.Close()
	noGroup := func() error {
		return fmt.Errorf("lag: group %q does not exist (no members, no committed offsets on %s); check --group: %w", o.group, o.topic, errNotFound)
	}
	if !watch {
		cctx, cancel := o.ctx(ctx)
		defer cancel()
		g, err := in.Group(cctx)
		switch {
		case errors.Is(err, inspect.ErrNoGroup):
			return noGroup()
		case err != nil:
			return fmt.Errorf("lag: %w", err)
		}
		g.AddTimeLag(in.TimeLag(cctx))
		if o.output == "json" {
			err = writeJSON(stdout, g)
		} else {
			err = renderLag(stdout, g)
		}
		if err == nil && g.TimeLagError != "" {
			err = fmt.Errorf("lag: the time lag could not be read (the offsets were): %s", g.TimeLagError)
		}
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	tty := isTerminal(stdout)
	enc := json.NewEncoder(stdout) // one compact object per line
	for first := true; ; first = false {
		cctx, cancel := o.ctx(ctx)
		g, err := in.Group(cctx)
		if err == nil {
			g.AddTimeLag(in.TimeLag(cctx))
		}
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if first && errors.Is(err, inspect.ErrNoGroup) {
			return noGroup() // most likely a typo in --group
		}
		if errors.Is(err, inspect.ErrNoGroup) {
			err = fmt.Errorf("group %q does not exist any more (no members, no committed offsets)", o.group)
		}
		at := nowFunc().UTC()
		if o.output == "json" {
			fr := lagFrame{At: at, Group: g}
			if err != nil {
				fr = lagFrame{At: at, Error: err.Error()}
			}
			if err := enc.Encode(fr); err != nil {
				return err
			}
		} else {
			switch {
			case tty:
				fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear screen
			case !first:
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "%s  (every %v, Ctrl-C stops)\n", at.Format(time.RFC3339), every)
			if err != nil {
				fmt.Fprintf(stdout, "error: %s (still watching)\n", safe(err.Error()))
			} else {
				renderLag(stdout, g)
			}
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
	fmt.Fprintf(tw, "PARTITION\tCOMMITTED\tEND\tLAG\tOWNER\tTIME LAG\tWINDOWS\tOLDEST UNSETTLED\n")
	var worst *inspect.PartitionTimeLag
	windows, atLeast := 0, false
	for _, p := range g.Partitions {
		owner := p.Owner
		if owner == "" {
			owner = "-"
		}
		age, n, oldest := "?", "?", "?"
		if t := p.TimeLag; t != nil {
			age, n, oldest = fmtAge(t.Age, t.AtLeast), fmt.Sprint(t.Windows), "-"
			if t.AtLeast {
				n = "≥" + n
			}
			if t.Oldest != nil {
				oldest = safe(t.Oldest.ID) + " (" + safe(t.Oldest.Status) + ")"
			}
			if worst == nil || t.Age > worst.Age {
				worst = t
			}
			windows += t.Windows
			atLeast = atLeast || t.AtLeast
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", p.Partition, fmtOffset(p.Committed), p.End, p.Lag, safe(owner), age, n, oldest)
	}
	age, n := "?", "?"
	if worst != nil {
		age, n = fmtAge(worst.Age, atLeast), fmt.Sprint(windows)
		if atLeast {
			n = "≥" + n
		}
	}
	fmt.Fprintf(tw, "TOTAL\t\t\t%d\t\t%s\t%s\t\n", g.TotalLag, age, n)
	if err := tw.Flush(); err != nil {
		return err
	}
	if g.TimeLagError != "" {
		_, err := fmt.Fprintf(w, "Time lag: unknown (%s)\n", safe(g.TimeLagError))
		return err
	}
	return nil
}

// fmtAge formats a time lag to the second ("0s", "42s", "3m5s"), "≥"
// before it when it is a lower bound.
func fmtAge(d time.Duration, atLeast bool) string {
	s := d.Round(time.Second).String()
	if atLeast {
		s = "≥" + s
	}
	return s
}
