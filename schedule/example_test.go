package schedule_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kjob/kjob/schedule"
)

func ExampleParse() {
	f, err := schedule.Parse("schedules.yaml", []byte(`jobs:
  - name: nightly-report
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    handler: http
    payload: {url: "http://127.0.0.1:8080/hook"}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	j := f.Jobs[0]
	fmt.Println(j.Name, j.Handler, string(j.Payload), j.Timeout, j.Retries.MaxAttempts)
	// 02:30 does not exist in Berlin on 2026-03-29: that window runs once,
	// right when the clocks jump to 03:00.
	at := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC)
	for range 3 {
		at = j.Next(at)
		fmt.Println(at.Format(time.RFC3339), at.In(j.Location).Format("15:04 MST"))
	}
	// Output:
	// nightly-report http {"url":"http://127.0.0.1:8080/hook"} 1m0s 3
	// 2026-03-28T01:30:00Z 02:30 CET
	// 2026-03-29T01:00:00Z 03:00 CEST
	// 2026-03-30T00:30:00Z 02:30 CEST
}

func ExampleParse_errors() {
	_, err := schedule.Parse("schedules.yaml", []byte(`jobs:
  - name: report
    schedule: "30 2 * * *"
    timezone: Europe/Berln
    handler: http
    timeout: 30
`))
	fmt.Println(err)
	// Output:
	// schedules.yaml:4: jobs[0].timezone: "Europe/Berln": unknown time zone; use an IANA name such as "Europe/Berlin"
	// schedules.yaml:6: jobs[0].timeout: "30": want a duration such as "30s", "5m" or "1h30m"
}

// A wildcard-hour spec follows elapsed time: in the hour repeated when New
// York falls back, "30 * * * *" runs twice, an hour apart.
func ExampleParseSpec() {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := schedule.ParseSpec("30 * * * *", ny)
	if err != nil {
		fmt.Println(err)
		return
	}
	at := time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC)
	for range 4 {
		at = s.Next(at)
		fmt.Println(at.Format(time.RFC3339), at.In(ny).Format("15:04 MST"))
	}
	// Output:
	// 2026-11-01T04:30:00Z 00:30 EDT
	// 2026-11-01T05:30:00Z 01:30 EDT
	// 2026-11-01T06:30:00Z 01:30 EST
	// 2026-11-01T07:30:00Z 02:30 EST
}

// Windows lists the windows a producer missed, for catch-up.
func ExampleJob_Windows() {
	f, err := schedule.Parse("schedules.yaml", []byte(`jobs:
  - name: tick
    schedule: "@every 10s"
    handler: log
    catchup: 1m
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	j := f.Jobs[0]
	lastPublished := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := lastPublished.Add(35 * time.Second)
	for _, w := range j.Windows(lastPublished, now, 10) {
		fmt.Println(w.Format(time.RFC3339))
	}
	// Output:
	// 2026-11-22T10:00:10Z
	// 2026-11-22T10:00:20Z
	// 2026-11-22T10:00:30Z
}

// A job's policy is what every window of it carries to the workers: its
// timeout, retries and overlap policy (here: skip a window that comes up
// while the previous one still runs).
func ExampleParse_policy() {
	f, err := schedule.Parse("schedules.yaml", []byte(`jobs:
  - name: export
    schedule: "*/5 * * * *"
    handler: http
    timeout: 30m
    overlap: skip
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	j := f.Jobs[0]
	fmt.Println(j.Timeout, j.Retries.MaxAttempts, j.Overlap)
	// Output:
	// 30m0s 3 skip
}

// A spec created at runtime (through the API or the dashboard) is
// validated exactly as the same entry of a schedules file; Job.ToSpec
// gives its canonical form, the one the schedules topic stores.
func ExampleSpec_Job() {
	spec := schedule.Spec{
		Name:     "tenant-4711-report",
		Schedule: "0 8 * * 1",
		Timezone: "Europe/Berlin",
		Start:    "2026-12-01T00:00:00",
		Jitter:   "5m",
		Handler:  "http",
		Payload:  []byte(`{"url": "http://127.0.0.1:8080/hook", "tenant": 4711}`),
	}
	j, err := spec.Job("api")
	if err != nil {
		fmt.Println(err)
		return
	}
	w := j.Next(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	fmt.Println("first window:", w.Format(time.RFC3339), "published", j.Offset(w).Round(time.Second), "later")
	canon, _ := json.Marshal(j.ToSpec())
	fmt.Println(string(canon))

	spec.Schedule, spec.At, spec.Timezone = "", "2026-12-01T08:00", "Europe/Berln"
	_, err = spec.Job("api")
	fmt.Println(err)
	// Output:
	// first window: 2026-12-07T07:00:00Z published 3m22s later
	// {"name":"tenant-4711-report","schedule":"0 8 * * 1","start":"2026-12-01T00:00:00+01:00","jitter":"5m0s","timezone":"Europe/Berlin","handler":"http","payload":{"tenant":4711,"url":"http://127.0.0.1:8080/hook"}}
	// api: timezone: "Europe/Berln": unknown time zone; use an IANA name such as "Europe/Berlin"
	// api: at: "2026-12-01T08:00": want a time such as "2026-12-01T08:00:00" (read in the job's timezone) or "2026-12-01T08:00:00+01:00" (RFC 3339 with an offset)
	// api: start: "2026-12-01T00:00:00": bounds a recurring schedule; a job with at runs once at that instant: remove start
}
