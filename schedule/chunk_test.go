package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// describe prints what a parse gave: every job's fields (the zone by
// name), its next windows from a fixed instant, or the error text.
func describe(f *File, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, j := range f.Jobs {
		loc := j.Location
		j2 := *j
		j2.Location, j2.sched = nil, nil
		fmt.Fprintf(&b, "%+v zone=%s next=", j2, loc)
		at := time.Date(2026, 10, 24, 23, 0, 0, 0, time.UTC)
		for range 3 {
			at = j.Next(at)
			fmt.Fprintf(&b, "%s ", at.Format(time.RFC3339))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// checkChunked compares the chunked parse of data, in chunks of 1, 2 and
// 3 jobs, with the whole parse. It reports whether the chunked parse
// took the file.
func checkChunked(t *testing.T, data []byte) bool {
	t.Helper()
	want := describe(parseWhole("f.yaml", data))
	took := false
	for _, per := range []int{1, 2, 3} {
		f, err, ok := parseChunked("f.yaml", data, per)
		if !ok {
			continue
		}
		took = true
		if got := describe(f, err); got != want {
			t.Fatalf("chunks of %d differ from the whole parse of\n%s\n got: %s\nwant: %s", per, data, got, want)
		}
	}
	return took
}

// chunkedFiles are files in the shape parseChunked splits, with anchors
// in the header, merges, comments, errors and CRLF line ends.
var chunkedFiles = []string{
	validFile,
	`x-defaults: &defaults
  handler: http
  timeout: 30s
  payload: {url: "http://127.0.0.1:1/"}
x-retry: &retry {retries: {max_attempts: 7}}
# a comment
jobs:   # the list
  # first
  - name: a
    schedule: "@hourly"
    <<: [*defaults, *retry]

  - name: b
    schedule: "@daily"
    <<: *defaults
    timeout: 5s
# at column 0
  - name: c
    schedule: "@every 1m"
    handler: log
    payload: *retry
  - {name: d, schedule: "@every 2m", handler: log}
`,
	// Problems in the header, reported once, and in jobs, each with its
	// own line; duplicates across chunks.
	`x-bad: &bad {handler: log, handler: http, <<: 5}
x-bad: 1
jobs:
- name: a
  schedule: "@every 1s"
  <<: *bad
- name: a
  schedule: "@every 1s"
  <<: *bad
- name: b
  schedule: "61 * * * *"
  handler: log
  timeout: soon
-
- name: c
  schedule: "@every 1s"
  <<: *bad
  payload: {x: *bad}
- name: a
  schedule: "@every 1s"
  handler: "Bad Name"
`,
	// The fields of runtime-created jobs, good and bad.
	`jobs:
  - name: a
    schedule: "@hourly"
    start: "2026-03-29T02:30:00"
    end: 2026-04-01T00:00:00Z
    jitter: 90s
    timezone: Europe/Berlin
    handler: log
  - name: b
    at: "2026-10-25T02:30:00"
    handler: log
  - name: c
    at: soon
    schedule: "@daily"
    jitter: -1s
    handler: log
  - name: d
    schedule: "@daily"
    start: "2027-01-01T00:00:00"
    end: "2026-01-01T00:00:00"
    handler: log
`,
	"jobs:\r\n  - name: a\r\n    schedule: \"@every 1s\"\r\n    handler: log\r\n  - name: b\r\n    schedule: \"@daily\"\r\n    handler: log\r\n",
	"jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n    payload: |\n      - not an item\n  - name: b\n    schedule: \"@daily\"\n    handler: log",
}

func TestChunkedParseMatchesWhole(t *testing.T) {
	for _, src := range chunkedFiles {
		if !checkChunked(t, []byte(src)) {
			t.Errorf("the chunked parse declined\n%s", src)
		}
	}
	// Shapes it must leave to the whole parse.
	for _, src := range []string{
		"jobs:\n  - &a {name: a, schedule: \"@daily\", handler: log}\n  - *a\n",
		"jobs: [{name: a, schedule: \"@daily\", handler: log}]\n",
		"jobs:\n  - name: a\n    schedule: \"@daily\"\n    handler: log\nother: 1\n",
		"other: 1\njobs:\n  - name: a\n",
		"jobs:\n  - name: a\n---\njobs:\n  - name: b\n",
		"jobs:\n  - name: \"a\n  - b\"\n    handler: log\n",
		"jobs:\n",
	} {
		checkChunked(t, []byte(src))
		if _, _, ok := parseChunked("f.yaml", []byte(src), 1); ok {
			t.Errorf("the chunked parse took\n%s", src)
		}
	}
}

func FuzzChunkedParse(f *testing.F) {
	for _, src := range chunkedFiles {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkChunked(t, b) })
}

// The jobs of one file share one parsed schedule per distinct spec and
// zone, and one copy of each repeated string, whichever way the file is
// decoded; jobs of different zones or specs do not.
func TestJobsShareParsedSchedules(t *testing.T) {
	var y strings.Builder
	y.WriteString("jobs:\n")
	for i, c := range []struct{ spec, zone string }{{"0 * * * *", "Europe/Berlin"}, {"0 * * * *", "Europe/Berlin"}, {"0 * * * *", "UTC"}, {"5 * * * *", "Europe/Berlin"}, {"0 * * * *", "Europe/Berlin"}} {
		fmt.Fprintf(&y, "  - name: job-%d\n    schedule: %q\n    timezone: %s\n    handler: noop\n", i, c.spec, c.zone)
	}
	data := []byte(y.String())
	whole, err := parseWhole("f.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	chunked, err, ok := parseChunked("f.yaml", data, 2)
	if err != nil || !ok {
		t.Fatalf("parseChunked: %v, %v", err, ok)
	}
	for name, f := range map[string]*File{"whole": whole, "chunked": chunked} {
		j := f.Jobs
		if j[0].sched != j[1].sched || j[0].sched != j[4].sched {
			t.Errorf("%s: jobs of one spec and zone hold separate schedules", name)
		}
		if j[0].sched == j[2].sched || j[0].sched == j[3].sched {
			t.Errorf("%s: jobs of different zones or specs share a schedule", name)
		}
		if unsafe.StringData(j[0].Spec) != unsafe.StringData(j[4].Spec) || unsafe.StringData(j[0].Handler) != unsafe.StringData(j[4].Handler) ||
			unsafe.StringData(j[0].Timezone) != unsafe.StringData(j[4].Timezone) {
			t.Errorf("%s: jobs hold separate copies of a repeated spec, handler or zone", name)
		}
		for i, jb := range j {
			s, err := jb.Schedule()
			if err != nil {
				t.Fatal(err)
			}
			want, _ := ParseSpec(jb.Spec, jb.Location)
			from := time.Date(2026, 11, 28, 10, 30, 0, 0, time.UTC)
			if got, w := s.Next(from), want.Next(from); !got.Equal(w) {
				t.Errorf("%s: job %d: next %v, want %v", name, i, got, w)
			}
		}
	}
}
