package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/ops/dashboard"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/specleader"
)

// newSchedulesEnv serves a dashboard with actions and schedules, over the
// real producer leader.
func newSchedulesEnv(t *testing.T) (*actionsEnv, dashboard.Schedules, *httptest.Server) {
	t.Helper()
	const topic = "kjob.windows"
	e := newActionsEnv(t, "sch", topic, "jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: noop\n")
	dep := names.Deployment{Namespace: "sch", Topic: topic}.WithDefaults()
	specleader.Start(t, e.brokers, dep)
	sch, err := dashboard.NewSchedules(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(e.brokers...)}, Deployment: dep, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(dashboard.Config{Inspector: &fakeInspector{}, Brokers: e.brokers, Topic: topic, Actions: e.actions, Schedules: sch,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return e, sch, srv
}

// TestSchedulesPage: through the dashboard's actions (alice, basic auth,
// her session's CSRF token and the page's Origin) a schedule is created,
// edited, paused and resumed; the list shows its version and who set it,
// the history every change with its field diff; an edit against a stale
// version is refused with a conflict naming who changed it; a pause
// without a note and an invalid spec are refused with field and fix; a
// request without credentials or from another origin changes nothing; and
// the audit log records each schedule action with alice as its user.
func TestSchedulesPage(t *testing.T) {
	e, _, srv := newSchedulesEnv(t)
	si := signInAlice(t, srv.URL)
	alice, token, good := si.alice, si.token, si.good
	do := func(method, path string, h hdr, body string) (int, map[string]any) {
		t.Helper()
		code, b := si.do(method, path, h, body)
		m := map[string]any{}
		_ = json.Unmarshal(b, &m)
		if len(m) == 0 {
			m["body"] = string(b)
		}
		return code, m
	}
	post := func(action, body string) (int, map[string]any) {
		t.Helper()
		return do("POST", "/api/actions/"+action, good, body)
	}

	// The page itself is served.
	if code, m := do("GET", "/schedules.html", hdr{"Authorization": alice}, ""); code != http.StatusOK || !strings.Contains(m["body"].(string), "schedules.js") {
		t.Fatalf("GET /schedules.html: %d %v", code, m)
	}

	// Refused before anything is submitted: no credentials, another
	// origin, no CSRF token.
	for _, tc := range []struct {
		name string
		h    hdr
		want int
	}{
		{"no credentials", hdr{"Content-Type": "application/json", "Origin": srv.URL}, http.StatusUnauthorized},
		{"cross-origin", hdr{"Authorization": alice, "Content-Type": "application/json", "Origin": "http://evil.example", "X-CSRF-Token": token}, http.StatusForbidden},
		{"no CSRF token", hdr{"Authorization": alice, "Content-Type": "application/json", "Origin": srv.URL}, http.StatusForbidden},
	} {
		if code, m := do("POST", "/api/actions/schedule-create", tc.h, `{"job":"evil","spec":{"schedule":"* * * * *","handler":"x"}}`); code != tc.want {
			t.Fatalf("%s: %d %v, want %d", tc.name, code, m, tc.want)
		}
	}

	// Create, update, pause, resume.
	if code, m := post("schedule-create", `{"job":"report","spec":{"schedule":"0 * * * *","handler":"noop"},"note":"first"}`); code != http.StatusOK ||
		!strings.Contains(fmt.Sprint(m["detail"]), "version 0 -> 1") {
		t.Fatalf("create: %d %v", code, m)
	}
	if code, m := post("schedule-update", `{"job":"report","spec":{"schedule":"30 * * * *","handler":"noop","timeout":"2m"},"expect_version":1,"note":"half past"}`); code != http.StatusOK {
		t.Fatalf("update: %d %v", code, m)
	}
	if code, m := post("schedule-pause", `{"job":"report","expect_version":2}`); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["error"]), "note: empty") {
		t.Fatalf("pause without a note: %d %v, want 400 naming the note", code, m)
	}
	if code, m := post("schedule-pause", `{"job":"report","expect_version":2,"note":"upstream down"}`); code != http.StatusOK {
		t.Fatalf("pause: %d %v", code, m)
	}

	// The list: version, paused with its note, who set it, the source.
	code, m := do("GET", "/api/schedules", hdr{"Authorization": alice}, "")
	jobs, _ := m["jobs"].([]any)
	if code != http.StatusOK || len(jobs) != 1 {
		t.Fatalf("GET /api/schedules: %d %v", code, m)
	}
	row := jobs[0].(map[string]any)
	if row["job"] != "report" || row["version"] != float64(3) || row["schedule"] != "30 * * * *" || row["set_by"] != "alice" ||
		row["source"] != "the dashboard" || row["paused"].(map[string]any)["note"] != "upstream down" || row["enabled"] != true {
		t.Fatalf("list row: %v", row)
	}

	// An edit against the version the page showed before the pause: a
	// conflict naming the current version and who set it.
	code, m = post("schedule-update", `{"job":"report","spec":{"schedule":"45 * * * *","handler":"noop"},"expect_version":2}`)
	ref, _ := m["refusal"].(map[string]any)
	if code != http.StatusConflict || ref["kind"] != "conflict" || ref["current"] != float64(3) || ref["set_by"] != "alice" ||
		m["refusal_source"] != "the dashboard" || !strings.Contains(fmt.Sprint(m["error"]), "expected version 2, it is at version 3, set by alice") {
		t.Fatalf("stale edit: %d %v, want 409 naming version 3 and alice", code, m)
	}
	// An invalid spec: the field, the value and the fix.
	code, m = post("schedule-update", `{"job":"report","spec":{"schedule":"45 * * * *"},"expect_version":3}`)
	ref, _ = m["refusal"].(map[string]any)
	if code != http.StatusUnprocessableEntity || ref["field"] != "handler" || !strings.Contains(fmt.Sprint(ref["reason"]), "the name of a handler registered in the worker") {
		t.Fatalf("invalid spec: %d %v", code, m)
	}
	if code, m := post("schedule-resume", `{"job":"report","expect_version":3}`); code != http.StatusOK {
		t.Fatalf("resume: %d %v", code, m)
	}

	// The job's view: the spec's fields and the history with diffs.
	code, m = do("GET", "/api/schedule?name=report", hdr{"Authorization": alice}, "")
	if code != http.StatusOK {
		t.Fatalf("GET /api/schedule: %d %v", code, m)
	}
	if f := m["fields"].(map[string]any); f["schedule"] != "30 * * * *" || f["timeout"] != "2m0s" || f["paused"] != nil {
		t.Fatalf("fields: %v", f)
	}
	hist := m["history"].([]any)
	if len(hist) != 4 {
		t.Fatalf("history: %d changes, want 4: %v", len(hist), hist)
	}
	want := []struct {
		op, note string
		before   float64
		diff     string
	}{
		{"create", "first", 0, "schedule:->0 * * * *"},
		{"update", "half past", 1, "schedule:0 * * * *->30 * * * *"},
		{"pause", "", 2, "paused:->upstream down"},
		{"resume", "", 3, "paused:upstream down->"},
	}
	for i, w := range want {
		c := hist[i].(map[string]any)
		var diffs []string
		for _, x := range c["diff"].([]any) {
			f := x.(map[string]any)
			diffs = append(diffs, fmt.Sprintf("%s:%s->%s", f["field"], f["before"], f["after"]))
		}
		if c["op"] != w.op || c["version_before"] != w.before || c["version_after"] != w.before+1 || c["actor"] != "alice" ||
			c["source_text"] != "the dashboard" || !strings.Contains(strings.Join(diffs, "|"), w.diff) {
			t.Fatalf("history[%d]: %v diffs %v, want %+v", i, c, diffs, w)
		}
	}

	// Revert to version 1: a new version 5 with version 1's spec, from
	// the version the page showed; a revert without a version is refused
	// with the field and the fix, and one from a stale page is a conflict.
	if code, m := post("schedule-revert", `{"job":"report","expect_version":4}`); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["error"]), "to_version: 0") {
		t.Fatalf("revert without a version: %d %v, want 400 naming to_version", code, m)
	}
	if code, m := post("schedule-revert", `{"job":"report","to_version":1,"expect_version":3,"note":"back"}`); code != http.StatusConflict {
		t.Fatalf("revert from a stale page: %d %v, want 409", code, m)
	}
	if code, m := post("schedule-revert", `{"job":"report","to_version":1,"expect_version":4,"note":"back to the hour"}`); code != http.StatusOK ||
		!strings.Contains(fmt.Sprint(m["detail"]), "revert report to version 1: version 4 -> 5, with version 1's spec") {
		t.Fatalf("revert: %d %v", code, m)
	}
	_, m = do("GET", "/api/schedule?name=report", hdr{"Authorization": alice}, "")
	if f := m["fields"].(map[string]any); f["schedule"] != "0 * * * *" || f["timeout"] != nil {
		t.Fatalf("fields after the revert: %v, want version 1's", f)
	}
	if h := m["history"].([]any); len(h) != 5 || h[4].(map[string]any)["op"] != "revert" || h[4].(map[string]any)["note"] != "back to the hour" {
		t.Fatalf("history after the revert: %v", h)
	}

	// Delete.
	if code, m := post("schedule-delete", `{"job":"report","expect_version":5}`); code != http.StatusOK {
		t.Fatalf("delete: %d %v", code, m)
	}
	if _, m := do("GET", "/api/schedules", hdr{"Authorization": alice}, ""); len(m["jobs"].([]any)) != 0 || m["deleted"].(map[string]any)["report"] != float64(6) {
		t.Fatalf("after delete: %v", m)
	}

	// The audit log: every schedule action by alice, started then its
	// outcome; the refused requests above (no credentials, origin, CSRF,
	// missing note) are not actions and are not audited.
	recs, err := e.audit.Recent(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range recs {
		if !strings.HasPrefix(r.Action, "schedule-") {
			continue
		}
		if r.Who != "alice" || r.Tool != "dashboard" || r.Target != "schedule report" {
			t.Fatalf("audit record: %+v", r)
		}
		got[r.Action+" "+r.Outcome]++
	}
	for k, n := range map[string]int{"schedule-create started": 1, "schedule-create ok": 1, "schedule-update started": 3, "schedule-update ok": 1,
		"schedule-update refused": 2, "schedule-pause ok": 1, "schedule-resume ok": 1, "schedule-revert ok": 1, "schedule-revert refused": 1, "schedule-delete ok": 1} {
		if got[k] != n {
			t.Errorf("audit %q: %d records, want %d (all: %v)", k, got[k], n, got)
		}
	}
}
