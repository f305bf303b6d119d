package chaos

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)

func wid(job string, i int) string {
	return fmt.Sprintf("%s@%s", job, t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano))
}

// clean builds a history of n windows of job "tick", each published once by
// epoch 0, run once, completed once with token i+1: no violation.
func clean(n int) History {
	h := History{
		Jobs:     []Job{{Name: "tick", Every: time.Second, Catchup: time.Minute}},
		DueUntil: t0.Add(time.Duration(n) * time.Second),
		States:   map[string]State{},
		// One partition holding the n records, read to its end.
		Partitions:  1,
		TopicEnds:   map[int32]int64{0: int64(n)},
		TopicReadTo: map[int32]int64{0: int64(n)},
	}
	for i := range n {
		id, start := wid("tick", i), t0.Add(time.Duration(i)*time.Second)
		tok := int64(i + 1)
		h.Published = append(h.Published, Record{Window: id, Job: "tick", Start: start, PublishedAt: start.Add(time.Millisecond), Offset: int64(i), ProducerID: 7})
		h.Attempts = append(h.Attempts, Attempt{Window: id, Job: "tick", Token: tok, Worker: "w1", Start: start.Add(10 * time.Millisecond), End: start.Add(20 * time.Millisecond), OK: true})
		h.Completions = append(h.Completions, Completion{Window: id, Token: tok, Worker: "w1"})
		h.States[id] = State{Status: "done", Token: tok}
	}
	return h
}

// check is Check on a history that must be complete.
func check(t *testing.T, h History) []Violation {
	t.Helper()
	vs, err := Check(h)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return vs
}

func TestCleanHistoryHasNoViolation(t *testing.T) {
	if v := check(t, clean(10)); len(v) != 0 {
		t.Fatalf("violations in a clean history: %v", v)
	}
}

// A worker killed mid-handler: its attempt never ended, the window re-ran
// with a higher token on another worker and completed there. Legal.
func TestCrashedAttemptThenRerunIsLegal(t *testing.T) {
	h := clean(3)
	id := wid("tick", 1)
	h.Attempts[1].End, h.Attempts[1].OK = time.Time{}, false
	h.Attempts = append(h.Attempts, Attempt{Window: id, Job: "tick", Token: 10, Worker: "w2", Start: t0.Add(9 * time.Second), End: t0.Add(10 * time.Second), OK: true})
	h.Completions[1] = Completion{Window: id, Token: 10, Worker: "w2"}
	h.States[id] = State{Status: "done", Token: 10}
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}

// A window missing while nobody published for longer than the catch-up
// limit is explained; the same gap with a leader publishing in time is not.
func TestMissingWindowExplainedOnlyByCatchup(t *testing.T) {
	h := clean(5)
	h.Jobs[0].Catchup = 500 * time.Millisecond
	// Drop window 2; window 3 is published 4s late: window 2 was older than
	// the catch-up limit when a leader next published.
	h.Published = append(h.Published[:2], h.Published[3:]...)
	for i := range h.Published {
		if h.Published[i].Window == wid("tick", 3) {
			h.Published[i].PublishedAt = t0.Add(7 * time.Second)
		}
	}
	delete(h.States, wid("tick", 2)) // not published: the store need not be asked
	h.Attempts = append(h.Attempts[:2], h.Attempts[3:]...)
	h.Completions = append(h.Completions[:2], h.Completions[3:]...)
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("gap beyond catch-up reported: %v", v)
	}
	h.Jobs[0].Catchup = time.Minute
	expect(t, check(t, h), "a", wid("tick", 2), "never published")
}

func expect(t *testing.T, vs []Violation, rule, window, text string) {
	t.Helper()
	for _, v := range vs {
		if v.Rule == rule && (window == "" || v.Window == window) && strings.Contains(v.Detail, text) {
			return
		}
	}
	t.Fatalf("want a violation of rule (%s) on %q mentioning %q; got %v", rule, window, text, vs)
}

