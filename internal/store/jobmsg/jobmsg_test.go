package jobmsg

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func sample() *Message {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return &Message{
		Namespace:   "prod",
		ID:          WindowID("report", start),
		Job:         "report",
		Handler:     "http",
		Window:      Window{Start: start, End: start.Add(time.Hour)},
		ScheduledAt: start,
		PublishedAt: start.Add(2 * time.Millisecond),
		Trigger:     TriggerSchedule,
		Payload:     json.RawMessage(`{"url":"http://127.0.0.1:1/hook"}`),
		Policy:      Policy{Timeout: Duration(30 * time.Second), MaxAttempts: 3, Backoff: Duration(time.Second), MaxBackoff: Duration(time.Minute), Overlap: OverlapQueue},
	}
}

func TestRoundTrip(t *testing.T) {
	m := sample()
	rec, err := Record("jobs", m)
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Key) != "report" || rec.Topic != "jobs" {
		t.Fatalf("key/topic = %q/%q", rec.Key, rec.Topic)
	}
	if len(rec.Headers) != 2 || rec.Headers[0].Key != HeaderSchema || string(rec.Headers[0].Value) != "1" ||
		rec.Headers[1].Key != HeaderContentType || string(rec.Headers[1].Value) != ContentType {
		t.Fatalf("headers = %+v", rec.Headers)
	}
	got, err := FromRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "report@2026-11-22T10:00:00Z" || got.V != 1 || !got.Window.Start.Equal(m.Window.Start) ||
		got.Policy != m.Policy || string(got.Payload) != string(m.Payload) || got.Trigger != TriggerSchedule {
		t.Fatalf("round trip: got %+v", got)
	}
	if got.Namespace != "prod" || !strings.Contains(string(rec.Value), `"namespace":"prod"`) {
		t.Fatalf("round trip: namespace %q in %s, want %q", got.Namespace, rec.Value, "prod")
	}
}

// A record carries its deployment's namespace; one written before records
// carried it decodes with an empty Namespace, and an invalid namespace is
// refused, naming the field.
func TestNamespace(t *testing.T) {
	m := sample()
	m.Namespace = ""
	b, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "namespace") {
		t.Fatalf("an empty namespace is written: %s", b)
	}
	got, err := Unmarshal(b)
	if err != nil || got.Namespace != "" {
		t.Fatalf("Unmarshal of a record without namespace = %+v, %v", got, err)
	}
	m.Namespace = "a b"
	if _, err := Marshal(m); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `namespace: "a b"`) {
		t.Fatalf("Marshal with namespace %q: err %v, want one naming the field and value", m.Namespace, err)
	}
}

