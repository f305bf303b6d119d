package dashboard_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/ops/dashboard"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

type leader struct{}

func (leader) Run(ctx context.Context, lead func(context.Context) error) error { return lead(ctx) }

// TestPauseResumeActions: a job page's pause and resume are spec changes
// through the real producer leader, under the signed-in user: a pause
// needs a note, becomes a version with alice as its actor and the
// dashboard as its source, and the producer publishes none of the job's
// windows after it; pausing twice or resuming a running job is a conflict
// that says why; the audit log has each action.
func TestPauseResumeActions(t *testing.T) {
	const topic = "kjob.windows"
	e := newActionsEnv(t, "pz", topic, "jobs:\n  - name: report\n    schedule: \"@every 10s\"\n    handler: noop\n")
	dep := names.Deployment{Namespace: "pz", Topic: topic}.WithDefaults()
	f, err := schedule.Parse("s.yaml", []byte("jobs:\n  - {name: report, schedule: \"@every 10s\", handler: noop}\n  - {name: tick, schedule: \"@every 10s\", handler: noop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	var mu sync.Mutex
	var pubs []producer.Published
	p, err := producer.New(producer.Config{Brokers: e.brokers, Namespace: "pz", Topic: topic, Jobs: f.Jobs, Elector: leader{}, Clock: clk,
		Logger: slog.New(slog.DiscardHandler), OnPublished: func(ps []producer.Published) { mu.Lock(); pubs = append(pubs, ps...); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() { stop(); <-done }()
	testenv.Eventually(t, 20*time.Second, func() bool { return len(p.Status().Next) == 2 }, "producer not leading")
	published := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var ids []string
		for _, x := range pubs {
			ids = append(ids, x.ID)
		}
		return ids
	}

	sch, err := dashboard.NewSchedules(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(e.brokers...)}, Deployment: dep, Wait: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(dashboard.Config{Inspector: &fakeInspector{}, Brokers: e.brokers, Topic: topic, Actions: e.actions, Schedules: sch,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	defer srv.Close()
	alice := signInAlice(t, srv.URL)
	good := alice.good
	do := func(path string, h hdr, body string) (int, string) {
		t.Helper()
		method := "GET"
		if body != "" {
			method = "POST"
		}
		code, b := alice.do(method, path, h, body)
		var m struct{ Detail, Error string }
		if json.Unmarshal(b, &m) == nil && m.Detail+m.Error != "" {
			return code, m.Detail + m.Error // unescaped
		}
		return code, string(b)
	}
	reader, err := specs.NewClient(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(e.brokers...)}, Deployment: dep})
	if err != nil {
		t.Fatal(err)
	}

	if code, body := do("/api/actions/pause", good, `{"job":"report"}`); code != http.StatusBadRequest || !strings.Contains(body, "a pause needs a note") {
		t.Fatalf("pause without a note: %d %s", code, body)
	}
	if code, body := do("/api/actions/pause", good, `{"job":"nope","note":"x"}`); code != http.StatusNotFound {
		t.Fatalf("pause of an unknown job: %d %s", code, body)
	}
	clk.Set(t0.Add(5 * time.Second)) // 10:00:10: both publish
	testenv.Eventually(t, 10*time.Second, func() bool { return len(published()) == 2 }, "the windows at 10:00:10")
	if code, body := do("/api/actions/pause", good, `{"job":"report","note":"upstream down, INC-7"}`); code != http.StatusOK || !strings.Contains(body, "paused report: version 1 -> 2") {
		t.Fatalf("pause: %d %s", code, body)
	}
	rec, err := reader.Get(ctx, "report")
	if err != nil || rec.Paused == nil || rec.Paused.By != "alice" || rec.Paused.Note != "upstream down, INC-7" || rec.Version != 2 {
		t.Fatalf("report after the pause: %+v %v", rec, err)
	}
	if code, body := do("/api/actions/pause", good, `{"job":"report","note":"again"}`); code != http.StatusConflict || !strings.Contains(body, "already paused (since 2026-11-22T10:00:10Z by alice: upstream down, INC-7)") {
		t.Fatalf("pause twice: %d %s", code, body)
	}
	// Nothing of report after the pause: tick's :20 goes out, report's not.
	clk.Set(t0.Add(15 * time.Second)) // 10:00:20
	testenv.Eventually(t, 10*time.Second, func() bool { return len(published()) == 3 }, "tick@10:00:20")
	if code, body := do("/api/actions/resume", good, `{"job":"report","note":"fixed"}`); code != http.StatusOK || !strings.Contains(body, "resumed report (paused since 2026-11-22T10:00:10Z by alice): version 2 -> 3") {
		t.Fatalf("resume: %d %s", code, body)
	}
	if code, body := do("/api/actions/resume", good, `{"job":"report"}`); code != http.StatusConflict || !strings.Contains(body, "report is not paused (version 3)") {
		t.Fatalf("resume twice: %d %s", code, body)
	}
	clk.Set(t0.Add(25 * time.Second)) // 10:00:30
	testenv.Eventually(t, 10*time.Second, func() bool { return len(published()) == 5 }, "the windows at 10:00:30")
	want := "report@2026-11-22T10:00:10Z tick@2026-11-22T10:00:10Z tick@2026-11-22T10:00:20Z report@2026-11-22T10:00:30Z tick@2026-11-22T10:00:30Z"
	got := published()
	if strings.Join(got[:2], " ") > strings.Join([]string{got[1], got[0]}, " ") { // one transaction: either order
		got[0], got[1] = got[1], got[0]
	}
	if got[3] > got[4] {
		got[3], got[4] = got[4], got[3]
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("published %v, want %s", got, want)
	}

	// The change log has both, by alice through the dashboard, with notes.
	hist, err := reader.History(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for _, c := range hist {
		log = append(log, string(c.Op)+" "+c.Actor+" "+c.Source.Kind+" "+c.Note)
	}
	if w := "put producer producer file imported from the schedules file|pause alice dashboard upstream down, INC-7|resume alice dashboard fixed"; strings.Join(log, "|") != w {
		t.Fatalf("change log:\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Replace(w, "|", "\n", -1))
	}
	recs, err := e.audit.Recent(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	var audit []string
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Outcome != "started" {
			audit = append(audit, recs[i].Who+" "+recs[i].Action+" "+recs[i].Target+" "+recs[i].Outcome)
		}
	}
	if w := "alice pause job nope refused|alice pause job report ok|alice pause job report refused|alice resume job report ok|alice resume job report refused"; strings.Join(audit, "|") != w {
		t.Fatalf("audit log:\n%s\nwant\n%s", strings.Join(audit, "\n"), strings.Replace(w, "|", "\n", -1))
	}
}
