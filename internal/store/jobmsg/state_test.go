package jobmsg_test

import (
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
)

// A state record decodes to what was encoded, in UTC, keyed by the job;
// values that are not state records are refused.
func TestStateRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 11, 0, 0, 0, time.FixedZone("x", 3600))
	in := jobmsg.State{Namespace: "prod", Job: "report", LastWindow: at, LastID: jobmsg.WindowID("report", at), PublishedAt: at.Add(time.Millisecond)}
	rec, err := jobmsg.StateRecord("kjob.windows.state", in)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Topic != "kjob.windows.state" || string(rec.Key) != "report" {
		t.Fatalf("record %s key %q", rec.Topic, rec.Key)
	}
	want := `{"v":1,"namespace":"prod","job":"report","last_window":"2026-11-22T10:00:00Z","last_id":"report@2026-11-22T10:00:00Z","published_at":"2026-11-22T10:00:00.001Z"}`
	if string(rec.Value) != want {
		t.Fatalf("value %s\nwant %s", rec.Value, want)
	}
	out, err := jobmsg.ParseState(rec.Value)
	if err != nil || out.Namespace != in.Namespace || out.Job != in.Job || !out.LastWindow.Equal(at) || out.LastID != in.LastID || !out.PublishedAt.Equal(in.PublishedAt) {
		t.Fatalf("ParseState = %+v, %v; want %+v", out, err, in)
	}
	// A record written before state records carried their namespace.
	old, err := jobmsg.ParseState([]byte(`{"v":1,"job":"report","last_window":"2026-11-22T10:00:00Z","last_id":"","published_at":"2026-11-22T10:00:00Z"}`))
	if err != nil || old.Namespace != "" || old.Job != "report" {
		t.Fatalf("ParseState of a record without namespace = %+v, %v", old, err)
	}
	for _, bad := range []string{`not json`, `{"v":1}`, `[]`} {
		if _, err := jobmsg.ParseState([]byte(bad)); err == nil {
			t.Errorf("ParseState(%s) = nil error", bad)
		}
	}
	if _, err := jobmsg.StateRecord("s", jobmsg.State{}); err == nil {
		t.Error("StateRecord of a state without a job = nil error")
	}
}
