package signing_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/signing"
)

// The signature covers a window's namespace (issue 21): a signed window of
// namespace a, re-labelled as namespace b's (or stripped of its namespace)
// to slip it past b's workers, fails verification.
func TestSignatureCoversNamespace(t *testing.T) {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	m := &jobmsg.Message{
		Namespace: "a", ID: jobmsg.WindowID("tick", start), Job: "tick", Handler: "log",
		Window: jobmsg.Window{Start: start, End: start.Add(time.Minute)}, ScheduledAt: start, PublishedAt: start,
		Trigger: jobmsg.TriggerSchedule, Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Second), MaxAttempts: 1},
	}
	v, err := signing.NewVerifier(true, k1)
	if err != nil {
		t.Fatal(err)
	}
	signed := func() []byte {
		rec, err := jobmsg.Record("kjob.windows", m)
		if err != nil {
			t.Fatal(err)
		}
		sign(t, k1, rec)
		if err := v.Verify(rec); err != nil {
			t.Fatalf("a validly signed window: %v", err)
		}
		return rec.Value
	}
	for name, relabel := range map[string]func([]byte) []byte{
		"namespace b": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"namespace":"a"`), []byte(`"namespace":"b"`), 1)
		},
		"no namespace": func(b []byte) []byte {
			var w map[string]json.RawMessage
			if err := json.Unmarshal(b, &w); err != nil {
				t.Fatal(err)
			}
			delete(w, "namespace")
			out, _ := json.Marshal(w)
			return out
		},
	} {
		rec, err := jobmsg.Record("kjob.windows", m)
		if err != nil {
			t.Fatal(err)
		}
		sign(t, k1, rec)
		orig := signed()
		rec.Value = relabel(orig)
		if bytes.Equal(rec.Value, orig) {
			t.Fatalf("%s: the value did not change", name)
		}
		if got, err := jobmsg.FromRecord(rec); err != nil || got.Namespace == "a" {
			t.Fatalf("%s: re-labelled record decodes as %+v, %v", name, got, err)
		}
		if err := v.Verify(rec); !errors.Is(err, signing.ErrBadSignature) {
			t.Errorf("%s: Verify = %v, want ErrBadSignature", name, err)
		}
	}
}
