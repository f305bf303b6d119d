package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/ops/operator"
)

const replayUsage = `kjobctl replay: move the workers' committed offsets back (or forward), like
kafka-consumer-groups --reset-offsets, while the workers run: each partition's
owner seeks and commits itself (through the control topic); a group without
members gets its offsets committed directly. Dry run unless --execute.

Which windows run again: replay reads the replayed range. Windows that are
done are skipped by dedupe when re-delivered; windows that failed or were
dead-lettered have their records cleared so they run again; windows never
run run. --rerun clears the records of every window in the range, so done
ones run again too (--job limits that to one job's windows).

Offsets and time: --to-offset and --shift-by count offsets, and on kjob's
transactional windows topic transaction commit markers take offsets too:
a window published in a transaction of its own takes 2 offsets, so
--shift-by -10 replays about 5 windows. REPLAYED counts the windows
(records) that are delivered again, markers left out. --to-datetime and
--by-duration pick the first record whose timestamp is at or after the
time; a record's timestamp is when it was published (not its window's
start), so backfilled and caught-up windows are selected by when they were
published.

A --to-datetime in the future is refused unless --allow-future: no record
is published after it, so it would skip every window not yet run.

Forward: a target ahead of the committed offset skips the records in
between. Windows among them that are not settled (never claimed, failed and
waiting for a retry, or running: a long handler holds the commit back) are
listed in the plan (job, window, state), and --execute refuses unless
--skip-unsettled: then they are settled as "skipped (replay)" (shown by
kjobctl history and status, counted in kjob_executions_total with outcome
skipped-replay), a running handler is cancelled after the workers' grace,
and none of them ever runs.

Usage: kjobctl replay --group G (--to-datetime T | --by-duration D | --to-offset N |
       --shift-by N | --to-earliest | --to-latest) [--partition P] [--job NAME]
       [--rerun] [--skip-unsettled] [--execute] [flags]`

func replayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		o                                    opts
		toDatetime, byDuration, toOffset     string
		shiftBy, partition                   string
		toEarliest, toLatest, rerun, execute bool
		allowFuture, skipUnsettled           bool
		job                                  string
		ackTimeout                           time.Duration
	)
	f := cli.NewFlags("kjobctl replay", replayUsage)
	f.SetOutput(stdout)
	o.register(f)
	f.String(&toDatetime, "to-datetime", "", "", "reset to the first record published at or after this time (RFC 3339; a time in the future needs --allow-future)")
	f.Bool(&allowFuture, "allow-future", "", false, "allow --to-datetime in the future: the offsets move to the log end, skipping every window not yet run, like --to-latest")
	f.String(&byDuration, "by-duration", "", "", "reset to the first record published at or after now minus this duration (e.g. 2h, or ISO 8601 PT2H)")
	f.String(&toOffset, "to-offset", "", "", "reset to this offset")
	f.String(&shiftBy, "shift-by", "", "", "move the committed offset by N offsets (negative rewinds; transaction markers count)")
	f.Bool(&toEarliest, "to-earliest", "", false, "reset to the log start")
	f.Bool(&toLatest, "to-latest", "", false, "reset to the log end (skip what is not yet processed)")
	f.String(&partition, "partition", "", "", "only these partitions (comma-separated); default all")
	f.String(&job, "job", "", "", "only the partition holding this job's windows; with --rerun only its windows run again")
	f.Bool(&rerun, "rerun", "", false, "also clear the done markers of the replayed windows so done windows run again")
	f.Bool(&skipUnsettled, "skip-unsettled", "", false, "allow moving forward past windows that are not settled: they are settled as skipped (replay) and never run")
	f.Bool(&execute, "execute", "", false, "apply the reset (without it: dry run)")
	f.Duration(&ackTimeout, "ack-timeout", "", 60*time.Second, "how long to wait for the owning workers to apply the seek")
	if err := f.Parse(args); err != nil {
		return err
	}
	spec := operator.ReplaySpec{Group: o.group, Job: job, Rerun: rerun, SkipUnsettled: skipUnsettled}
	var modes []string
	if toDatetime != "" {
		t, err := parseTime("replay: --to-datetime", toDatetime)
		if err != nil {
			return err
		}
		if now := nowFunc(); t.After(now) && !allowFuture {
			return fmt.Errorf("replay: --to-datetime %s is in the future (now %s): no record is published at or after it, so the offsets would move to the log end "+
				"and every window not yet run would be skipped; replay from a past time, use --to-latest if skipping is what you want, or add --allow-future: %w",
				fmtTime(t), fmtTime(now), errUsage)
		}
		spec.Mode, spec.Time = operator.ToDatetime, t
		modes = append(modes, "--to-datetime")
	}
	if byDuration != "" {
		d, err := parseDuration(byDuration)
		if err != nil {
			return fmt.Errorf("replay: --by-duration %q: want a positive duration such as 2h30m or PT2H30M: %w", byDuration, errUsage)
		}
		spec.Mode, spec.Duration = operator.ByDuration, d
		modes = append(modes, "--by-duration")
	}
	if toOffset != "" {
		n, err := strconv.ParseInt(toOffset, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("replay: --to-offset %q: want an offset >= 0: %w", toOffset, errUsage)
		}
		spec.Mode, spec.Offset = operator.ToOffset, n
		modes = append(modes, "--to-offset")
	}
	if shiftBy != "" {
		n, err := strconv.ParseInt(shiftBy, 10, 64)
		if err != nil {
			return fmt.Errorf("replay: --shift-by %q: want a whole number such as -10: %w", shiftBy, errUsage)
		}
		spec.Mode, spec.Offset = operator.ShiftBy, n
		modes = append(modes, "--shift-by")
	}
	if toEarliest {
		spec.Mode = operator.ToEarliest
		modes = append(modes, "--to-earliest")
	}
	if toLatest {
		spec.Mode = operator.ToLatest
		modes = append(modes, "--to-latest")
	}
	if len(modes) != 1 {
		return fmt.Errorf("replay: want exactly one of --to-datetime, --by-duration, --to-offset, --shift-by, --to-earliest, --to-latest; got %d (%s): %w", len(modes), strings.Join(modes, " "), errUsage)
	}
	if partition != "" {
		for _, s := range strings.Split(partition, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || n < 0 {
				return fmt.Errorf("replay: --partition %q: want partition numbers such as 0 or 0,2: %w", partition, errUsage)
			}
			spec.Partitions = append(spec.Partitions, int32(n))
		}
	}
	if err := o.setup(); err != nil {
		return err
	}
	spec.Group = o.group // setup derives it from the namespace when --group is not set
	defer o.close()
	if job != "" {
		if _, err := o.job(ctx, "replay", job, stderr); err != nil {
			return err
		}
	}
	r, err := o.replayer("kjobctl "+kjob.DefaultID(), ackTimeout)
	if err != nil {
		return err
	}
	defer r.Close()
	op, err := o.operatorWith(nil, nil, r)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, o.timeout+ackTimeout)
	defer cancel()
	plan, err := op.PlanReplay(cctx, spec)
	if err != nil {
		return replayErr(err)
	}
	if !execute {
		if err := renderReplay(stdout, o.output, plan, false); err != nil {
			return err
		}
		return fmt.Errorf("replay: %w", errDryRun)
	}
	if err := op.ExecuteReplay(cctx, plan); err != nil {
		if errors.Is(err, operator.ErrUnsettled) {
			_ = renderReplay(stdout, o.output, plan, false)
		}
		return replayErr(err)
	}
	return renderReplay(stdout, o.output, plan, true)
}

