package window_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/window"
	"github.com/kjob/kjob/schedule"
)

func hourly(t *testing.T) *schedule.Job {
	t.Helper()
	f, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: http\n"+
		"    payload: {url: \"http://127.0.0.1:8080/hook\"}\n    timeout: 5m\n    overlap: skip\n"))
	if err != nil {
		t.Fatal(err)
	}
	return f.Jobs[0]
}

// A window's message: its id by trigger, [start, the next fire time), the
// job's handler, payload and policy, and the record jobmsg decodes back.
func TestMessage(t *testing.T) {
	j := hourly(t)
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("x", 3600))
	now := start.Add(time.Minute)
	for _, tc := range []struct {
		p       window.Publication
		id      string
		trig    jobmsg.Trigger
		end     time.Time
		pubAt   time.Time
		schAt   time.Time
		payload string
	}{
		{window.Publication{Start: start, PublishedAt: now}, "report@2026-11-22T09:00:00Z", jobmsg.TriggerSchedule, start.Add(time.Hour), now, start, `{"url":"http://127.0.0.1:8080/hook"}`},
		{window.Publication{Start: start, Trigger: jobmsg.TriggerCatchup}, "report@2026-11-22T09:00:00Z", jobmsg.TriggerCatchup, start.Add(time.Hour), start, start, `{"url":"http://127.0.0.1:8080/hook"}`},
		{window.Publication{Start: start, Trigger: jobmsg.TriggerBackfill}, "report@2026-11-22T09:00:00Z#backfill", jobmsg.TriggerBackfill, start.Add(time.Hour), start, start, `{"url":"http://127.0.0.1:8080/hook"}`},
		{window.Publication{Start: now, Trigger: jobmsg.TriggerManual, Nonce: "n1", Payload: json.RawMessage(`{"a":1}`)},
			"report@2026-11-22T09:01:00Z#manual-n1", jobmsg.TriggerManual, start.Add(time.Hour), now, now, `{"a":1}`},
		{window.Publication{Start: start, ID: "report@x", End: start.Add(time.Minute), ScheduledAt: now, PublishedAt: now},
			"report@x", jobmsg.TriggerSchedule, start.Add(time.Minute), now, now, `{"url":"http://127.0.0.1:8080/hook"}`},
	} {
		m, rec, err := window.Record(j, "kjob.windows", tc.p)
		if err != nil {
			t.Fatalf("%+v: %v", tc.p, err)
		}
		if m.ID != tc.id || m.Trigger != tc.trig || !m.Window.Start.Equal(tc.p.Start) || !m.Window.End.Equal(tc.end) ||
			!m.PublishedAt.Equal(tc.pubAt) || !m.ScheduledAt.Equal(tc.schAt) || string(m.Payload) != tc.payload ||
			m.Handler != "http" || m.Policy != window.Policy(j) || m.Window.Start.Location() != time.UTC {
			t.Errorf("%+v: message %+v", tc.p, m)
		}
		back, err := jobmsg.FromRecord(rec)
		if err != nil || back.ID != m.ID || string(rec.Key) != "report" || rec.Topic != "kjob.windows" {
			t.Errorf("%+v: record decodes to %+v, %v", tc.p, back, err)
		}
	}
}

// A job with no window after start (here a hand-made job whose spec never
// fires again) still gets a window that ends after it starts.
func TestMessageWithoutNextWindow(t *testing.T) {
	j := &schedule.Job{Name: "once", Spec: "0 0 30 2 *", Handler: "log", Payload: json.RawMessage(`{}`), Timeout: time.Minute,
		Retries: schedule.RetryPolicy{MaxAttempts: 1, Backoff: time.Second, MaxBackoff: time.Second}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m, _, err := window.Record(j, "w", window.Publication{Start: start})
	if err != nil || !m.Window.End.Equal(start.Add(time.Second)) {
		t.Fatalf("message %+v, %v; want the window [start, start+1s)", m, err)
	}
}

// The message of the 10:00 window of an hourly job, as the producer
// publishes it.
func ExampleMessage() {
	f, _ := schedule.Parse("s.yaml", []byte("jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: log\n"))
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	m := window.Message(f.Jobs[0], window.Publication{Start: start, PublishedAt: start.Add(2 * time.Millisecond)})
	fmt.Println(m.ID, m.Trigger, m.Window.End.Format(time.RFC3339), m.Policy.Overlap)
	// Output: report@2026-11-22T10:00:00Z schedule 2026-11-22T11:00:00Z queue
}
