package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/kjob/kjob/internal/cli"
	"github.com/kjob/kjob/pkg/schedule"
)

const scheduleUsage = `kjobctl schedule check: validate a schedules file as the producer does and
print the next fire times of each job, in its time zone and in UTC.

Usage: kjobctl schedule check [flags] FILE`

func scheduleCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("schedule: want the subcommand \"check\" (kjobctl schedule check FILE): %w", errUsage)
	}
	var n int
	f := cli.NewFlags("schedule check", scheduleUsage)
	f.SetOutput(stderr)
	f.Int(&n, "next", "", 3, "how many fire times to print per job")
	if err := f.Parse(args[1:]); err != nil {
		return err
	}
	if len(f.Args()) != 1 {
		return fmt.Errorf("schedule check: want exactly one FILE argument, got %d: %w", len(f.Args()), errUsage)
	}
	file, err := schedule.Load(f.Args()[0])
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSCHEDULE\tTIME ZONE\tHANDLER\tNEXT (LOCAL)\tNEXT (UTC)")
	now := time.Now()
	for _, j := range file.Jobs {
		t := now
		loc := j.Location
		for i := 0; i < n; i++ {
			t = j.Next(t)
			if t.IsZero() {
				break
			}
			name, spec, tz, h := j.Name, j.Spec, j.Timezone, j.Handler
			if tz == "" {
				tz = "UTC"
			}
			if !j.Enabled {
				h += " (disabled)"
			}
			if i > 0 {
				name, spec, tz, h = "", "", "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, spec, tz, h, t.In(loc).Format("2006-01-02 15:04:05 MST"), t.UTC().Format(time.RFC3339))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d jobs, valid\n", file.Path, len(file.Jobs))
	return nil
}