// replaySpecFlags are the flags of replay's ReplaySpec fields: the
// planner's errors about a field name it by its flag.
var replaySpecFlags = map[string]string{
	"ReplaySpec.Group": "group", "ReplaySpec.Job": "job", "ReplaySpec.Partitions": "partition",
	"ReplaySpec.SkipUnsettled": "skip-unsettled",
}

// replayErr gives a replay's error its exit code, naming the flags it is
// about.
func replayErr(err error) error {
	err = cli.InFlags(err, replaySpecFlags)
	switch {
	case errors.Is(err, operator.ErrNoGroup):
		return fmt.Errorf("%w; check --group: %w", err, errNotFound)
	case errors.Is(err, operator.ErrNoTopic):
		return fmt.Errorf("%w; check --topic", err)
	case errors.Is(err, operator.ErrNoPartition):
		return fmt.Errorf("%w: %w", err, errNotFound)
	case errors.Is(err, operator.ErrRebalancing):
		return fmt.Errorf("%w: %w", err, errConflict)
	case errors.Is(err, operator.ErrInvalidSpec), errors.Is(err, operator.ErrUnsettled):
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	return err
}

// parseDuration accepts Go durations (2h30m) and the ISO 8601 form
// kafka-consumer-groups takes (PT2H30M, P1DT2H).
func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return 0, errors.New("not positive")
		}
		return d, nil
	}
	u := strings.ToUpper(s)
	if !strings.HasPrefix(u, "P") {
		return 0, errors.New("not a duration")
	}
	u = u[1:]
	var d time.Duration
	datePart, timePart, _ := strings.Cut(u, "T")
	if datePart != "" {
		n, ok := strings.CutSuffix(datePart, "D")
		v, err := strconv.Atoi(n)
		if !ok || err != nil {
			return 0, errors.New("bad days")
		}
		d += time.Duration(v) * 24 * time.Hour
	}
	if timePart != "" {
		td, err := time.ParseDuration(strings.ToLower(timePart))
		if err != nil {
			return 0, err
		}
		d += td
	}
	if d <= 0 {
		return 0, errors.New("not positive")
	}
	return d, nil
}

