package schedule

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// problems unwraps a joined error into its *ValidationError values.
func problems(t *testing.T, err error) []*ValidationError {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []*ValidationError
	for _, e := range errs {
		var ve *ValidationError
		if !errors.As(e, &ve) {
			t.Fatalf("%v (%T) is not a *ValidationError", e, e)
		}
		out = append(out, ve)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// base is a valid spec the error cases change one thing of.
func base() Spec { return Spec{Name: "report", Schedule: "30 2 * * *", Handler: "http"} }

// specCases are bad specs, each with the one problem it must give.
var specCases = []struct {
	name                string
	edit                func(*Spec)
	field, value, inMsg string
}{
	{"schedule and at", func(s *Spec) { s.At = "2026-12-01T08:00:00" }, "at", "2026-12-01T08:00:00", "either schedule (recurring) or at (once), not both"},
	{"neither schedule nor at", func(s *Spec) { s.Schedule = "" }, "schedule", "", `or at: an instant such as "2026-12-01T08:00:00"`},
	{"bad at", func(s *Spec) { s.Schedule, s.At = "", "tomorrow" }, "at", "tomorrow", `want a time such as "2026-12-01T08:00:00" (read in the job's timezone)`},
	{"at without seconds", func(s *Spec) { s.Schedule, s.At = "", "2026-12-01T08:00" }, "at", "2026-12-01T08:00", "RFC 3339 with an offset"},
	{"at with start", func(s *Spec) { s.Schedule, s.At, s.Start = "", "2026-12-01T08:00:00", "2026-11-01T00:00:00" }, "start", "2026-11-01T00:00:00", "a job with at runs once at that instant: remove start"},
	{"at with end", func(s *Spec) { s.Schedule, s.At, s.End = "", "2026-12-01T08:00:00", "2027-01-01T00:00:00Z" }, "end", "2027-01-01T00:00:00Z", "remove end"},
	{"bad start", func(s *Spec) { s.Start = "2026-13-01T00:00:00" }, "start", "2026-13-01T00:00:00", "want a time such as"},
	{"bad end", func(s *Spec) { s.End = "1/2/2027" }, "end", "1/2/2027", "want a time such as"},
	{"end before start", func(s *Spec) { s.Start, s.End = "2027-01-01T00:00:00", "2026-12-31T23:00:00Z" }, "end", "2026-12-31T23:00:00Z", "is before start (2027-01-01T00:00:00); no window could run: move end after start or remove one"},
	{"jitter malformed", func(s *Spec) { s.Jitter = "5" }, "jitter", "5", `want a duration such as "30s"`},
	{"jitter negative", func(s *Spec) { s.Jitter = "-1s" }, "jitter", "-1s", "must not be negative (0 means no jitter)"},
	{"jitter too large", func(s *Spec) { s.Jitter = "25h" }, "jitter", "25h", "must be at most 24h0m0s"},
	{"name with control character", func(s *Spec) { s.Name = "re\nport" }, "name", "re\nport", "contains the control character U+000A at byte 2"},
	{"name with escape", func(s *Spec) { s.Name = "report\x1b[31m" }, "name", "report\x1b[31m", "control character U+001B"},
	{"name empty", func(s *Spec) { s.Name = "" }, "name", "", `required: a unique name such as "nightly-report"`},
	{"name too long", func(s *Spec) { s.Name = strings.Repeat("a", 64) }, "name", strings.Repeat("a", 64), "is 64 characters long; want lower-case letters"},
	{"name upper case", func(s *Spec) { s.Name = "Report" }, "name", "Report", "want lower-case letters, digits and '-'"},
	{"bad timezone", func(s *Spec) { s.Timezone = "Europe/Berln" }, "timezone", "Europe/Berln", "unknown time zone"},
	{"bad retries", func(s *Spec) { s.Retries = &RetrySpec{MaxAttempts: 101} }, "retries.max_attempts", "101", "want a whole number from 1 to 100"},
	{"max_backoff below backoff", func(s *Spec) { s.Retries = &RetrySpec{Backoff: "2m"} }, "retries.max_backoff", "1m0s", "must be at least backoff (2m0s)"},
	{"max_concurrent without allow", func(s *Spec) { s.MaxConcurrent = 4 }, "max_concurrent", "4", "applies only to overlap: allow"},
	{"payload too large", func(s *Spec) {
		s.Payload = json.RawMessage(`{"a":"` + strings.Repeat("x", MaxPayloadBytes) + `"}`)
	}, "payload", "", "is 65544 bytes as JSON, more than the limit of 65536"},
	{"payload key twice", func(s *Spec) { s.Payload = json.RawMessage(`{"a":1,"a":2}`) }, "payload.a", "", "key given twice"},
}

func TestSpecJobErrors(t *testing.T) {
	for _, c := range specCases {
		t.Run(c.name, func(t *testing.T) {
			s := base()
			c.edit(&s)
			j, err := s.Job("api")
			ps := problems(t, err)
			if j != nil || len(ps) != 1 {
				t.Fatalf("Job = %v, %v; want one problem", j, err)
			}
			p := ps[0]
			if p.File != "api" || p.Line != 0 || p.Field != c.field || p.Value != c.value || !strings.Contains(p.Msg, c.inMsg) {
				t.Errorf("got %#v\nwant field %q value %q msg containing %q", p, c.field, c.value, c.inMsg)
			}
		})
	}
}

func TestSpecJobPayloadNotObject(t *testing.T) {
	for _, pl := range []string{`[1]`, `"x"`, `3`, `{"a":`} {
		s := base()
		s.Payload = json.RawMessage(pl)
		ps := problems(t, func() error { _, err := s.Job("api"); return err }())
		if len(ps) != 1 || ps[0].Field != "payload" || !strings.Contains(ps[0].Msg, "want a JSON object") {
			t.Errorf("payload %s: %v", pl, ps)
		}
	}
	for _, pl := range []string{``, `null`, ` {} `} {
		s := base()
		s.Payload = json.RawMessage(pl)
		if j, err := s.Job("api"); err != nil || string(j.Payload) != "{}" {
			t.Errorf("payload %q: %v, %v; want {}", pl, j, err)
		}
	}
}

// TestSpecJobAsFile holds Spec.Job to its promise: a spec gives the same
// problems as the same entry in a schedules file. The entry is the spec's
// JSON (JSON is YAML).
func TestSpecJobAsFile(t *testing.T) {
	extra := []func(*Spec){
		func(s *Spec) { s.Name, s.Handler, s.Timezone = "", "", "Mars/Base" }, // several problems at once
		func(s *Spec) { s.Timeout, s.Catchup, s.Overlap = "0s", "-1m", "often" },
		func(s *Spec) { s.Schedule = "61 * * * *" },
		func(s *Spec) { s.Retries = &RetrySpec{Backoff: "0s", MaxBackoff: "25h"} },
		func(s *Spec) { s.Payload = json.RawMessage(`{"n":1e400}`) }, // accepted by both, as the string "1e400"
	}
	edits := extra
	for _, c := range specCases {
		edits = append(edits, c.edit)
	}
	for i, edit := range edits {
		s := base()
		edit(&s)
		_, err := s.Job("f.yaml")
		got := problems(t, err)
		entry, jerr := json.Marshal(s)
		if jerr != nil {
			t.Fatal(jerr)
		}
		_, ferr := Parse("f.yaml", []byte(`{"jobs": [`+string(entry)+`]}`))
		want := problems(t, ferr)
		if len(got) != len(want) {
			t.Errorf("case %d %s:\n spec: %v\n file: %v", i, entry, err, ferr)
			continue
		}
		for k := range got {
			w := *want[k]
			w.Line = 0
			w.Field = strings.TrimPrefix(w.Field, "jobs[0].")
			w.Msg = strings.Replace(w.Msg, " (first at line 1)", "", 1) // a spec has no lines
			if *got[k] != w {
				t.Errorf("case %d %s:\n spec: %#v\n file: %#v", i, entry, *got[k], w)
			}
		}
	}
}

// full is a spec with every field set, in canonical form.
func full() Spec {
	return Spec{
		Name: "tenant-4711", Schedule: "0 8 * * 1", Start: "2026-03-01T00:00:00+01:00", End: "2026-11-01T00:00:00+01:00",
		Jitter: "5m0s", Timezone: "Europe/Berlin", Handler: "http", Payload: json.RawMessage(`{"a":[1,2.5,"x&y"],"z":{"b":null,"c":true}}`),
		Timeout: "30s", Catchup: "10m0s", Retries: &RetrySpec{MaxAttempts: 5, Backoff: "2s", MaxBackoff: "5m0s"},
		Overlap: "allow", MaxConcurrent: 4, Enabled: ptr(false),
	}
}

func TestSpecRoundTrip(t *testing.T) {
	oneShot := Spec{Name: "once", At: "2026-12-01T08:00:00+01:00", Timezone: "Europe/Berlin", Handler: "log"}
	for _, c := range []struct {
		name     string
		in, want Spec
	}{
		{"full", full(), full()},
		{"one-shot", oneShot, oneShot},
		{"minimal", base(), base()},
		{"defaults spelled out", Spec{Name: "report", Schedule: "30 2 * * *", Handler: "http", Timezone: "UTC", Timeout: "1m", Catchup: "0s", Jitter: "0s",
			Retries: &RetrySpec{MaxAttempts: 3, Backoff: "1s", MaxBackoff: "60s"}, Overlap: "queue", Enabled: ptr(true), Payload: json.RawMessage(` { } `)}, base()},
		{"written loosely", Spec{Name: "x", Schedule: "@daily", Handler: "h", Timezone: "America/New_York", Start: "2026-03-08T02:30:00", End: "2026-11-01T06:30:00Z",
			Jitter: "90s", Timeout: "1h30m", Payload: json.RawMessage(`{ "z" : 1, "a" : {"y":2,"b":1} }`)},
			Spec{Name: "x", Schedule: "@daily", Handler: "h", Timezone: "America/New_York", Start: "2026-03-08T03:00:00-04:00", End: "2026-11-01T01:30:00-05:00",
				Jitter: "1m30s", Timeout: "1h30m0s", Payload: json.RawMessage(`{"a":{"b":1,"y":2},"z":1}`)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, err := c.in.Job("api")
			if err != nil {
				t.Fatal(err)
			}
			got := j.ToSpec()
			if !reflect.DeepEqual(got, c.want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(c.want)
				t.Fatalf("ToSpec\n got %s\nwant %s", g, w)
			}
			j2, err := got.Job("api")
			if err != nil {
				t.Fatal(err)
			}
			if again := j2.ToSpec(); !reflect.DeepEqual(again, got) {
				t.Errorf("not stable: %+v then %+v", got, again)
			}
			if j.File != "api" || j.Line != 0 {
				t.Errorf("File, Line = %q, %d", j.File, j.Line)
			}
			// The same job from a file has the same canonical spec.
			entry, _ := json.Marshal(c.in)
			f, err := Parse("f.yaml", []byte(`{"jobs": [`+string(entry)+`]}`))
			if err != nil {
				t.Fatal(err)
			}
			if fs := f.Jobs[0].ToSpec(); !reflect.DeepEqual(fs, got) {
				t.Errorf("from file %+v, from spec %+v", fs, got)
			}
		})
	}
}

func TestSpecJobFields(t *testing.T) {
	j, err := full().Job("api")
	if err != nil {
		t.Fatal(err)
	}
	if j.Name != "tenant-4711" || j.Spec != "0 8 * * 1" || j.Jitter != 5*time.Minute || j.Timeout != 30*time.Second ||
		j.Catchup != 10*time.Minute || j.Retries != (RetryPolicy{5, 2 * time.Second, 5 * time.Minute}) ||
		j.Overlap != OverlapAllow || j.MaxConcurrent != 4 || j.Enabled || !j.At.IsZero() ||
		!j.Start.Equal(time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC)) || !j.End.Equal(time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC)) {
		t.Errorf("job = %+v", j)
	}
	if string(j.Payload) != `{"a":[1,2.5,"x&y"],"z":{"b":null,"c":true}}` {
		t.Errorf("payload %s", j.Payload)
	}
}