func TestIDs(t *testing.T) {
	at := time.Date(2026, 3, 29, 3, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	if got, want := WindowID("a", at), "a@2026-03-29T01:00:00Z"; got != want {
		t.Errorf("WindowID = %q, want %q", got, want)
	}
	if got, want := BackfillID("a", at), "a@2026-03-29T01:00:00Z#backfill"; got != want {
		t.Errorf("BackfillID = %q, want %q", got, want)
	}
	if got, want := ManualID("a", at, "x1"), "a@2026-03-29T01:00:00Z#manual-x1"; got != want {
		t.Errorf("ManualID = %q, want %q", got, want)
	}
	if j, ok := JobOfID("a-b@x"); !ok || j != "a-b" {
		t.Errorf("JobOfID = %q %v", j, ok)
	}
	if _, ok := JobOfID("@x"); ok {
		t.Errorf("JobOfID accepted empty job")
	}
}

func TestDecodeErrors(t *testing.T) {
	valid, err := Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(valid, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	tests := []struct {
		name    string
		value   []byte
		want    string
		version bool
	}{
		{"not json", []byte("hello"), `jobmsg: value: "hello": not a JSON object: invalid character 'h' looking for beginning of value`, false},
		{"json array", []byte("[1]"), `jobmsg: value: "[1]": not a JSON object`, false},
		{"no version", edit(func(m map[string]any) { delete(m, "v") }), `jobmsg: v: required (schema version)`, false},
		{"future version", edit(func(m map[string]any) { m["v"] = 2; m["job"] = 7 }), `jobmsg: v: 2: this kjob reads schema version 1; upgrade the worker to read newer versions`, true},
		{"version zero", edit(func(m map[string]any) { m["v"] = 0 }), `jobmsg: v: 0: schema versions start at 1 (this kjob writes and reads 1); the record was not written by kjob`, false},
		{"negative version", edit(func(m map[string]any) { m["v"] = -3 }), `jobmsg: v: -3: schema versions start at 1 (this kjob writes and reads 1); the record was not written by kjob`, false},
		{"string version", edit(func(m map[string]any) { m["v"] = "1" }), `jobmsg: v: "\"1\"": want an integer schema version`, false},
		{"missing job", edit(func(m map[string]any) { delete(m, "job") }), `jobmsg: job: required`, false},
		{"job wrong type", edit(func(m map[string]any) { m["job"] = 5 }), `jobmsg: job: number: want string`, false},
		{"missing handler", edit(func(m map[string]any) { m["handler"] = "" }), `jobmsg: handler: required`, false},
		{"bad start", edit(func(m map[string]any) {
			m["window"] = map[string]any{"start": "yesterday", "end": "2026-11-22T11:00:00Z"}
		}), `jobmsg: window.start: "yesterday": want an RFC 3339 time such as 2026-11-22T10:00:00Z`, false},
		{"end before start", edit(func(m map[string]any) {
			m["window"] = map[string]any{"start": "2026-11-22T11:00:00Z", "end": "2026-11-22T10:00:00Z"}
		}), `jobmsg: window.end: "2026-11-22T10:00:00Z": must be after window.start 2026-11-22T11:00:00Z`, false},
		{"bad trigger", edit(func(m map[string]any) { m["trigger"] = "cron" }), `jobmsg: trigger: "cron": want one of schedule, catchup, manual, backfill`, false},
		{"payload not object", edit(func(m map[string]any) { m["payload"] = []int{1} }), `jobmsg: payload: "[1]": must be a JSON object`, false},
		{"id of other job", edit(func(m map[string]any) { m["id"] = "other@2026-11-22T10:00:00Z" }), `jobmsg: id: "other@2026-11-22T10:00:00Z": must start with the job name and '@' ("report@")`, false},
		{"zero attempts", edit(func(m map[string]any) { m["policy"].(map[string]any)["max_attempts"] = 0 }), `jobmsg: policy.max_attempts: "0": must be at least 1`, false},
		{"bad timeout", edit(func(m map[string]any) { m["policy"].(map[string]any)["timeout"] = "soon" }), `jobmsg: value: want a duration string such as "30s": time: invalid duration "soon"`, false},
		{"unknown overlap", edit(func(m map[string]any) { m["policy"].(map[string]any)["overlap"] = "sometimes" }),
			`jobmsg: policy.overlap: "sometimes": want one of queue (the default), skip, latest, replace, allow`, false},
		{"overlap in capitals", edit(func(m map[string]any) { m["policy"].(map[string]any)["overlap"] = "QUEUE" }),
			`jobmsg: policy.overlap: "QUEUE": want one of queue (the default), skip, latest, replace, allow`, false},
		{"overlap not a string", edit(func(m map[string]any) { m["policy"].(map[string]any)["overlap"] = 1 }),
			`jobmsg: policy.overlap: number: want jobmsg.Overlap`, false},
		// The bounds on a record's policy (issue 14): a record asking for
		// more than a schedules file may is refused, naming field, value
		// and bound.
		{"timeout beyond MaxTimeout", edit(func(m map[string]any) { m["policy"].(map[string]any)["timeout"] = "100000h" }),
			`jobmsg: policy.timeout: "100000h0m0s": must be at most 24h0m0s (jobmsg.MaxTimeout, the most a worker accepts from a record and a schedules file allows); publish the window from a valid schedules file`, false},
		{"attempts beyond MaxAttempts", edit(func(m map[string]any) { m["policy"].(map[string]any)["max_attempts"] = 1000000000 }),
			`jobmsg: policy.max_attempts: "1000000000": must be at most 100 (jobmsg.MaxAttempts, the most a worker accepts from a record and a schedules file allows); publish the window from a valid schedules file`, false},
		{"negative max_concurrent", edit(func(m map[string]any) { m["policy"].(map[string]any)["max_concurrent"] = -1 }),
			`jobmsg: policy.max_concurrent: "-1": must not be negative (0 means the worker's default)`, false},
		{"max_concurrent beyond MaxConcurrentLimit", edit(func(m map[string]any) { m["policy"].(map[string]any)["max_concurrent"] = 10001 }),
			`jobmsg: policy.max_concurrent: "10001": must be at most 10000 (jobmsg.MaxConcurrentLimit, the most a worker accepts from a record and a schedules file allows); publish the window from a valid schedules file`, false},
		{"max_backoff beyond MaxBackoffLimit", edit(func(m map[string]any) { m["policy"].(map[string]any)["max_backoff"] = "24h0m1s" }),
			`jobmsg: policy.max_backoff: "24h0m1s": must be at most 24h0m0s (jobmsg.MaxBackoffLimit, the most a worker accepts from a record and a schedules file allows); publish the window from a valid schedules file`, false},
		{"backoff beyond MaxBackoffLimit", edit(func(m map[string]any) {
			m["policy"].(map[string]any)["backoff"] = "48h"
			m["policy"].(map[string]any)["max_backoff"] = "48h"
		}), `jobmsg: policy.max_backoff: "48h0m0s": must be at most 24h0m0s (jobmsg.MaxBackoffLimit, the most a worker accepts from a record and a schedules file allows); publish the window from a valid schedules file`, false},
		{"too large", []byte(`{"v":1,"payload":"` + strings.Repeat("x", MaxValueBytes) + `"}`), `jobmsg: value: 262164 bytes: exceeds the limit of 262144 bytes`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Unmarshal(tt.value)
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not match ErrInvalid")
			}
			if errors.Is(err, ErrUnsupportedVersion) != tt.version {
				t.Errorf("errors.Is(ErrUnsupportedVersion) = %v", !tt.version)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Errorf("not a *DecodeError: %T", err)
			}
		})
	}
}