func renderReplay(w io.Writer, output string, plan *operator.ReplayPlan, executed bool) error {
	if output == "json" {
		return writeJSON(w, struct {
			Executed bool `json:"executed"`
			*operator.ReplayPlan
		}{executed, plan})
	}
	how := "through the control topic: each partition's owner seeks and commits"
	if !plan.Online {
		how = "group has no members: offsets are committed directly"
	}
	fmt.Fprintf(w, "Group %s on %s (%s): %s\n", safe(plan.Group), safe(plan.Topic), safe(plan.State), how)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if executed {
		fmt.Fprintln(tw, "PARTITION\tOWNER\tBEFORE\tTARGET\tAFTER\tREPLAYED\tLOG START\tLOG END\tAPPLIED BY\tNOTE")
	} else {
		fmt.Fprintln(tw, "PARTITION\tOWNER\tBEFORE\tTARGET\tREPLAYED\tLOG START\tLOG END\tNOTE")
	}
	for _, p := range plan.Partitions {
		owner := p.Owner
		if owner == "" {
			owner = "-"
		}
		note := ""
		if p.Clamped != "" {
			note = "clamped to " + p.Clamped
		}
		if p.Unsettled > 0 {
			if note != "" {
				note += "; "
			}
			note += fmt.Sprintf("skips %s", plural(p.Unsettled, "unsettled window"))
			if executed {
				note += fmt.Sprintf(", %d settled as skipped (replay)", p.Skipped)
			}
		}
		if executed {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", p.Partition, safe(owner), fmtOffset(p.Before), p.Target, fmtOffset(p.After), p.Replayed, p.Start, p.End, safe(p.AppliedBy), note)
		} else {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", p.Partition, safe(owner), fmtOffset(p.Before), p.Target, p.Replayed, p.Start, p.End, note)
		}
	}
	tw.Flush()
	if plan.Spec.Job != "" && len(plan.Partitions) == 1 {
		fmt.Fprintf(w, "Note: offsets are per partition, not per job. Job %s's windows are on partition %d;", safe(plan.Spec.Job), plan.Partitions[0].Partition)
		if len(plan.OtherJobs) > 0 {
			fmt.Fprintf(w, " the replayed range also holds windows of %s, which are re-delivered and skipped by dedupe if done.\n", safe(strings.Join(plan.OtherJobs, ", ")))
		} else {
			fmt.Fprintln(w, " no other job's windows are in the replayed range.")
		}
	}
	verb := "will be cleared"
	if executed {
		verb = "were cleared"
	}
	switch {
	case plan.Spec.Rerun && len(plan.Rerun) == 0:
		fmt.Fprintln(w, "No window lies in the replayed range, so no done marker is cleared.")
	case plan.Spec.Rerun:
		fmt.Fprintf(w, "Done markers of %d replayed windows %s, so they run again:\n", len(plan.Rerun), verb)
		listIDs(w, plan.Rerun)
	default:
		if len(plan.Retry) > 0 {
			fmt.Fprintf(w, "Records of %s in the range %s, so they run again:\n", plural(len(plan.Retry), "failed or dead-lettered window"), verb)
			for i, r := range plan.Retry {
				if i == maxListed {
					fmt.Fprintf(w, "  ... and %d more (-o json lists them all)\n", len(plan.Retry)-maxListed)
					break
				}
				fmt.Fprintf(w, "  %s (%s)\n", safe(r.ID), safe(r.Status))
			}
		}
		fmt.Fprintln(w, "Windows already done are skipped when re-delivered (add --rerun to run them again).")
	}
	if len(plan.Skip) > 0 {
		switch {
		case executed:
			n := 0
			for _, p := range plan.Partitions {
				n += p.Skipped
			}
			if n == len(plan.Skip) {
				fmt.Fprintf(w, "%s moved past before they were settled %s settled as skipped (replay); they never run:\n", plural(len(plan.Skip), "window"), were(len(plan.Skip)))
			} else {
				fmt.Fprintf(w, "%d of the %s moved past before they were settled %s settled as skipped (replay) and never run; the others were settled meanwhile (a handler that finished within the grace is done; see kjobctl history):\n",
					n, plural(len(plan.Skip), "window"), were(n))
			}
		case plan.Spec.SkipUnsettled:
			fmt.Fprintf(w, "%s moved past are not settled: with --execute they are settled as skipped (replay) and never run (a running handler is cancelled after the workers' grace):\n", plural(len(plan.Skip), "window"))
		default:
			fmt.Fprintf(w, "%s moved past are not settled: they would never be delivered again. --execute refuses unless --skip-unsettled (they are then settled as skipped (replay) and never run):\n", plural(len(plan.Skip), "window"))
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  JOB\tWINDOW\tSTATE\tPARTITION\tOFFSET")
		for i, s := range plan.Skip {
			if i == maxListed {
				fmt.Fprintf(tw, "  ... and %d more (-o json lists them all)\n", len(plan.Skip)-maxListed)
				break
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", safe(s.Job), safe(s.ID), safe(s.State), s.Partition, s.Offset)
		}
		tw.Flush()
	}
	if executed && plan.Online {
		fmt.Fprintln(w, "AFTER is the committed offset now; the running workers may have moved it past TARGET already.")
	}
	return nil
}

func were(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}
