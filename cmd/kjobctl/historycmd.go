package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/store/dedupe"
)

const historyUsage = `kjobctl history: the past runs of JOB, newest first: every settlement the
workers recorded (done, failed attempt, dead-lettered, skipped, superseded,
fenced, abandoned, stepped-down, skipped (replay): moved past by a replay,
--outcome skipped-replay) with its window, the version of the job's
schedule that produced the window (VER; "-" when the window carries none:
published by an operator's tool or by a kjob from before schedules had
versions), trigger, when it finished, how long it ran, attempt, fencing
token, worker and error (cut to 512 bytes), then the success rate and the
p50/p95 duration of the runs shown. -o json names the version
schedule_version (absent when there is none).

The history lives in Redis, per job (kjob:{<namespace>:<job>}:runs): the
runs of the job's last 1,000 settled batches (one run each when windows are
settled one at a time), none older than the workers' --retention.

--since takes an RFC 3339 time or a duration back from now (24h);
--outcome takes outcomes separated by commas (failed,dead-lettered).

Usage: kjobctl history JOB [--limit N] [--since T|D] [--outcome O,...] [flags]`

// historyResult is history -o json.
type historyResult struct {
	Job   string          `json:"job"`
	Runs  []historyRun    `json:"runs"`
	Stats dedupe.RunStats `json:"stats"`
}

type historyRun struct {
	dedupe.Run
	DurationSeconds float64 `json:"duration_seconds"`
}

func historyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opts
	var since, outcome string
	var limit int
	f := cli.NewFlags("kjobctl history", historyUsage)
	f.SetOutput(stdout)
	o.register(f)
	f.Int(&limit, "limit", "", 20, fmt.Sprintf("most runs to show (1 to %d)", dedupe.MaxRunsLimit))
	f.String(&since, "since", "", "", "only runs that finished at or after this time (RFC 3339) or this long ago (e.g. 24h)")
	f.String(&outcome, "outcome", "", "", "only runs with these outcomes, comma-separated: "+strings.Join(dedupe.RunOutcomes(), ", "))
	pos, err := f.ParseInterspersed(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("history: want exactly one JOB argument, got %d: %w", len(pos), errUsage)
	}
	job := pos[0]
	q := dedupe.RunQuery{Limit: limit}
	if limit < 1 || limit > dedupe.MaxRunsLimit {
		return fmt.Errorf("history: --limit %d: want 1 to %d: %w", limit, dedupe.MaxRunsLimit, errUsage)
	}
	if since != "" {
		if d, err := parseDuration(since); err == nil {
			q.Since = nowFunc().Add(-d)
		} else if q.Since, err = parseTime("history: --since", since); err != nil {
			return fmt.Errorf("history: --since %q: want an RFC 3339 time such as 2026-11-22T10:00:00Z, or a duration such as 24h: %w", since, errUsage)
		}
	}
	if outcome != "" {
		for _, s := range strings.Split(outcome, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(dedupe.RunOutcomes(), s) {
				return fmt.Errorf("history: --outcome %q: %q is not an outcome; want some of %s: %w", outcome, s, strings.Join(dedupe.RunOutcomes(), ", "), errUsage)
			}
			q.Outcomes = append(q.Outcomes, s)
		}
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	store, err := o.store()
	if err != nil {
		return err
	}
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	runs, err := store.Runs(cctx, job, q)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if len(runs) == 0 {
		// Nothing recorded: say so, and if the job is not in the job list
		// either, that it is most likely a typo.
		_, err := o.job(ctx, "history", job, stderr)
		switch {
		case errors.Is(err, errNotFound):
			return err
		case err != nil:
			fmt.Fprintf(stderr, "kjobctl: warning: cannot tell whether job %s exists: %s\n", safe(job), safe(err.Error()))
		}
	}
	res := historyResult{Job: job, Runs: make([]historyRun, len(runs)), Stats: dedupe.SummarizeRuns(runs)}
	for i, r := range runs {
		res.Runs[i] = historyRun{Run: r, DurationSeconds: r.Duration().Seconds()}
	}
	if o.output == "json" {
		return writeJSON(stdout, res)
	}
	return renderHistory(stdout, &res)
}

func renderHistory(w io.Writer, h *historyResult) error {
	if len(h.Runs) == 0 {
		_, err := fmt.Fprintf(w, "No runs of %s recorded (for the filters given).\n", safe(h.Job))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FINISHED\tWINDOW\tVER\tTRIGGER\tOUTCOME\tDURATION\tATTEMPT\tTOKEN\tWORKER\tERROR")
	for _, r := range h.Runs {
		ver, attempt, token := "-", "-", "-"
		if r.ScheduleVersion > 0 {
			ver = fmt.Sprint(r.ScheduleVersion)
		}
		if r.Attempt > 0 {
			attempt = fmt.Sprint(r.Attempt)
		}
		if r.Token > 0 {
			token = fmt.Sprint(r.Token)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Finished.UTC().Format("2006-01-02T15:04:05.000Z"), safe(r.WindowID), ver, orDash(r.Trigger),
			safe(runOutcome(r.Outcome)), fmtDuration(r.Duration()), attempt, token, orDash(r.Worker), oneLine(r.Error, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	st := h.Stats
	var counts []string
	for _, o := range dedupe.RunOutcomes() {
		if n := st.ByOutcome[o]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, o))
		}
	}
	fmt.Fprintf(w, "%s of %s, newest first: %s.", plural(st.Runs, "run"), safe(h.Job), strings.Join(counts, ", "))
	if st.Attempts > 0 {
		fmt.Fprintf(w, " Success rate %.1f%% (%d of %d attempts).", 100*st.SuccessRate, st.ByOutcome[dedupe.RunDone], st.Attempts)
	}
	if st.ByOutcome[dedupe.RunDone] > 0 {
		fmt.Fprintf(w, " Duration of done runs: p50 %s, p95 %s.", fmtDuration(st.P50), fmtDuration(st.P95))
	}
	_, err := fmt.Fprintln(w)
	return err
}

// fmtDuration shows a run's duration to a useful precision: µs below a
// millisecond, ms below a second, then seconds with two decimals, then
// Go's h/m/s.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// runOutcome is how history shows a run's outcome: a window a replay moved
// past as "skipped (replay)", as status shows it.
func runOutcome(o string) string {
	if o == dedupe.RunSkippedReplay {
		return dedupe.ReplaySkipLabel
	}
	return o
}
