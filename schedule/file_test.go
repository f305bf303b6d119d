package schedule

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
)

const validFile = `# kjob schedules
jobs:
  - name: report
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    handler: http
    payload: {url: "http://127.0.0.1:8080/hook?a=1&b=2", n: 2, ratio: 0.5, on: true, none: null, list: [1, "two"], nested: {z: 1, a: 2}, day: 2026-03-29}
    timeout: 30s
    catchup: 10m
    retries: {max_attempts: 5, backoff: 2s, max_backoff: 1m}
    overlap: skip
    enabled: true
  - name: tick
    schedule: "@every 10s"
    handler: log
  - name: paused
    schedule: "0 * * * *"
    handler: log
    enabled: false
    timezone: ""
`

func TestParseValid(t *testing.T) {
	f, err := Parse("s.yaml", []byte(validFile))
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != "s.yaml" || len(f.Jobs) != 3 {
		t.Fatalf("file = %+v", f)
	}
	r, tk, p := f.Jobs[0], f.Jobs[1], f.Jobs[2]

	berlin := mustLoc(t, "Europe/Berlin")
	if r.Name != "report" || r.Spec != "30 2 * * *" || r.Timezone != "Europe/Berlin" || r.Location.String() != berlin.String() ||
		r.Handler != "http" || r.Timeout != 30*time.Second || r.Catchup != 10*time.Minute ||
		r.Retries != (RetryPolicy{MaxAttempts: 5, Backoff: 2 * time.Second, MaxBackoff: time.Minute}) ||
		r.Overlap != OverlapSkip || !r.Enabled || r.File != "s.yaml" || r.Line != 3 {
		t.Errorf("report = %+v", r)
	}
	// Key order as written, no HTML escaping, YAML types mapped to JSON,
	// a timestamp kept as written.
	wantPayload := `{"url":"http://127.0.0.1:8080/hook?a=1&b=2","n":2,"ratio":0.5,"on":true,"none":null,"list":[1,"two"],"nested":{"z":1,"a":2},"day":"2026-03-29"}`
	if string(r.Payload) != wantPayload {
		t.Errorf("payload\n got %s\nwant %s", r.Payload, wantPayload)
	}
	if !json.Valid(r.Payload) {
		t.Error("payload is not valid JSON")
	}
	if got := r.Next(utc("2026-03-28T12:00:00Z")); !got.Equal(utc("2026-03-29T01:00:00Z")) {
		t.Errorf("report.Next = %v", got)
	}

	// Defaults.
	if tk.Timezone != "" || tk.Location != time.UTC || tk.Timeout != DefaultTimeout || tk.Catchup != 0 ||
		tk.Retries != (RetryPolicy{MaxAttempts: DefaultMaxAttempts, Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff}) ||
		!tk.Enabled || string(tk.Payload) != "{}" || tk.Line != 13 || tk.Overlap != OverlapQueue {
		t.Errorf("tick = %+v", tk)
	}
	if tk.Retries != (RetryPolicy{3, time.Second, time.Minute}) || DefaultTimeout != time.Minute {
		t.Errorf("defaults changed: %+v %v", tk.Retries, DefaultTimeout)
	}
	if got := tk.Next(utc("2026-11-22T10:00:05Z")); !got.Equal(utc("2026-11-22T10:00:10Z")) {
		t.Errorf("tick.Next = %v", got)
	}

	if p.Name != "paused" || p.Enabled || p.Timezone != "" || p.Location != time.UTC || p.Line != 16 {
		t.Errorf("paused = %+v", p)
	}
}