// A record without "overlap" (every record kjob wrote before overlap
// policies) decodes as OverlapQueue; each policy survives a round trip.
func TestOverlap(t *testing.T) {
	m := sample()
	m.Policy.Overlap = ""
	b, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "overlap") {
		t.Fatalf("an empty overlap is written: %s", b)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Policy.Overlap != OverlapQueue {
		t.Fatalf("absent overlap decoded as %q, want %q", got.Policy.Overlap, OverlapQueue)
	}
	if len(Overlaps) != 5 || Overlaps[0] != OverlapQueue {
		t.Fatalf("Overlaps = %v", Overlaps)
	}
	for _, o := range Overlaps {
		if !o.Valid() {
			t.Errorf("%q not Valid", o)
		}
		m := sample()
		m.Policy.Overlap = o
		r, err := Record("jobs", m)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(r.Value), `"overlap":"`+string(o)+`"`) {
			t.Errorf("value lacks the overlap: %s", r.Value)
		}
		got, err := FromRecord(r)
		if err != nil || got.Policy != m.Policy {
			t.Errorf("%s: round trip = %+v, %v", o, got, err)
		}
	}
	for _, o := range []Overlap{"", "Queue", "forbid", "concurrent"} {
		if o.Valid() {
			t.Errorf("%q Valid", o)
		}
	}
	m = sample()
	m.Policy.Overlap = "forbid"
	if _, err := Marshal(m); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "policy.overlap") {
		t.Errorf("Marshal with overlap forbid: %v", err)
	}
}

