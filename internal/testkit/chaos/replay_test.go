package chaos

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// replaySkipped makes window i of clean(n) one a replay moved past while
// its attempt ran: the attempt was cancelled at the skip, nothing
// completed it, and the store holds it skipped by the replay.
func replaySkipped(h *History, i int) (id string, at time.Time) {
	id = h.Published[i].Window
	at = h.Attempts[i].Start.Add(5 * time.Millisecond)
	h.Attempts[i].End, h.Attempts[i].OK = at, false
	var cs []Completion
	for _, c := range h.Completions {
		if c.Window != id {
			cs = append(cs, c)
		}
	}
	h.Completions = cs
	h.States[id] = State{Status: StatusSkippedReplay, Token: h.States[id].Token, Reason: "replay: offsets moved past it"}
	h.ReplaySkips = append(h.ReplaySkips, ReplaySkip{Window: id, Worker: "w1", At: at})
	return id, at
}

// A window a replay skipped is settled: not lost (rule (e)), not a breach
// of its queue job's order (rule (f)), and no violation at all.
func TestReplaySkipIsSettled(t *testing.T) {
	h := clean(5)
	replaySkipped(&h, 2)
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("violations in a history with a window skipped by a replay: %v", v)
	}
}

// Rule (j), each breach in a hand-made history.
func TestReplaySkipViolations(t *testing.T) {
	t.Run("runs after the skip", func(t *testing.T) {
		h := clean(5)
		id, at := replaySkipped(&h, 2)
		h.Attempts = append(h.Attempts, Attempt{Window: id, Job: "tick", Token: 99, Worker: "w2", Start: at.Add(time.Second), End: at.Add(2 * time.Second), OK: true})
		want(t, check(t, h), "j", id, "after a replay skipped it")
	})
	t.Run("completed", func(t *testing.T) {
		h := clean(5)
		id, _ := replaySkipped(&h, 2)
		h.Completions = append(h.Completions, Completion{Window: id, Token: h.States[id].Token, Worker: "w1"})
		want(t, check(t, h), "j", id, "yet completed")
	})
	t.Run("reported but another final status", func(t *testing.T) {
		h := clean(5)
		id, _ := replaySkipped(&h, 2)
		h.States[id] = State{Status: "failed", Token: h.States[id].Token}
		vs := check(t, h)
		want(t, vs, "j", id, "two outcomes")
		want(t, vs, "e", id, "stuck")
	})
	t.Run("skips not collected", func(t *testing.T) {
		h := clean(5)
		replaySkipped(&h, 2)
		h.ReplaySkips = nil
		if _, err := Check(h); !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "replay skip") {
			t.Fatalf("Check without the replay skips: %v; want ErrIncomplete naming them", err)
		}
	})
}

func want(t *testing.T, vs []Violation, rule, window, detail string) {
	t.Helper()
	for _, v := range vs {
		if v.Rule == rule && v.Window == window && strings.Contains(v.Detail, detail) {
			return
		}
	}
	t.Fatalf("no (%s) violation for %s saying %q in %v", rule, window, detail, vs)
}
