package producer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// oddSpecs are specs that exercise every field of schedule.Spec, several
// of them written otherwise than ToSpec writes them.
func oddSpecs() []schedule.Spec {
	f, t := false, true
	return []schedule.Spec{
		{Name: "plain", Schedule: "@every 1m", Handler: "log"},
		{Name: "six", Schedule: "7 */5 * * * *", Timezone: "Europe/Berlin", Handler: "a.b_c-d"},
		{Name: "utc-etc", Schedule: "0 3 * * *", Timezone: "Etc/UTC", Handler: "h"},
		{Name: "utc", Schedule: "0 3 * * *", Timezone: "UTC", Handler: "h"},
		{Name: "payload", Schedule: "@hourly", Handler: "h", Payload: json.RawMessage(` { "z": [1, 2.50, 1e3], "a": {"y": null, "b": "x"} } `)},
		{Name: "payload-html", Schedule: "@hourly", Handler: "h", Payload: json.RawMessage(`{"q":"<a href=\"x\">&amp;</a>","u":"é\u2028"}`)},
		{Name: "payload-empty", Schedule: "@hourly", Handler: "h", Payload: json.RawMessage(`{}`)},
		{Name: "durations", Schedule: "@every 90s", Handler: "h", Timeout: "90s", Catchup: "3600s", Jitter: "1500ms"},
		{Name: "default-timeout", Schedule: "@every 1m", Handler: "h", Timeout: "1m", Catchup: "0s"},
		{Name: "retries", Schedule: "@every 1m", Handler: "h", Retries: &schedule.RetrySpec{MaxAttempts: 7, Backoff: "2s", MaxBackoff: "90s"}},
		{Name: "retries-default", Schedule: "@every 1m", Handler: "h", Retries: &schedule.RetrySpec{MaxAttempts: 3}},
		{Name: "overlap", Schedule: "@every 1m", Handler: "h", Overlap: "allow", MaxConcurrent: 17},
		{Name: "overlap-queue", Schedule: "@every 1m", Handler: "h", Overlap: "queue"},
		{Name: "skip", Schedule: "@every 1m", Handler: "h", Overlap: "skip"},
		{Name: "disabled", Schedule: "@every 1m", Handler: "h", Enabled: &f},
		{Name: "enabled", Schedule: "@every 1m", Handler: "h", Enabled: &t},
		{Name: "one-shot", At: "2026-12-01T08:00:00", Timezone: "America/New_York", Handler: "h"},
		{Name: "one-shot-z", At: "2026-12-01T08:00:00.250Z", Handler: "h"},
		{Name: "bounded", Schedule: "*/10 * * * *", Timezone: "Asia/Tokyo", Handler: "h",
			Start: "2026-11-01T00:00:00+09:00", End: "2027-01-01T00:00:00Z"},
	}
}