func TestFileNewFields(t *testing.T) {
	f, err := Parse("f.yaml", []byte(`jobs:
  - name: once
    at: "2026-12-01T08:00:00"
    timezone: Europe/Berlin
    handler: log
  - name: bounded
    schedule: "@hourly"
    start: 2026-12-01T00:00:00Z
    end: "2026-12-01T03:00:00+01:00"
    jitter: 30s
    handler: log
`))
	if err != nil {
		t.Fatal(err)
	}
	o, b := f.Jobs[0], f.Jobs[1]
	if !o.At.Equal(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)) || o.Spec != "" {
		t.Errorf("once = %+v", o)
	}
	if got := b.Windows(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), 0); len(got) != 3 ||
		!got[0].Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || !got[2].Equal(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)) || b.Jitter != 30*time.Second {
		t.Errorf("bounded windows %v, jitter %v", got, b.Jitter)
	}
}

func TestNextBoundsAcrossDST(t *testing.T) {
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name string
		spec Spec
		from string
		want []string // every window after from, then none
	}{
		{"start and end around spring forward", Spec{Schedule: "30 2 * * *", Timezone: "Europe/Berlin", Start: "2026-03-28T00:00:00", End: "2026-03-30T02:30:00"},
			"2026-03-01T00:00:00Z", []string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"start inside the gap", Spec{Schedule: "*/30 * * * *", Timezone: "Europe/Berlin", Start: "2026-03-29T02:15:00", End: "2026-03-29T04:00:00"},
			"2026-03-29T00:00:00Z", []string{"2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z", "2026-03-29T02:00:00Z"}},
		{"end in the repeated hour (first occurrence)", Spec{Schedule: "0,30 * * * *", Timezone: "Europe/Berlin", Start: "2026-10-25T02:00:00", End: "2026-10-25T02:30:00"},
			"2026-10-24T00:00:00Z", []string{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z"}},
		{"end with an offset (second occurrence)", Spec{Schedule: "0,30 * * * *", Timezone: "Europe/Berlin", Start: "2026-10-25T02:00:00+02:00", End: "2026-10-25T02:30:00+01:00"},
			"2026-10-24T00:00:00Z", []string{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z"}},
		{"at in the gap", Spec{At: "2026-03-29T02:30:00", Timezone: "Europe/Berlin"}, "2026-03-01T00:00:00Z", []string{"2026-03-29T01:00:00Z"}},
		{"at in the repeated hour", Spec{At: "2026-10-25T02:30:00", Timezone: "Europe/Berlin"}, "2026-03-01T00:00:00Z", []string{"2026-10-25T00:30:00Z"}},
		{"at already past", Spec{At: "2026-10-25T02:30:00Z"}, "2026-10-25T02:30:00Z", nil},
		{"from after start", Spec{Schedule: "@daily", Start: "2026-01-01T00:00:00Z", End: "2026-01-03T00:00:00Z"}, "2026-01-01T12:00:00Z",
			[]string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Name, c.spec.Handler = "j", "h"
			j, err := c.spec.Job("api")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for w := j.Next(utc(c.from)); !w.IsZero() && len(got) < 10; w = j.Next(w) {
				got = append(got, w.Format(time.RFC3339))
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("Next from %s:\n got %v\nwant %v", c.from, got, c.want)
			}
			var ws []string
			for _, w := range j.Windows(utc(c.from), utc("2027-01-01T00:00:00Z"), 0) {
				ws = append(ws, w.Format(time.RFC3339))
			}
			if strings.Join(ws, " ") != strings.Join(c.want, " ") {
				t.Errorf("Windows = %v, want %v", ws, c.want)
			}
		})
	}
}

func TestOffset(t *testing.T) {
	j := &Job{Name: "tenant-4711", Jitter: 5 * time.Minute}
	same := &Job{Name: "tenant-4711", Jitter: 5 * time.Minute, Timeout: time.Hour} // other fields do not matter
	other := &Job{Name: "tenant-4712", Jitter: 5 * time.Minute}
	nominal := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	// Replays of any release must agree: the offset is pinned.
	if got, want := j.Offset(nominal), time.Duration(152673787800); got != want {
		t.Errorf("Offset = %v (%d), want %v: changing the hash moves every jittered window", got, int64(got), want)
	}
	differ := 0
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		w := nominal.Add(time.Duration(i) * time.Minute)
		o := j.Offset(w)
		if o < 0 || o >= j.Jitter {
			t.Fatalf("Offset(%v) = %v, want in [0, %v)", w, o, j.Jitter)
		}
		if o != j.Offset(w.In(mustLoc(t, "Asia/Tokyo"))) || o != same.Offset(w) {
			t.Fatalf("Offset(%v) not deterministic", w)
		}
		if o != other.Offset(w) {
			differ++
		}
		seen[o/time.Minute] = true
	}
	if differ < 990 || len(seen) != 5 {
		t.Errorf("offsets poorly spread: %d of 1000 differ between two jobs, minute buckets %v", differ, seen)
	}
	// Capped by the time to the next window: "@every 1m" with 5m of
	// jitter publishes each window within its minute.
	minutely, err := Spec{Name: "tenant-4711", Schedule: "@every 1m", Jitter: "5m", Handler: "h"}.Job("api")
	if err != nil {
		t.Fatal(err)
	}
	capped := 0
	for i := range 1000 {
		w := nominal.Add(time.Duration(i) * time.Minute)
		if o := minutely.Offset(w); o < 0 || o >= time.Minute {
			t.Fatalf("Offset(%v) = %v with windows a minute apart", w, o)
		} else if o != j.Offset(w) {
			capped++
		}
	}
	if capped < 700 {
		t.Errorf("only %d of 1000 offsets capped", capped)
	}
	if o := (&Job{Name: "x"}).Offset(nominal); o != 0 {
		t.Errorf("no jitter: Offset = %v", o)
	}
}

func TestCheckName(t *testing.T) {
	for _, c := range []struct{ name, inMsg string }{
		{"", "required"},
		{"   ", "required"},
		{"a\tb", "control character U+0009"},
		{"a\x00", "control character U+0000"},
		{"a\u200bb", "control character U+200B"}, // zero-width space: invisible, not printable
		{"a\xffb", "not valid UTF-8"},
		{strings.Repeat("x", 64), "is 64 characters long"},
		{"Report", "want lower-case"},
		{"-a", "want lower-case"},
		{"a b", "want lower-case"},
	} {
		err := CheckName(c.name)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "name" || ve.Value != c.name || !strings.Contains(ve.Msg, c.inMsg) || !strings.Contains(ve.Msg, "want") && c.inMsg != "required" {
			t.Errorf("CheckName(%q) = %#v, want a name error containing %q", c.name, err, c.inMsg)
		}
	}
	for _, ok := range []string{"a", "report", "tenant-4711", strings.Repeat("x", 63)} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q) = %v", ok, err)
		}
	}
	if got := CheckName("a\nb").Error(); got != `name: "a\nb": contains the control character U+000A at byte 1 (a pasted newline or escape?); want lower-case letters, digits and '-', at most 63 characters, starting and ending with a letter or digit (like a DNS label)` {
		t.Errorf("Error() = %s", got)
	}
}

// TestDocExample parses the schedules file shown in the package doc, so
// that the example a user copies is valid.
func TestDocExample(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var yml []string
	for _, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "//\tjobs:") || len(yml) > 0 && strings.HasPrefix(l, "//\t ") {
			yml = append(yml, strings.TrimPrefix(l, "//\t"))
		} else if len(yml) > 0 {
			break
		}
	}
	f, err := Parse("doc.go", []byte(strings.Join(yml, "\n")))
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(yml, "\n"))
	}
	if len(f.Jobs) != 2 || f.Jobs[0].Jitter != 30*time.Second || f.Jobs[1].At.IsZero() {
		t.Errorf("jobs = %+v", f.Jobs)
	}
}