// Each hand-made history breaks one rule; the checker must name it.
func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		name, rule, window, text string
		mutate                   func(h *History)
	}{
		{"published twice", "a", wid("tick", 2), "published 2 times", func(h *History) {
			r := h.Published[2]
			r.Offset = 99
			h.Published = append(h.Published, r)
		}},
		{"due window missing", "a", wid("tick", 7), "never published", func(h *History) {
			h.DueUntil = t0.Add(8 * time.Second) // windows 5..7 are due too
		}},
		{"job never published", "a", "", "no window published", func(h *History) {
			h.Jobs = append(h.Jobs, Job{Name: "tock", Every: time.Second})
		}},
		{"completed twice", "b", wid("tick", 1), "completed 2 times", func(h *History) {
			h.Attempts = append(h.Attempts, Attempt{Window: wid("tick", 1), Token: 20, Worker: "w2", Start: t0.Add(time.Second), End: t0.Add(2 * time.Second), OK: true})
			h.Completions = append(h.Completions, Completion{Window: wid("tick", 1), Token: 20, Worker: "w2"})
			h.States[wid("tick", 1)] = State{Status: "done", Token: 20}
		}},
		{"re-run with a lower token", "c", wid("tick", 3), "not above", func(h *History) {
			a := h.Attempts[3]
			a.OK, a.End = false, time.Time{}
			h.Attempts[3] = a
			h.Attempts = append(h.Attempts, Attempt{Window: a.Window, Token: a.Token - 1, Worker: "w2", Start: a.Start.Add(time.Second), End: a.Start.Add(2 * time.Second), OK: true})
			h.Completions[3].Token = a.Token - 1
			h.States[a.Window] = State{Status: "done", Token: a.Token - 1}
		}},
		{"re-run with the same token", "c", wid("tick", 2), "not above", func(h *History) {
			a := h.Attempts[2]
			a.OK, a.End = false, time.Time{}
			h.Attempts[2] = a
			h.Attempts = append(h.Attempts, Attempt{Window: a.Window, Token: a.Token, Worker: "w2", Start: a.Start.Add(time.Second), End: a.Start.Add(2 * time.Second), OK: true})
		}},
		{"re-run below an older attempt", "c", wid("tick", 3), "not above the earlier attempt's token 50", func(h *History) {
			// Tokens 4 (crashed), 50 (crashed), then 20: 20 is above
			// the first attempt's token but not above every earlier one.
			a := h.Attempts[3]
			a.OK, a.End = false, time.Time{}
			h.Attempts[3] = a
			h.Attempts = append(h.Attempts,
				Attempt{Window: a.Window, Token: 50, Worker: "w2", Start: a.Start.Add(time.Second)},
				Attempt{Window: a.Window, Token: 20, Worker: "w3", Start: a.Start.Add(2 * time.Second), End: a.Start.Add(3 * time.Second), OK: true})
			h.Completions[3] = Completion{Window: a.Window, Token: 20, Worker: "w3"}
			h.States[a.Window] = State{Status: "done", Token: 20}
		}},
		{"re-run after completion", "c", wid("tick", 0), "after token 1 completed", func(h *History) {
			h.Attempts = append(h.Attempts, Attempt{Window: wid("tick", 0), Token: 30, Worker: "w2", Start: t0.Add(5 * time.Second), End: t0.Add(6 * time.Second), OK: true})
		}},
		{"re-run overlapping an attempt that completed", "c", wid("tick", 1), "after token 2 completed", func(h *History) {
			// Token 2 completes (the store says so) while token 9 has
			// already started: a claim was granted on a window whose
			// earlier attempt did not fail.
			h.Attempts = append(h.Attempts, Attempt{Window: wid("tick", 1), Token: 9, Worker: "w2", Start: h.Attempts[1].Start.Add(time.Millisecond)})
		}},
		{"zombie worker completes", "d", wid("tick", 4), "zombie completed", func(h *History) {
			// token 5 stalled; token 40 re-claimed and is still the
			// latest claim, yet token 5's completion was accepted.
			h.Attempts = append(h.Attempts, Attempt{Window: wid("tick", 4), Token: 40, Worker: "w2", Start: t0.Add(8 * time.Second)})
			h.States[wid("tick", 4)] = State{Status: "done", Token: 40}
			h.Attempts[4].End = t0.Add(9 * time.Second)
		}},
		{"zombie producer visible", "d", wid("tick", 3), "zombie", func(h *History) {
			for i := range h.Published {
				h.Published[i].ProducerEpoch = 2
			}
			h.Published[3].ProducerEpoch = 1
		}},
		{"lag left", "e", "", "lag is 3", func(h *History) { h.FinalLag = 3 }},
		{"claim stuck", "e", wid("tick", 2), "stuck", func(h *History) {
			h.States[wid("tick", 2)] = State{Status: "running", Token: 3, ClaimLive: true}
			h.Completions = append(h.Completions[:2], h.Completions[3:]...)
		}},
		{"never claimed", "e", wid("tick", 1), "never claimed", func(h *History) {
			h.States[wid("tick", 1)] = State{Status: StatusAbsent}
			h.Completions = append(h.Completions[:1], h.Completions[2:]...)
		}},
		{"done without a ledger entry", "e", wid("tick", 0), "no successful invocation", func(h *History) {
			h.Attempts = h.Attempts[1:]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean(5)
			tc.mutate(&h)
			expect(t, check(t, h), tc.rule, tc.window, tc.text)
		})
	}
}