// roundTrip encodes rec as a schedules-topic record and decodes it, as a
// standby reads what the leader wrote.
func roundTrip(t *testing.T, rec *specs.Record) *specs.Record {
	t.Helper()
	r, err := specs.SpecRecord("schedules", rec)
	if err != nil {
		t.Fatal(err)
	}
	e, err := specs.ParseSpecRecord(r, rec.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return e.Record
}

// checkLiveJob pins what the view relies on: an entry built from rec
// rebuilds rec exactly (every field, the spec's payload bytes included),
// and keeps no copy of the spec when rec's spec is its job's ToSpec.
func checkLiveJob(t *testing.T, rec *specs.Record) (keptRaw bool) {
	t.Helper()
	j, err := rec.Spec.Job("test")
	if err != nil {
		t.Fatalf("%s: %v", rec.Job, err)
	}
	l := newLiveJob(rec, j, &origins{})
	if got := l.record(rec.Namespace); !reflect.DeepEqual(got, rec) {
		t.Errorf("%s: rebuilt record\n %+v\nwant\n %+v", rec.Job, got, rec)
	}
	if got := l.spec(); !reflect.DeepEqual(got, rec.Spec) {
		t.Errorf("%s: spec %+v, want %+v", rec.Job, got, rec.Spec)
	}
	if canonical := j.ToSpec(); reflect.DeepEqual(canonical, rec.Spec) != (l.raw == nil) {
		t.Errorf("%s: kept a copy of the spec: %v, but the spec is its job's ToSpec: %v", rec.Job, l.raw != nil, reflect.DeepEqual(canonical, rec.Spec))
	}
	return l.raw != nil
}

func record(s schedule.Spec) *specs.Record {
	at := time.Date(2026, 11, 28, 12, 0, 0, 123, time.UTC)
	return &specs.Record{V: specs.Version, Namespace: "ns", Job: s.Name, Version: 4, Spec: s,
		Paused: &specs.Pause{Note: "n", By: "ops", At: at}, SetBy: "alice", Source: specs.Source{Kind: specs.SourceFile, File: "f.yaml", Hash: "ab"},
		Note: "why", SetAt: at, ChangeID: "req/3", EffectiveFrom: at.Add(time.Second), FileHash: "cd"}
}

// Every record a leader writes holds its job's ToSpec, which the view
// rebuilds instead of keeping a copy: spec -> job -> spec is exact for
// every field, through the topic's encoding too. The one exception is a
// payload with characters JSON escapes for HTML (<, >, &, U+2028): the
// topic holds the escaped bytes, so the view keeps that record's spec.
// A record written otherwise (not canonical) is kept whole.
func TestLiveJobRebuildsTheRecord(t *testing.T) {
	for _, s := range oddSpecs() {
		j, err := s.Job("test")
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		canonical := j.ToSpec()
		j2, err := canonical.Job("again")
		if err != nil {
			t.Fatalf("%s: canonical spec %+v does not validate: %v", s.Name, canonical, err)
		}
		if again := j2.ToSpec(); !reflect.DeepEqual(again, canonical) {
			t.Errorf("%s: spec -> job -> spec -> job -> spec\n %+v\nwant\n %+v", s.Name, again, canonical)
		}
		// As the leader holds it (plan) and as a standby reads it.
		if checkLiveJob(t, record(canonical)) {
			t.Errorf("%s: the leader's own record kept a copy of its spec", s.Name)
		}
		raw := checkLiveJob(t, roundTrip(t, record(canonical)))
		html := strings.ContainsAny(string(canonical.Payload), "<>&\u2028")
		if raw != html {
			t.Errorf("%s: read from the topic, kept a copy of the spec: %v, want %v", s.Name, raw, html)
		}
		// As written, not canonical: kept whole where it differs.
		checkLiveJob(t, record(s))
		checkLiveJob(t, roundTrip(t, record(s)))
	}
}

// The view holds a record's ChangeID as its request's part (shared) and an
// index, and its FileHash as 32 bytes: every form of either, a leader's or
// one written by hand, comes back exactly as the record held it.
func TestLiveJobRebuildsChangeIDsAndFileHashes(t *testing.T) {
	sum := sha256.Sum256([]byte("spec"))
	lower := hex.EncodeToString(sum[:])
	spec := oddSpecs()[0]
	j, err := spec.Job("test")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "req/3", "file-abc-2/0", "file-abc/1000", "a/b/7", "req", "req/", "req/03", "req/-1", "req/+1",
		"req/2147483648", "/5", "req/x", "r\u00e9q/1"} {
		for _, h := range []string{"", lower, strings.ToUpper(lower), lower[:63], lower + "0", "cd", strings.Repeat("g", 64)} {
			rec := record(j.ToSpec())
			rec.ChangeID, rec.FileHash = id, h
			var o origins
			l := newLiveJob(rec, j, &o)
			got := l.record(rec.Namespace)
			if got.ChangeID != id || got.FileHash != h {
				t.Errorf("change id %q, file hash %q: rebuilt as %q, %q", id, h, got.ChangeID, got.FileHash)
			}
			if h != "" && !l.fileHash.is(h) {
				t.Errorf("file hash %q: is(%q) is false", h, h)
			}
			if other := lower[:63] + "1"; h != other && l.fileHash.is(other) {
				t.Errorf("file hash %q: is(%q) is true", h, other)
			}
		}
	}
	// A leader's ids share their request's part.
	var o origins
	rec := record(j.ToSpec())
	a := newLiveJob(rec, j, &o)
	rec.ChangeID = "req/4"
	b := newLiveJob(rec, j, &o)
	if a.origin != b.origin || len(o) != 1 {
		t.Errorf("two changes of one request hold %d origins", len(o))
	}
}