// max_concurrent is read for an allow job (written before or after
// overlap) and carried in every window's policy; left out it is 0, the
// worker's default.
func TestParseMaxConcurrent(t *testing.T) {
	src := `jobs:
  - name: fan-out
    schedule: "@every 1s"
    handler: log
    max_concurrent: 4
    overlap: allow
  - name: par
    schedule: "@every 1s"
    handler: log
    overlap: allow
`
	f, err := Parse("c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	a, b := f.Jobs[0], f.Jobs[1]
	if a.MaxConcurrent != 4 || recordPolicy(a).MaxConcurrent != 4 || recordPolicy(a).Overlap != jobmsg.OverlapAllow {
		t.Errorf("fan-out: MaxConcurrent %d, policy %+v; want 4", a.MaxConcurrent, recordPolicy(a))
	}
	if b.MaxConcurrent != 0 || recordPolicy(b).MaxConcurrent != 0 {
		t.Errorf("par: MaxConcurrent %d, policy %+v; want 0 (the worker's default)", b.MaxConcurrent, recordPolicy(b))
	}
}

func TestParseAnchorsAndMergeKeys(t *testing.T) {
	src := `x-defaults: &defaults
  handler: http
  timeout: 30s
  payload: {url: "http://127.0.0.1:1/"}
x-retry: &retry {retries: {max_attempts: 7}}
x-latest: &latest {overlap: latest}
jobs:
  - name: a
    schedule: "@hourly"
    <<: [*defaults, *retry, *latest]
  - name: b
    schedule: "@daily"
    <<: [*defaults, *latest]
    timeout: 5s
    overlap: replace
  - &c
    name: c
    schedule: "@every 1m"
    handler: log
    payload: &p {k: v}
  - name: d
    schedule: "@every 2m"
    handler: log
    payload: *p
`
	f, err := Parse("m.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c, d := f.Jobs[0], f.Jobs[1], f.Jobs[2], f.Jobs[3]
	if a.Handler != "http" || a.Timeout != 30*time.Second || a.Retries.MaxAttempts != 7 || string(a.Payload) != `{"url":"http://127.0.0.1:1/"}` ||
		a.Overlap != OverlapLatest {
		t.Errorf("a = %+v", a)
	}
	if b.Handler != "http" || b.Timeout != 5*time.Second || b.Retries.MaxAttempts != 3 || b.Overlap != OverlapReplace {
		t.Errorf("b = %+v (an explicit key must win over a merged one)", b)
	}
	if c.Name != "c" || string(c.Payload) != `{"k":"v"}` || string(d.Payload) != `{"k":"v"}` || c.Overlap != OverlapQueue {
		t.Errorf("c = %+v, d = %+v", c, d)
	}
}

func TestParseErrors(t *testing.T) {
	// job returns a valid one-job file with extra lines for the job,
	// starting at line 5.
	job := func(extra string) string {
		return "jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n" + extra
	}
	specHelp := "want 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or one of @every D, @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually"
	tests := []struct{ name, yaml, want string }{
		// The file as a whole.
		{"empty file", "", `f.yaml:1: jobs: file is empty; want a top-level "jobs:" list`},
		{"only comments", "# nothing yet\n", `f.yaml:1: jobs: file is empty; want a top-level "jobs:" list`},
		{"invalid yaml", "jobs:\n  - name: a\n    schedule: [\n", `f.yaml:3: invalid YAML: did not find expected node content`},
		{"invalid yaml without a line", "\x01", `f.yaml: invalid YAML: control characters are not allowed`},
		{"two documents", job("---\njobs: []\n"), `f.yaml:5: a second YAML document (after "---"); put all jobs in one "jobs:" list`},
		{"top level not a mapping", "- name: a\n", `f.yaml:1: want a mapping with a top-level "jobs:" list`},
		{"no jobs key", "job: []\n",
			"f.yaml:1: job: unknown top-level key; valid keys: jobs, and x-... keys to hold YAML anchors\n" +
				`f.yaml:1: jobs: missing; want a top-level "jobs:" list`},
		{"empty jobs list", "jobs: []\n", `f.yaml:1: jobs: empty; define at least one job`},
		{"empty jobs key", "jobs:\n", `f.yaml:1: jobs: empty; define at least one job`},
		{"jobs not a list", "jobs: {a: 1}\n", `f.yaml:1: jobs: want a list of jobs, each starting with "- name: ..."`},
		{"job not a mapping", "jobs:\n  - report\n", `f.yaml:2: jobs[0]: "report": want a mapping with name, schedule, handler, ...`},

		// name
		{"missing name", "jobs:\n  - schedule: \"@every 1s\"\n    handler: log\n", `f.yaml:2: jobs[0].name: required: a unique name such as "nightly-report"`},
		{"empty name", "jobs:\n  - name: \"\"\n    schedule: \"@every 1s\"\n    handler: log\n", `f.yaml:2: jobs[0].name: required: a unique name such as "nightly-report"`},
		{"bad name", "jobs:\n  - name: Bad_Name\n    schedule: \"@every 1s\"\n    handler: log\n",
			`f.yaml:2: jobs[0].name: "Bad_Name": want lower-case letters, digits and '-', at most 63 characters, starting and ending with a letter or digit (like a DNS label)`},
		{"name too long", "jobs:\n  - name: " + strings.Repeat("a", 64) + "\n    schedule: \"@every 1s\"\n    handler: log\n",
			`f.yaml:2: jobs[0].name: "` + strings.Repeat("a", 64) + `": is 64 characters long; want lower-case letters, digits and '-', at most 63 characters, starting and ending with a letter or digit (like a DNS label)`},
		{"name ends with a dash", "jobs:\n  - name: a-\n    schedule: \"@every 1s\"\n    handler: log\n",
			`f.yaml:2: jobs[0].name: "a-": want lower-case letters, digits and '-', at most 63 characters, starting and ending with a letter or digit (like a DNS label)`},
		{"name not a single value", "jobs:\n  - name: [a]\n    schedule: \"@every 1s\"\n    handler: log\n", `f.yaml:2: jobs[0].name: want a single value, not a list`},
		{"duplicate names", job("  - name: b\n    schedule: \"@every 2s\"\n    handler: log\n  - name: a\n    schedule: \"@every 2s\"\n    handler: log\n"),
			`f.yaml:8: jobs[2].name: "a": duplicate job name: jobs[0] at line 2 has it too; job names must be unique`},

		// schedule
		{"missing schedule", "jobs:\n  - name: a\n    handler: log\n",
			`f.yaml:2: jobs[0].schedule: required: a cron spec such as "30 2 * * *", "*/10 * * * * *" or "@every 1m", or at: an instant such as "2026-12-01T08:00:00" for a job that runs once`},
		{"bad schedule", "jobs:\n  - name: a\n    schedule: \"61 * * * *\"\n    handler: log\n",
			`f.yaml:3: jobs[0].schedule: "61 * * * *": end of range (61) above maximum (59): 61; ` + specHelp},
		{"too many fields", "jobs:\n  - name: a\n    schedule: \"1 2 3 4 5 6 7\"\n    handler: log\n",
			`f.yaml:3: jobs[0].schedule: "1 2 3 4 5 6 7": expected 5 to 6 fields, found 7: [1 2 3 4 5 6 7]; ` + specHelp},
		{"tz prefix", "jobs:\n  - name: a\n    schedule: \"TZ=UTC 0 0 * * *\"\n    handler: log\n",
			`f.yaml:3: jobs[0].schedule: "TZ=UTC 0 0 * * *": time zone prefixes are not supported in the spec; use the timezone field; ` + specHelp},
		{"every too short", "jobs:\n  - name: a\n    schedule: \"@every 10ms\"\n    handler: log\n",
			`f.yaml:3: jobs[0].schedule: "@every 10ms": @every 10ms: want a whole number of seconds, at least 1s`},
		{"every not a duration", "jobs:\n  - name: a\n    schedule: \"@every often\"\n    handler: log\n",
			`f.yaml:3: jobs[0].schedule: "@every often": @every: "often" is not a duration such as "10s" or "5m"`},

		// timezone
		{"bad timezone", job("    timezone: Europe/Berln\n"),
			`f.yaml:5: jobs[0].timezone: "Europe/Berln": unknown time zone; use an IANA name such as "Europe/Berlin"`},
		{"local timezone", job("    timezone: Local\n"),
			`f.yaml:5: jobs[0].timezone: "Local": the machine's local zone differs between machines; use an IANA name such as "Europe/Berlin", or leave timezone out for UTC`},

		// handler
		{"missing handler", "jobs:\n  - name: a\n    schedule: \"@every 1s\"\n",
			`f.yaml:2: jobs[0].handler: required: the name of a handler registered in the worker, such as "http"`},
		{"bad handler", "jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: Web Hook\n",
			`f.yaml:4: jobs[0].handler: "Web Hook": want lower-case letters, digits, '-', '.' and '_', at most 128 characters, starting and ending with a letter or digit`},

		// payload
		{"payload a list", job("    payload: [1, 2]\n"),
			`f.yaml:5: jobs[0].payload: want a mapping such as {url: "http://..."}: the handler gets it as a JSON object`},
		{"payload a string", job("    payload: hello\n"),
			`f.yaml:5: jobs[0].payload: "hello": want a mapping such as {url: "http://..."}: the handler gets it as a JSON object`},
		{"payload NaN", job("    payload:\n      ratio: .nan\n"),
			`f.yaml:6: jobs[0].payload.ratio: ".nan": JSON has no NaN or infinity; quote it to pass a string`},
		{"payload key given twice", job("    payload: {a: 1, a: 2}\n"),
			`f.yaml:5: jobs[0].payload.a: key given twice (first at line 5); remove one`},
		{"payload refers to itself", job("    payload: &p {a: *p}\n"),
			`f.yaml:5: jobs[0].payload: nested more than 32 levels deep (does an alias refer to its own anchor?)`},
		{"payload too large", job("    payload: {a: \"" + strings.Repeat("x", MaxPayloadBytes) + "\"}\n"),
			`f.yaml:5: jobs[0].payload: is 65544 bytes as JSON, more than the limit of 65536; pass a reference to the data instead`},

		// timeout, catchup
		{"bad timeout", job("    timeout: soon\n"), `f.yaml:5: jobs[0].timeout: "soon": want a duration such as "30s", "5m" or "1h30m"`},
		{"timeout without unit", job("    timeout: 30\n"), `f.yaml:5: jobs[0].timeout: "30": want a duration such as "30s", "5m" or "1h30m"`},
		{"zero timeout", job("    timeout: 0s\n"), `f.yaml:5: jobs[0].timeout: "0s": must be positive: it bounds each attempt`},
		{"negative timeout", job("    timeout: -1s\n"), `f.yaml:5: jobs[0].timeout: "-1s": must be positive: it bounds each attempt`},
		{"timeout beyond the bound", job("    timeout: 100000h\n"),
			`f.yaml:5: jobs[0].timeout: "100000h": must be at most 24h0m0s (workers refuse a longer timeout); a handler that needs longer should start the work asynchronously and return`},
		{"timeout just beyond the bound", job("    timeout: 24h0m1s\n"),
			`f.yaml:5: jobs[0].timeout: "24h0m1s": must be at most 24h0m0s (workers refuse a longer timeout); a handler that needs longer should start the work asynchronously and return`},
		{"negative catchup", job("    catchup: -1m\n"), `f.yaml:5: jobs[0].catchup: "-1m": must not be negative (0 means never catch up)`},
		{"bad catchup", job("    catchup: forever\n"), `f.yaml:5: jobs[0].catchup: "forever": want a duration such as "30s", "5m" or "1h30m"`},

		// retries
		{"retries not a mapping", job("    retries: 3\n"),
			`f.yaml:5: jobs[0].retries: "3": want a mapping such as {max_attempts: 5, backoff: 2s, max_backoff: 1m}`},
		{"zero attempts", job("    retries: {max_attempts: 0}\n"), `f.yaml:5: jobs[0].retries.max_attempts: "0": want a whole number from 1 to 100`},
		{"attempts not a number", job("    retries: {max_attempts: many}\n"), `f.yaml:5: jobs[0].retries.max_attempts: "many": want a whole number from 1 to 100`},
		{"attempts beyond the bound", job("    retries: {max_attempts: 101}\n"), `f.yaml:5: jobs[0].retries.max_attempts: "101": want a whole number from 1 to 100`},
		{"attempts far beyond the bound", job("    retries: {max_attempts: 1000000000}\n"), `f.yaml:5: jobs[0].retries.max_attempts: "1000000000": want a whole number from 1 to 100`},
		{"backoff beyond the bound", job("    retries: {backoff: 25h, max_backoff: 25h}\n"),
			"f.yaml:5: jobs[0].retries.backoff: \"25h\": must be at most 24h0m0s (workers refuse a longer wait between attempts)\n" +
				`f.yaml:5: jobs[0].retries.max_backoff: "25h": must be at most 24h0m0s (workers refuse a longer wait between attempts)`},
		{"max_backoff beyond the bound", job("    retries:\n      max_backoff: 1000h\n"),
			`f.yaml:6: jobs[0].retries.max_backoff: "1000h": must be at most 24h0m0s (workers refuse a longer wait between attempts)`},
		{"zero backoff", job("    retries: {backoff: 0s}\n"), `f.yaml:5: jobs[0].retries.backoff: "0s": must be positive, such as "1s"`},
		{"bad max_backoff", job("    retries: {max_backoff: later}\n"), `f.yaml:5: jobs[0].retries.max_backoff: "later": want a duration such as "30s", "5m" or "1h30m"`},
		{"max_backoff below backoff", job("    retries:\n      backoff: 2m\n"),
			`f.yaml:6: jobs[0].retries.max_backoff: "1m0s": must be at least backoff (2m0s); raise max_backoff or lower backoff`},
		{"retries unknown key", job("    retries: {tries: 3}\n"),
			`f.yaml:5: jobs[0].retries.tries: unknown key; valid keys: max_attempts, backoff, max_backoff`},

		// overlap
		{"unknown overlap", job("    overlap: forbid\n"), `f.yaml:5: jobs[0].overlap: "forbid": ` + overlapHelp},
		{"overlap in capitals", job("    overlap: Queue\n"), `f.yaml:5: jobs[0].overlap: "Queue": ` + overlapHelp},
		{"empty overlap", job("    overlap: \"\"\n"), `f.yaml:5: jobs[0].overlap: ` + overlapHelp},
		{"overlap a list", job("    overlap: [skip]\n"), `f.yaml:5: jobs[0].overlap: want a single value, not a list`},
		// max_concurrent
		{"max_concurrent without allow", job("    max_concurrent: 4\n"),
			`f.yaml:5: jobs[0].max_concurrent: "4": applies only to overlap: allow (overlap queue runs one window of the job at a time); set overlap: allow or remove max_concurrent`},
		{"max_concurrent with skip", job("    overlap: skip\n    max_concurrent: 2\n"),
			`f.yaml:6: jobs[0].max_concurrent: "2": applies only to overlap: allow (overlap skip runs one window of the job at a time); set overlap: allow or remove max_concurrent`},
		{"zero max_concurrent", job("    overlap: allow\n    max_concurrent: 0\n"),
			`f.yaml:6: jobs[0].max_concurrent: "0": want a whole number from 1 to 10000: how many windows of the job one worker runs at once (leave it out for the worker's default)`},
		{"max_concurrent not a number", job("    overlap: allow\n    max_concurrent: many\n"),
			`f.yaml:6: jobs[0].max_concurrent: "many": want a whole number from 1 to 10000: how many windows of the job one worker runs at once (leave it out for the worker's default)`},
		{"max_concurrent beyond the bound", job("    overlap: allow\n    max_concurrent: 10001\n"),
			`f.yaml:6: jobs[0].max_concurrent: "10001": want a whole number from 1 to 10000: how many windows of the job one worker runs at once (leave it out for the worker's default)`},
		{"max_concurrent a list", job("    overlap: allow\n    max_concurrent: [2]\n"),
			`f.yaml:6: jobs[0].max_concurrent: want a single value, not a list`},
		{"unknown overlap through an anchor", "x-d: &d {overlap: sometimes}\njobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n    <<: *d\n",
			`f.yaml:1: jobs[0].overlap: "sometimes": ` + overlapHelp},

		// enabled
		{"enabled a quoted string", job("    enabled: \"true\"\n"), `f.yaml:5: jobs[0].enabled: "true": want true or false`},
		{"enabled yes", job("    enabled: yes\n"), `f.yaml:5: jobs[0].enabled: "yes": want true or false`},
		{"enabled a number", job("    enabled: 1\n"), `f.yaml:5: jobs[0].enabled: "1": want true or false`},

		// keys
		{"unknown key", job("    cron: x\n"),
			`f.yaml:5: jobs[0].cron: unknown key; valid keys: name, schedule, at, start, end, jitter, timezone, handler, payload, timeout, catchup, retries, overlap, max_concurrent, enabled`},
		{"key given twice", job("    handler: http\n"), `f.yaml:5: jobs[0].handler: key given twice (first at line 4); remove one`},
		{"merge of a scalar", job("    <<: 3\n"), `f.yaml:5: jobs[0].<<: "3": a merge key takes a mapping or a list of mappings, such as <<: *defaults`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("f.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("no error; jobs %+v", f.Jobs)
			}
			if f != nil {
				t.Fatal("a File returned with an error")
			}
			if err.Error() != tt.want {
				t.Fatalf("error\n got: %s\nwant: %s", err, tt.want)
			}
			for _, e := range flatten(err) {
				var ve *ValidationError
				if !errors.As(e, &ve) || ve.File != "f.yaml" {
					t.Fatalf("%v (%T) is not a *ValidationError for f.yaml", e, e)
				}
			}
		})
	}
}

// flatten unwraps an errors.Join.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestParseReportsEveryError(t *testing.T) {
	src := `jobs:
  - name: A
    schedule: x
    handler: log
  - name: b
    schedule: "@every 1s"
    handler: log
    timezone: Nowhere/Land
    retries: {max_attempts: 0, backoff: nope}
  - name: b
    schedule: "@every 1s"
    handler: log
    bogus: 1
extra: 1
`
	_, err := Parse("all.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	var got []string
	for _, e := range flatten(err) {
		ve := e.(*ValidationError)
		got = append(got, ve.Field+"@"+itoa(ve.Line))
	}
	want := []string{
		"jobs[0].name@2", "jobs[0].schedule@3",
		"jobs[1].timezone@8", "jobs[1].retries.max_attempts@9", "jobs[1].retries.backoff@9",
		"jobs[2].name@10", "jobs[2].bogus@13", "extra@14",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("errors\n got %v\nwant %v\n%v", got, want, err)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "jobs[0].name" || ve.Value != "A" || ve.Line != 2 || ve.File != "all.yaml" {
		t.Fatalf("errors.As = %+v", ve)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestValidationErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    ValidationError
		want string
	}{
		{ValidationError{"schedules.yaml", 7, "jobs[1].timezone", "Europe/Berln", `unknown time zone; use an IANA name such as "Europe/Berlin"`},
			`schedules.yaml:7: jobs[1].timezone: "Europe/Berln": unknown time zone; use an IANA name such as "Europe/Berlin"`},
		{ValidationError{"s.yaml", 3, "jobs", "", "empty"}, `s.yaml:3: jobs: empty`},
		{ValidationError{"s.yaml", 0, "", "", "invalid YAML: x"}, `s.yaml: invalid YAML: x`},
		{ValidationError{"s.yaml", 2, "jobs[0].name", "a\"b\n", "bad"}, `s.yaml:2: jobs[0].name: "a\"b\n": bad`},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "schedules.yaml")
	bad := "jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n    timezone: Europe/Berln\n"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if want := path + `:5: jobs[0].timezone: "Europe/Berln": unknown time zone; use an IANA name such as "Europe/Berlin"`; err == nil || err.Error() != want {
		t.Fatalf("Load error = %v, want %s", err, want)
	}
	ok := "jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n"
	if err := os.WriteFile(path, []byte(ok), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil || f.Path != path || len(f.Jobs) != 1 || f.Jobs[0].File != path {
		t.Fatalf("Load = %+v, %v", f, err)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(validFile))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n"))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n    overlap: latest\n    timeout: 24h\n    retries: {max_attempts: 100, backoff: 24h, max_backoff: 24h}\n"))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: \"30 2 * * *\"\n    timezone: America/New_York\n    handler: log\n    payload: {a: [1, {b: null}]}\n"))
	f.Add([]byte("x-d: &d {handler: log, retries: {max_attempts: 2}}\njobs:\n  - name: a\n    schedule: \"*/5 * * * * *\"\n    <<: *d\n"))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: \"0 8 * * 1\"\n    start: \"2026-03-29T02:30:00\"\n    end: 2027-01-01T00:00:00Z\n    jitter: 5m\n    timezone: Europe/Berlin\n    handler: log\n  - name: b\n    at: \"2026-10-25 02:30:00\"\n    timezone: Europe/Berlin\n    handler: log\n"))
	f.Add([]byte("jobs: {a: 1}"))
	f.Add([]byte("jobs:\n  - &j {name: a, <<: *j}\n"))
	f.Add([]byte("a: &a [*a, *a]\njobs: *a\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("f.yaml", b)
		if err != nil {
			if file != nil {
				t.Fatal("File and error")
			}
			for _, e := range flatten(err) {
				var ve *ValidationError
				if !errors.As(e, &ve) {
					t.Fatalf("%v is a %T, not a *ValidationError", e, e)
				}
			}
			return
		}
		if len(file.Jobs) == 0 {
			t.Fatal("no jobs and no error")
		}
		for _, j := range file.Jobs {
			if !nameRE.MatchString(j.Name) || j.Handler == "" || j.Location == nil || j.Timeout <= 0 || j.Catchup < 0 ||
				j.Retries.MaxAttempts < 1 || j.Retries.Backoff <= 0 || j.Retries.MaxBackoff < j.Retries.Backoff || !j.Overlap.Valid() ||
				(j.Spec == "") == j.At.IsZero() || !j.At.IsZero() && (!j.Start.IsZero() || !j.End.IsZero()) ||
				!j.Start.IsZero() && !j.End.IsZero() && j.End.Before(j.Start) || j.Jitter < 0 || j.Jitter > MaxJitter {
				t.Fatalf("invalid job accepted: %+v", j)
			}
			// Its canonical spec is valid and stable.
			spec := j.ToSpec()
			j2, err := spec.Job("api")
			if err != nil {
				t.Fatalf("canonical spec %+v of an accepted job refused: %v", spec, err)
			}
			if again := j2.ToSpec(); !reflect.DeepEqual(again, spec) {
				t.Fatalf("canonical spec not stable:\n%+v\n%+v", spec, again)
			}
			if o := j.Offset(utc("2026-10-24T23:00:00Z")); o < 0 || j.Jitter > 0 && o >= j.Jitter || j.Jitter == 0 && o != 0 {
				t.Fatalf("Offset = %v with jitter %v", o, j.Jitter)
			}
			// Whatever the file accepts, a worker accepts: the bounds
			// are one set of constants.
			msg := &jobmsg.Message{ID: jobmsg.WindowID(j.Name, utc("2026-10-24T23:00:00Z")), Job: j.Name, Handler: j.Handler,
				Window:      jobmsg.Window{Start: utc("2026-10-24T23:00:00Z"), End: utc("2026-10-24T23:00:01Z")},
				ScheduledAt: utc("2026-10-24T23:00:00Z"), PublishedAt: utc("2026-10-24T23:00:00Z"), Trigger: jobmsg.TriggerSchedule,
				Payload: j.Payload, Policy: recordPolicy(j)}
			if _, err := jobmsg.Marshal(msg); err != nil {
				t.Fatalf("job accepted by the file but its window refused by jobmsg: %v\n%+v", err, j)
			}
			var m map[string]any
			if err := json.Unmarshal(j.Payload, &m); err != nil || m == nil {
				t.Fatalf("payload %s is not a JSON object: %v", j.Payload, err)
			}
			at := utc("2026-10-24T23:00:00Z")
			for range 5 {
				n := j.Next(at)
				if n.IsZero() {
					break
				}
				if !n.After(at) {
					t.Fatalf("%s: Next(%v) = %v", j.Spec, at, n)
				}
				at = n
			}
		}
	})
}