// Dead-lettered windows are settled even though they are not done.
func TestDeadLetteredWindowIsSettled(t *testing.T) {
	h := clean(3)
	id := wid("tick", 2)
	h.States[id] = State{Status: "failed", Token: 3}
	h.Completions = h.Completions[:2]
	h.Attempts[2].OK = false
	expect(t, check(t, h), "e", id, "stuck")
	h.DeadLettered = map[string]bool{id: true}
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}

// A history that lacks a part the rules need is refused, with an error that
// names the part, instead of passing vacuously.
func TestIncompleteHistoryIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		mutate     func(h *History)
	}{
		{"empty history", "empty ledger", func(h *History) { *h = History{} }},
		{"no jobs", "no jobs", func(h *History) { h.Jobs = nil }},
		{"job without interval", "Every = 0s", func(h *History) { h.Jobs[0].Every = 0 }},
		{"no due bound", "DueUntil", func(h *History) { h.DueUntil = time.Time{} }},
		{"empty ledger", "empty ledger", func(h *History) { h.Attempts = nil }},
		{"empty topic", "windows topic empty", func(h *History) { h.Published = nil }},
		{"partition count unknown", "partition count", func(h *History) { h.Partitions = 0 }},
		{"end offsets unknown", "end offsets not given", func(h *History) { h.TopicEnds = nil }},
		{"partition not listed", "partition 1: end offset not given", func(h *History) { h.Partitions = 2 }},
		{"topic not read to its end", "read to offset 3 of 5", func(h *History) { h.TopicReadTo[0] = 3 }},
		{"no Redis state", "no idempotency-store (Redis) state", func(h *History) { h.States = nil }},
		{"Redis state of a window not read", "state of 1 published windows not read", func(h *History) {
			delete(h.States, wid("tick", 3))
		}},
		{"completions not collected", "no completion reported", func(h *History) { h.Completions = nil }},
		{"lag unknown", "lag unknown", func(h *History) { h.FinalLag = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean(5)
			tc.mutate(&h)
			vs, err := Check(h)
			if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Check = %v, %v; want an error wrapping ErrIncomplete mentioning %q", vs, err, tc.text)
			}
			if vs != nil {
				t.Errorf("violations %v returned with the error; an incomplete history must not be judged", vs)
			}
		})
	}
}
