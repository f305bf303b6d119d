package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/schedule"
)

const scheduleUsage = `kjobctl schedule check: validate a schedules file as the producer does and
print the next fire times of each job, in its time zone and in UTC. A fire
time moved by daylight saving is marked: "DST gap" when the wall time does
not exist that day (spring forward: it fires right after the jump), "DST
repeat" when the wall time occurs twice (fall back: a fixed time fires once,
at the first occurrence).

Usage: kjobctl schedule check [flags] FILE`

const scheduleTopUsage = `kjobctl schedule: the deployment's schedules (the schedules topic) and schedules files.

Usage:
  kjobctl schedule check [flags] FILE   validate FILE as the producer does and print each job's next fire times
  kjobctl schedule apply -f FILE [--prune] [--note N] [--execute]   plan, then apply, a file to the schedules topic
  kjobctl schedule list                 the topic's jobs with version and who set it
  kjobctl schedule get JOB              JOB's current spec and version
  kjobctl schedule history JOB          JOB's versions: op, actor, source, time, note, diff
  kjobctl schedule delete JOB [--note N] [--execute]
  kjobctl schedule revert JOB --to-version N [--note N] [--execute]
  kjobctl schedule pause JOB --note N   stop its windows (versioned and audited)
  kjobctl schedule resume JOB [--note N]

Run "kjobctl schedule check --help" for its flags.`

func scheduleCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprintln(stdout, scheduleTopUsage)
		return nil
	}
	if len(args) > 0 {
		switch args[0] {
		case "apply":
			return scheduleApply(ctx, args[1:], stdout, stderr)
		case "get":
			return scheduleGet(ctx, args[1:], stdout, stderr)
		case "list":
			return scheduleList(ctx, args[1:], stdout, stderr)
		case "history":
			return scheduleHistory(ctx, args[1:], stdout, stderr)
		case "delete":
			return scheduleDelete(ctx, args[1:], stdout, stderr)
		case "revert":
			return scheduleRevert(ctx, args[1:], stdout, stderr)
		case "pause", "resume":
			return schedulePauseResume(ctx, args[0], args[1:], stdout)
		}
	}
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("schedule: want the subcommand \"check\", apply, list, get, history, delete, revert, pause or resume (kjobctl schedule --help lists them): %w", errUsage)
	}
	var n int
	var from, output string
	f := cli.NewFlags("kjobctl schedule check", scheduleUsage)
	f.SetOutput(stdout)
	f.Int(&n, "next", "", 3, "how many fire times to print per job")
	f.String(&from, "from", "", "", "print fire times after this time (RFC 3339; default now)")
	f.String(&output, "output", "", "table", "output format: table or json")
	f.String(&output, "o", "", "table", "short for --output")
	pos, err := f.ParseInterspersed(args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("schedule check: want exactly one FILE argument, got %d: %w", len(pos), errUsage)
	}
	if n < 1 {
		return fmt.Errorf("schedule check: --next %d: want at least 1: %w", n, errUsage)
	}
	if output != "table" && output != "json" {
		return fmt.Errorf("--output %q: want table or json: %w", output, errUsage)
	}
	now := nowFunc()
	if from != "" {
		if now, err = parseTime("schedule check: --from", from); err != nil {
			return err
		}
	}
	file, err := schedule.Load(pos[0])
	if err != nil {
		return err
	}
	type fire struct {
		Local string `json:"local"`
		UTC   string `json:"utc"`
		DST   string `json:"dst,omitempty"`
	}
	type jobOut struct {
		Name     string `json:"name"`
		Schedule string `json:"schedule"`
		Timezone string `json:"timezone"`
		Handler  string `json:"handler"`
		Overlap  string `json:"overlap"`
		Enabled  bool   `json:"enabled"`
		Next     []fire `json:"next"`
	}
	var jobs []jobOut
	for _, j := range file.Jobs {
		tz := j.Timezone
		if tz == "" {
			tz = "UTC"
		}
		jo := jobOut{Name: j.Name, Schedule: j.Spec, Timezone: tz, Handler: j.Handler, Overlap: string(j.Overlap), Enabled: j.Enabled, Next: []fire{}}
		t := now
		for range n {
			if t = j.Next(t); t.IsZero() {
				break
			}
			jo.Next = append(jo.Next, fire{Local: t.In(j.Location).Format("2006-01-02 15:04:05 MST"), UTC: t.UTC().Format(time.RFC3339), DST: dstMark(j, t)})
		}
		jobs = append(jobs, jo)
	}
	if output == "json" {
		return writeJSON(stdout, map[string]any{"file": file.Path, "valid": true, "jobs": jobs})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSCHEDULE\tTIME ZONE\tHANDLER\tOVERLAP\tNEXT (LOCAL)\tNEXT (UTC)\tDST")
	for _, j := range jobs {
		name, spec, tz, h, ov := j.Name, j.Schedule, j.Timezone, j.Handler, j.Overlap
		if !j.Enabled {
			h += " (disabled)"
		}
		for i, fr := range j.Next {
			if i > 0 {
				name, spec, tz, h, ov = "", "", "", "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, spec, tz, h, ov, fr.Local, fr.UTC, fr.DST)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s, valid\n", file.Path, plural(len(file.Jobs), "job"))
	return nil
}

// dstMark says how daylight saving moved fire time t of j: "DST gap" if its
// wall time does not match the spec (the spec's time was skipped by spring
// forward and the window fires right after the jump), "DST repeat" if its
// wall time occurs twice that day. "" otherwise, and for @every specs,
// which follow elapsed time.
func dstMark(j *schedule.Job, t time.Time) string {
	if strings.HasPrefix(j.Spec, "@every") || j.Location == nil || j.Location == time.UTC {
		return ""
	}
	wall := naiveWall(t, j.Location)
	// The same spec in UTC matches naive wall-clock times exactly.
	if plain, err := schedule.ParseSpec(j.Spec, time.UTC); err == nil {
		if !plain.Next(wall.Add(-time.Nanosecond)).Equal(wall) {
			return "DST gap: " + nominal(j, plain, t) + " skipped, fires after the jump"
		}
	}
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if naiveWall(t.Add(d), j.Location).Equal(wall) || naiveWall(t.Add(-d), j.Location).Equal(wall) {
			return "DST repeat: wall time occurs twice, fires once"
		}
	}
	return ""
}

// nominal is the skipped wall time the spec asked for: the last match of
// the plain spec before the fire time's wall reading.
func nominal(j *schedule.Job, plain schedule.Schedule, t time.Time) string {
	wall := naiveWall(t, j.Location)
	var last time.Time
	for w := plain.Next(wall.Add(-3 * time.Hour)); !w.IsZero() && w.Before(wall); w = plain.Next(w) {
		last = w
	}
	if last.IsZero() {
		return "wall time"
	}
	return last.Format("15:04")
}

// naiveWall returns t's wall-clock reading in loc as a UTC time.
func naiveWall(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}