// The bounds are inclusive: a policy at every bound is accepted.
func TestPolicyAtBounds(t *testing.T) {
	m := sample()
	m.Policy = Policy{Timeout: Duration(MaxTimeout), MaxAttempts: MaxAttempts, Backoff: Duration(MaxBackoffLimit), MaxBackoff: Duration(MaxBackoffLimit), Overlap: OverlapAllow}
	r, err := Record("jobs", m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromRecord(r); err != nil {
		t.Fatal(err)
	}
	m.Policy.MaxAttempts++
	var de *DecodeError
	if err := m.Validate(); !errors.As(err, &de) || de.Field != "policy.max_attempts" {
		t.Fatalf("Validate = %v", err)
	}
}

func TestFromRecordChecksHeadersAndKey(t *testing.T) {
	rec, err := Record("jobs", sample())
	if err != nil {
		t.Fatal(err)
	}
	r := *rec
	r.Headers = []kgo.RecordHeader{{Key: HeaderSchema, Value: []byte("2")}}
	if _, err := FromRecord(&r); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("header version 2: err = %v", err)
	}
	for _, v := range []string{"0", "-1", "one"} {
		r = *rec
		r.Headers = []kgo.RecordHeader{{Key: HeaderSchema, Value: []byte(v)}}
		if _, err := FromRecord(&r); err == nil || errors.Is(err, ErrUnsupportedVersion) || !errors.Is(err, ErrInvalid) {
			t.Errorf("header version %q: err = %v; want invalid, not \"upgrade the worker\"", v, err)
		}
	}
	m := sample()
	m.V = -1
	if err := m.Validate(); err == nil || errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "schema versions start at 1") {
		t.Errorf("Validate with v -1: err = %v", err)
	}
	r = *rec
	r.Headers = []kgo.RecordHeader{{Key: HeaderContentType, Value: []byte("text/plain")}}
	if _, err := FromRecord(&r); err == nil || err.Error() != `jobmsg: header content-type: "text/plain": want application/json` {
		t.Errorf("content type: err = %v", err)
	}
	r = *rec
	r.Key = []byte("other")
	if _, err := FromRecord(&r); err == nil || err.Error() != `jobmsg: key: "other": record key must be the job name "report"` {
		t.Errorf("key: err = %v", err)
	}
	r = *rec
	r.Headers = nil // headers are optional; the value carries the version
	if _, err := FromRecord(&r); err != nil {
		t.Errorf("no headers: %v", err)
	}
}

func TestMarshalRejectsInvalid(t *testing.T) {
	m := sample()
	m.Trigger = "later"
	if _, err := Marshal(m); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	m = sample()
	m.Payload = json.RawMessage(`{"x":"` + strings.Repeat("y", MaxValueBytes) + `"}`)
	if _, err := Marshal(m); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	valid, _ := Marshal(sample())
	f.Add(valid)
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,"id":"a@b","job":"a"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unmarshal(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not match ErrInvalid: %v", err)
			}
			return
		}
		// Anything accepted must be valid and survive a round trip.
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted invalid message: %v", err)
		}
		b2, err := Marshal(m)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		if _, err := Unmarshal(b2); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func BenchmarkRecordRoundTrip(b *testing.B) {
	m := sample()
	b.ReportAllocs()
	for b.Loop() {
		r, err := Record("jobs", m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := FromRecord(r); err != nil {
			b.Fatal(err)
		}
	}
}

// The producer's side of the hot path.
func BenchmarkRecord(b *testing.B) {
	m := sample()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Record("jobs", m); err != nil {
			b.Fatal(err)
		}
	}
}

// The worker's side of the hot path.
func BenchmarkFromRecord(b *testing.B) {
	r, err := Record("jobs", sample())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(r.Value)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromRecord(r); err != nil {
			b.Fatal(err)
		}
	}
}
