package chaos

import (
	"fmt"
	"time"
)

// StatusSkippedReplay is the State.Status the caller gives a window the
// store holds as skipped because an operator's replay moved its
// partition's offsets past it (dedupe.SkippedByReplay: status "skipped"
// with a reason that starts with dedupe.ReplaySkipPrefix). It is settled
// for every overlap policy: not lost, never run again.
const StatusSkippedReplay = "skipped (replay)"

// ReplaySkip is a window a worker (or an operator's tool, for a group
// without members) reported settling as skipped by a replay (the
// "window skipped" log line with status "skipped (replay)").
type ReplaySkip struct {
	// Window is the window id.
	Window string
	// Worker is who settled it.
	Worker string
	// At is when it was settled (the store write was at or before it).
	At time.Time
}

// checkReplaySkips is rule (j): a window skipped by a replay is settled
// once and for good. A window whose final status is StatusSkippedReplay
// has no completion and no attempt that started after it was settled
// (the replay's cancellation ends an attempt running then; nothing may
// start it again); a replay skip reported for a window whose final status
// is another one is two outcomes. Rule (e) counts such a window as
// settled, not lost.
func checkReplaySkips(h History, add addFunc) {
	first := map[string]ReplaySkip{}
	for _, sk := range h.ReplaySkips {
		if f, ok := first[sk.Window]; !ok || sk.At.Before(f.At) {
			first[sk.Window] = sk
		}
	}
	completed := map[string][]Completion{}
	for _, c := range h.Completions {
		completed[c.Window] = append(completed[c.Window], c)
	}
	for id, st := range h.States {
		if st.Status != StatusSkippedReplay {
			continue
		}
		for _, c := range completed[id] {
			add("j", id, "skipped by a replay, yet completed by token %d (%s)", c.Token, c.Worker)
		}
		sk, ok := first[id]
		if !ok {
			continue
		}
		for _, a := range h.Attempts {
			if a.Window == id && a.Start.After(sk.At) {
				add("j", id, "ran on %s (token %d) at %s after a replay skipped it at %s (%s)", a.Worker, a.Token,
					a.Start.Format(time.RFC3339Nano), sk.At.Format(time.RFC3339Nano), sk.Worker)
			}
		}
	}
	for id, sk := range first {
		if st := h.States[id]; st.Status != StatusSkippedReplay {
			add("j", id, "reported skipped by a replay (%s), but its final status is %q: two outcomes", sk.Worker, st.Status)
		}
	}
}

// replaySkipsMissing names what complete wants for rule (j).
func replaySkipsMissing(h History) string {
	if len(h.ReplaySkips) > 0 {
		return ""
	}
	n := 0
	for _, st := range h.States {
		if st.Status == StatusSkippedReplay {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("no replay skip reported although the store has %d windows skipped by a replay: the skips were not collected", n)
}