// The same over generated specs: whatever validates rebuilds exactly.
func FuzzLiveJobRebuildsTheRecord(f *testing.F) {
	for _, s := range oddSpecs() {
		var enabled int8 = -1
		if s.Enabled != nil && *s.Enabled {
			enabled = 1
		} else if s.Enabled != nil {
			enabled = 0
		}
		f.Add(s.Schedule, s.At, s.Start, s.End, s.Timezone, string(s.Payload), s.Timeout, s.Catchup, s.Jitter, s.Overlap, s.MaxConcurrent, enabled)
	}
	f.Fuzz(func(t *testing.T, cron, at, start, end, tz, payload, timeout, catchup, jitter, overlap string, maxConcurrent int, enabled int8) {
		s := schedule.Spec{Name: "fuzz", Schedule: cron, At: at, Start: start, End: end, Timezone: tz, Handler: "h",
			Timeout: timeout, Catchup: catchup, Jitter: jitter, Overlap: overlap, MaxConcurrent: maxConcurrent}
		if payload != "" {
			s.Payload = json.RawMessage(payload)
		}
		if enabled >= 0 {
			e := enabled > 0
			s.Enabled = &e
		}
		j, err := s.Job("fuzz")
		if err != nil {
			return
		}
		canonical := j.ToSpec()
		if raw := checkLiveJob(t, record(canonical)); raw {
			t.Errorf("the leader's own record kept a copy of its spec %+v", canonical)
		}
		checkLiveJob(t, roundTrip(t, record(canonical)))
		checkLiveJob(t, record(s))
	})
}

// The file's import is built one request at a time: at most MaxEdits edits
// each, a put and the pause that migrates its job in one request, ids
// suffixed only when there are several, and only the current request's
// specs mapped to the file's jobs (fileJobs), none once it is done.
func TestFileRequestsOneAtATime(t *testing.T) {
	for _, tc := range []struct {
		jobs   int
		paused []int // indexes of jobs the Redis pause list has
		sizes  []int
	}{
		{jobs: 3, sizes: []int{3}},
		{jobs: specs.MaxEdits, sizes: []int{specs.MaxEdits}},
		{jobs: 2*specs.MaxEdits + 1, sizes: []int{specs.MaxEdits, specs.MaxEdits, 1}},
		// Job 5 has a pause after its put, so job 998's put is edit 999 and
		// its pause would be edit 1000: both go to the second request.
		{jobs: 1500, paused: []int{5, 998}, sizes: []int{specs.MaxEdits - 1, 503}},
	} {
		var list []*schedule.Job
		for i := range tc.jobs {
			j, err := schedule.Spec{Name: "job-" + strings.Repeat("0", 6-len(itoa(i))) + itoa(i), Schedule: "@every 1m", Handler: "h"}.Job("f.yaml")
			if err != nil {
				t.Fatal(err)
			}
			list = append(list, j)
		}
		p, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Elector: noElector{}, Jobs: list})
		if err != nil {
			t.Fatal(err)
		}
		legacy := map[string]pause.Pause{}
		for _, i := range tc.paused {
			legacy[list[i].Name] = pause.Pause{Job: list[i].Name, By: "ops"}
		}
		now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
		var sizes []int
		var ids []string
		puts := 0
		for q := range p.fileRequests(specs.NewSnapshot(), map[string]*liveJob{}, now, legacy) {
			sizes = append(sizes, len(q.Edits))
			ids = append(ids, q.ID)
			// The request's puts, and at most the one job read past it.
			if n := len(p.fileJobs); n > len(q.Edits)-countOp(q.Edits, specs.OpPause)+1 {
				t.Errorf("%d jobs: %d file jobs mapped while request %s of %d edits is applied", tc.jobs, n, q.ID, len(q.Edits))
			}
			for i, e := range q.Edits {
				if e.Op == specs.OpPut {
					puts++
					if p.fileJobs[e.Spec] == nil {
						t.Errorf("%s: the put of %s is not mapped to the file's job", q.ID, e.Job)
					}
				}
				if e.Op == specs.OpPause && (i == 0 || q.Edits[i-1].Job != e.Job || q.Edits[i-1].Op != specs.OpPut) {
					t.Errorf("%s: the pause of %s is not right after its put", q.ID, e.Job)
				}
			}
		}
		if !reflect.DeepEqual(sizes, tc.sizes) {
			t.Errorf("%d jobs: requests of %v edits, want %v", tc.jobs, sizes, tc.sizes)
		}
		if puts != tc.jobs || len(p.fileJobs) != 0 {
			t.Errorf("%d jobs: %d puts, %d file jobs still mapped after the import", tc.jobs, puts, len(p.fileJobs))
		}
		for i, id := range ids {
			want := "file-" + strconv.FormatInt(now.UnixNano(), 36)
			if len(ids) > 1 {
				want += "-" + itoa(i+1)
			}
			if id != want {
				t.Errorf("%d jobs: request %d has id %q, want %q", tc.jobs, i, id, want)
			}
		}
	}
}

func countOp(edits []specs.Edit, op specs.Op) int {
	n := 0
	for _, e := range edits {
		if e.Op == op {
			n++
		}
	}
	return n
}

func itoa(i int) string { return strconv.Itoa(i) }
