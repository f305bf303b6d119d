package chaos

import (
	"errors"
	"fmt"
	"slices"
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

// claimedAfter gives the windows of h's only job after window i the
// tokens above tok, in order, as the job's token counter hands them out
// when each is claimed after window i was settled with tok (rule (i)).
func claimedAfter(h *History, i int, tok int64) {
	for j := i + 1; j < len(h.Published); j++ {
		id := h.Published[j].Window
		t := tok + int64(j-i)
		for k := range h.Attempts {
			if h.Attempts[k].Window == id {
				h.Attempts[k].Token = t
			}
		}
		for k := range h.Completions {
			if h.Completions[k].Window == id {
				h.Completions[k].Token = t
			}
		}
		if st, ok := h.States[id]; ok {
			st.Token = t
			h.States[id] = st
		}
	}
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
// with a higher token on another worker and completed there, before the
// job's next window started. Legal.
func TestCrashedAttemptThenRerunIsLegal(t *testing.T) {
	h := clean(3)
	id := wid("tick", 1)
	h.Attempts[1].End, h.Attempts[1].OK = time.Time{}, false
	h.Attempts = append(h.Attempts, Attempt{Window: id, Job: "tick", Token: 10, Worker: "w2", Start: t0.Add(1500 * time.Millisecond), End: t0.Add(1900 * time.Millisecond), OK: true})
	h.Completions[1] = Completion{Window: id, Token: 10, Worker: "w2"}
	h.States[id] = State{Status: "done", Token: 10}
	claimedAfter(&h, 1, 10)
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

// A window missing after a lease store outage is explained only if it was
// older than the longer of its catch-up limit and LeaseOutageCatchup when
// a leader next published: the producer that wins the lease after the
// outage publishes the windows due during it.
func TestWindowDueDuringLeaseStoreOutage(t *testing.T) {
	h := clean(5)
	h.Jobs[0].Catchup = 0
	// Window 2 is missing and window 3 was published 5s late, once Redis
	// was back.
	h.Published = append(h.Published[:2], h.Published[3:]...)
	for i := range h.Published {
		if h.Published[i].Window == wid("tick", 3) {
			h.Published[i].PublishedAt = t0.Add(8 * time.Second)
		}
	}
	delete(h.States, wid("tick", 2))
	h.Attempts = append(h.Attempts[:2], h.Attempts[3:]...)
	h.Completions = append(h.Completions[:2], h.Completions[3:]...)
	// Without an outage in the history, catchup 0 explains the gap.
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("gap beyond catch-up reported: %v", v)
	}
	// Redis was down from 1.5s to 7s: window 2 fell due during the outage
	// and a leader published 6s after it, well within a minute.
	h.LeaseStoreOutages = []Interval{{From: t0.Add(1500 * time.Millisecond), To: t0.Add(7 * time.Second)}}
	expect(t, check(t, h), "a", wid("tick", 2), "lease store was down")
	// An outage that ended before the window was due does not cover it.
	h.LeaseStoreOutages = []Interval{{From: t0, To: t0.Add(1500 * time.Millisecond)}}
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("a window due after the outage judged by it: %v", v)
	}
	// Nobody published for longer than LeaseOutageCatchup after the
	// outage: the window was too old to catch up.
	h.LeaseStoreOutages = []Interval{{From: t0.Add(1500 * time.Millisecond), To: t0.Add(7 * time.Second)}}
	for i := range h.Published {
		if w := h.Published[i].Window; w == wid("tick", 3) || w == wid("tick", 4) {
			h.Published[i].PublishedAt = t0.Add(2*time.Second + LeaseOutageCatchup + time.Second)
		}
	}
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("a window older than LeaseOutageCatchup reported: %v", v)
	}
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

// cleanJob is clean(n) for one job named name with overlap policy overlap.
func cleanJob(name, overlap string, n int) History {
	h := clean(n)
	h.Jobs[0].Name, h.Jobs[0].Overlap = name, overlap
	states := map[string]State{}
	for i := range h.Published {
		h.Published[i].Job, h.Published[i].Window = name, wid(name, i)
		h.Attempts[i].Job, h.Attempts[i].Window = name, wid(name, i)
		h.Completions[i].Window = wid(name, i)
		states[wid(name, i)] = h.States[wid("tick", i)]
	}
	h.States = states
	return h
}

// settleWithout makes window i of h's only job one the workers settled as
// status (skipped, superseded) instead of running it: no attempt and no
// completion of it, the store's status with reason, one Skip reported.
func settleWithout(h *History, i int, status, reason string) {
	id := h.Published[i].Window
	var as []Attempt
	for _, a := range h.Attempts {
		if a.Window != id {
			as = append(as, a)
		}
	}
	h.Attempts = as
	var cs []Completion
	for _, c := range h.Completions {
		if c.Window != id {
			cs = append(cs, c)
		}
	}
	h.Completions = cs
	h.States[id] = State{Status: status, Reason: reason}
	h.Skips = append(h.Skips, Skip{Window: id, Worker: "w1", Status: status, Reason: reason})
}

// attemptOf returns a pointer to the (first) ledger attempt of window i.
func attemptOf(t *testing.T, h *History, i int) *Attempt {
	t.Helper()
	for k := range h.Attempts {
		if h.Attempts[k].Window == h.Published[i].Window {
			return &h.Attempts[k]
		}
	}
	t.Fatalf("no attempt of window %d", i)
	return nil
}

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// Legal histories under queue, next to the violations of rule (f).
func TestQueueLegal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, h *History)
	}{
		{"zombie of k still running after k+1 started", func(t *testing.T, h *History) {
			// Token 2 of window 1 stalled on w1 (a zombie); token 10 on
			// w2 re-ran and completed it by 1.9s; window 2 started at
			// 2.01s while the zombie ran on until 3s. Only the settling
			// attempt counts.
			z := attemptOf(t, h, 1)
			z.End, z.OK = at(3000), false
			h.Attempts = append(h.Attempts, Attempt{Window: wid("tick", 1), Job: "tick", Token: 10, Worker: "w2", Start: at(1500), End: at(1900), OK: true})
			h.Completions[1] = Completion{Window: wid("tick", 1), Token: 10, Worker: "w2"}
			h.States[wid("tick", 1)] = State{Status: "done", Token: 10}
			claimedAfter(h, 1, 10)
		}},
		{"retried window, next one after the retry", func(t *testing.T, h *History) {
			a := attemptOf(t, h, 1)
			a.OK = false // the first attempt failed at 1.02s
			h.Attempts = append(h.Attempts, Attempt{Window: wid("tick", 1), Job: "tick", Token: 9, Worker: "w1", Start: at(1500), End: at(2000), OK: true})
			h.Completions[1] = Completion{Window: wid("tick", 1), Token: 9, Worker: "w1"}
			h.States[wid("tick", 1)] = State{Status: "done", Token: 9}
			claimedAfter(h, 1, 9)
		}},
		{"dead-lettered window, next one after its last attempt", func(t *testing.T, h *History) {
			a := attemptOf(t, h, 1)
			a.OK, a.End = false, at(1990)
			h.States[wid("tick", 1)] = State{Status: "dead", Token: a.Token}
			h.DeadLettered = map[string]bool{wid("tick", 1): true}
			h.Completions = append(h.Completions[:1], h.Completions[2:]...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean(5)
			tc.mutate(t, &h)
			if v := check(t, h); len(v) != 0 {
				t.Fatalf("violations: %v", v)
			}
		})
	}
}

// The late re-run that breaks queue order is legal under allow: the
// windows of an allow job run concurrently.
func TestAllowRunsConcurrently(t *testing.T) {
	h := cleanJob("par", OverlapAllow, 3)
	id := wid("par", 1)
	attemptOf(t, &h, 1).End, attemptOf(t, &h, 1).OK = time.Time{}, false
	h.Attempts = append(h.Attempts, Attempt{Window: id, Job: "par", Token: 10, Worker: "w2", Start: at(9000), End: at(10000), OK: true})
	h.Completions[1] = Completion{Window: id, Token: 10, Worker: "w2"}
	h.States[id] = State{Status: "done", Token: 10}
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("violations under allow: %v", v)
	}
	h.Jobs[0].Overlap = OverlapQueue
	expect(t, check(t, h), "f", wid("par", 2), "before the earlier window "+id+" was settled")
}

// Rule (k): an allow job with a max_concurrent never has more of its
// windows running at once on one worker; the same overlap spread over two
// workers, an end and a start at the same instant, and a job without
// max_concurrent are legal.
func TestMaxConcurrent(t *testing.T) {
	// Windows 0-3 of an allow job, each running 0-1000 ms after t0+5s on
	// worker w1: four at once.
	overlapping := func(workers ...string) History {
		h := cleanJob("par", OverlapAllow, 4)
		h.Jobs[0].MaxConcurrent = 2
		for i := range 4 {
			a := attemptOf(t, &h, i)
			a.Start, a.End, a.Worker = at(5000), at(6000), workers[i%len(workers)]
		}
		return h
	}
	h := overlapping("w1")
	expect(t, check(t, h), "k", "", "while 2 other windows of job par ran there; max_concurrent is 2")

	if v := check(t, overlapping("w1", "w2")); len(v) != 0 {
		t.Errorf("two windows at once on each of two workers: %v", v)
	}
	h = overlapping("w1")
	h.Jobs[0].MaxConcurrent = 0
	if v := check(t, h); len(v) != 0 {
		t.Errorf("no max_concurrent: %v", v)
	}
	h = overlapping("w1")
	for i := 2; i < 4; i++ { // windows 2 and 3 start as 0 and 1 end
		a := attemptOf(t, &h, i)
		a.Start, a.End = at(6000), at(7000)
	}
	if v := check(t, h); len(v) != 0 {
		t.Errorf("two at a time, the next two starting as the first two end: %v", v)
	}
	h = overlapping("w1")
	for i := 2; i < 4; i++ { // windows 2 and 3 died with a worker: not counted
		a := attemptOf(t, &h, i)
		a.End, a.OK = time.Time{}, false
	}
	for i := 2; i < 4; i++ {
		id := wid("par", i)
		h.Attempts = append(h.Attempts, Attempt{Window: id, Job: "par", Token: int64(20 + i), Worker: "w2", Start: at(8000), End: at(8500), OK: true})
		h.Completions[i] = Completion{Window: id, Token: int64(20 + i), Worker: "w2"}
		h.States[id] = State{Status: "done", Token: int64(20 + i)}
	}
	if v := check(t, h); len(v) != 0 {
		t.Errorf("attempts cut off by a dead worker counted: %v", v)
	}
}

// Legal histories under skip, latest and replace.
func TestOverlapPoliciesLegal(t *testing.T) {
	for _, tc := range []struct {
		name, overlap string
		mutate        func(t *testing.T, h *History)
	}{
		{"skip: window 1 skipped while window 0 runs", OverlapSkip, func(t *testing.T, h *History) {
			attemptOf(t, h, 0).End = at(1500)
			settleWithout(h, 1, StatusSkipped, "overlap skip: "+wid("job", 0)+" still running")
		}},
		{"latest: window 1 dropped for window 2 while window 0 runs", OverlapLatest, func(t *testing.T, h *History) {
			attemptOf(t, h, 0).End = at(2500)
			settleWithout(h, 1, StatusSkipped, "overlap latest: newer window "+wid("job", 2)+" waiting")
			a := attemptOf(t, h, 2)
			a.Start, a.End = at(2510), at(2600)
		}},
		{"replace: window 1 cancelled for window 2", OverlapReplace, func(t *testing.T, h *History) {
			// Window 1's attempt was cancelled when window 2 came up; it
			// returned at 2.02s, unsuccessful, and window 2 ran after.
			a := attemptOf(t, h, 1)
			a.End, a.OK = at(2020), false
			tok := a.Token
			settleWithout(h, 1, StatusSuperseded, "overlap replace: superseded by "+wid("job", 2))
			h.Attempts = append(h.Attempts, Attempt{Window: wid("job", 1), Job: "job", Token: tok, Worker: "w1", Start: at(1010), End: at(2020)})
			h.States[wid("job", 1)] = State{Status: StatusSuperseded, Token: tok, Reason: "overlap replace: superseded by " + wid("job", 2)}
			b := attemptOf(t, h, 2)
			b.Start, b.End = at(2030), at(2050)
		}},
		{"replace: a window done before its successor started", OverlapReplace, func(t *testing.T, h *History) {}},
		{"skip: the worker that skipped window 2 was killed before it reported it", OverlapSkip, func(t *testing.T, h *History) {
			attemptOf(t, h, 1).End = at(3500)
			settleWithout(h, 2, StatusSkipped, "overlap skip: "+wid("job", 1)+" still running")
			settleWithout(h, 3, StatusSkipped, "overlap skip: "+wid("job", 1)+" still running")
			h.Skips = h.Skips[1:] // window 3's report keeps the collection complete
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanJob("job", tc.overlap, 5)
			tc.mutate(t, &h)
			if v := check(t, h); len(v) != 0 {
				t.Fatalf("violations: %v", v)
			}
		})
	}
}

// Each hand-made history breaks one of the overlap rules (f), (g), (h)
// (or rule (e) for a window a policy may not settle); the checker must
// name it.
func TestOverlapViolations(t *testing.T) {
	skipped := func(i int) func(t *testing.T, h *History) {
		return func(t *testing.T, h *History) {
			settleWithout(h, i, StatusSkipped, "overlap skip: previous window still running")
		}
	}
	for _, tc := range []struct {
		name, overlap, rule, window, text string
		mutate                            func(t *testing.T, h *History)
	}{
		// (f) queue
		{"queue: k+1 starts before k's settling attempt ended", OverlapQueue, "f", wid("job", 2), "before the earlier window " + wid("job", 1) + " was settled", func(t *testing.T, h *History) {
			a := attemptOf(t, h, 1)
			a.End, a.OK = time.Time{}, false
			h.Attempts = append(h.Attempts, Attempt{Window: wid("job", 1), Job: "job", Token: 10, Worker: "w2", Start: at(9000), End: at(10000), OK: true})
			h.Completions[1] = Completion{Window: wid("job", 1), Token: 10, Worker: "w2"}
			h.States[wid("job", 1)] = State{Status: "done", Token: 10}
		}},
		{"queue: k+1 overlaps k by a millisecond", OverlapQueue, "f", wid("job", 3), "ended at 2026-11-23T02:00:03.011Z", func(t *testing.T, h *History) {
			// Window 3 starts at its start (rule (r)), a millisecond
			// before window 2's attempt ended.
			attemptOf(t, h, 2).End = at(3011)
			attemptOf(t, h, 3).Start = at(3010)
		}},
		{"queue: k+1 runs although k was never settled", OverlapQueue, "f", wid("job", 2), "was never settled (status \"running\")", func(t *testing.T, h *History) {
			attemptOf(t, h, 1).End, attemptOf(t, h, 1).OK = time.Time{}, false
			h.States[wid("job", 1)] = State{Status: "running", Token: 2, ClaimLive: true}
			h.Completions = append(h.Completions[:1], h.Completions[2:]...)
		}},
		{"queue: k+2 starts before k settled, k+1 dead-lettered without running", OverlapQueue, "f", wid("job", 3), "before the earlier window " + wid("job", 1), func(t *testing.T, h *History) {
			attemptOf(t, h, 1).End = at(3500)
			h.Attempts = slicesDelete(h.Attempts, wid("job", 2))
			h.States[wid("job", 2)] = State{Status: "dead", Token: 3}
			h.DeadLettered = map[string]bool{wid("job", 2): true}
			h.Completions = append(h.Completions[:2], h.Completions[3:]...)
		}},
		// (i) queue tokens
		{"queue: k+1 runs after k settled, on a token claimed before k's re-run", OverlapQueue, "i", wid("job", 2), "not above token 10 that settled the earlier window " + wid("job", 1), func(t *testing.T, h *History) {
			// Window 1's first attempt (token 2) was cut off and re-run
			// with token 10, which settled it at 1.9s; window 2 then ran
			// after it, in order by time, but on token 3: a claim taken
			// before window 1 was settled.
			a := attemptOf(t, h, 1)
			a.End, a.OK = time.Time{}, false
			h.Attempts = append(h.Attempts, Attempt{Window: wid("job", 1), Job: "job", Token: 10, Worker: "w2", Start: at(1500), End: at(1900), OK: true})
			h.Completions[1] = Completion{Window: wid("job", 1), Token: 10, Worker: "w2"}
			h.States[wid("job", 1)] = State{Status: "done", Token: 10}
			claimedAfter(h, 1, 10)
			attemptOf(t, h, 2).Token = 3
		}},
		{"queue: a later window's zombie attempt on a token below an earlier window's", OverlapQueue, "i", wid("job", 3), "token 1, not above token 3 that settled the earlier window " + wid("job", 2), func(t *testing.T, h *History) {
			h.Attempts = append(h.Attempts, Attempt{Window: wid("job", 3), Job: "job", Token: 1, Worker: "w9", Start: at(3500)})
		}},
		{"queue: k+1 on a token below dead-lettered k's", OverlapQueue, "i", wid("job", 2), "not above token 7 that settled the earlier window " + wid("job", 1), func(t *testing.T, h *History) {
			a := attemptOf(t, h, 1)
			a.OK, a.Token = false, 7
			h.States[wid("job", 1)] = State{Status: "dead", Token: 7}
			h.DeadLettered = map[string]bool{wid("job", 1): true}
			h.Completions = append(h.Completions[:1], h.Completions[2:]...)
		}},
		{"queue: k+1 starts before dead-lettered k's last attempt ended", OverlapQueue, "f", wid("job", 2), "before the earlier window " + wid("job", 1), func(t *testing.T, h *History) {
			a := attemptOf(t, h, 1)
			a.OK, a.End = false, at(2200)
			h.States[wid("job", 1)] = State{Status: "dead", Token: a.Token}
			h.DeadLettered = map[string]bool{wid("job", 1): true}
			h.Completions = append(h.Completions[:1], h.Completions[2:]...)
		}},

		// (g) skip and latest
		{"skip: skipped and completed", OverlapSkip, "g", wid("job", 2), "two outcomes", func(t *testing.T, h *History) {
			settleWithout(h, 2, StatusSkipped, "overlap skip: previous window still running")
			h.Completions = append(h.Completions, Completion{Window: wid("job", 2), Token: 3, Worker: "w2"})
		}},
		{"skip: skipped without a reason", OverlapSkip, "g", wid("job", 2), "without a reason", func(t *testing.T, h *History) {
			settleWithout(h, 2, StatusSkipped, "")
		}},
		{"latest: skipped twice", OverlapLatest, "g", wid("job", 2), "reported skipped 2 times", func(t *testing.T, h *History) {
			skipped(2)(t, h)
			h.Skips = append(h.Skips, Skip{Window: wid("job", 2), Worker: "w2", Status: StatusSkipped, Reason: "again"})
		}},
		{"skip: reported skipped but done", OverlapSkip, "g", wid("job", 2), `reported skipped by w2 (overlap skip: previous window still running), but its final status is "done": two outcomes`, func(t *testing.T, h *History) {
			h.Skips = append(h.Skips, Skip{Window: wid("job", 2), Worker: "w2", Status: StatusSkipped, Reason: "overlap skip: previous window still running"})
		}},
		{"skip: superseded", OverlapSkip, "g", wid("job", 2), "overlap policy skip never does", func(t *testing.T, h *History) {
			settleWithout(h, 2, StatusSuperseded, "superseded")
		}},
		{"skip: first window skipped", OverlapSkip, "g", wid("job", 0), "no earlier window", skipped(0)},
		{"latest: newest window skipped", OverlapLatest, "g", wid("job", 4), "no newer window", skipped(4)},
		{"queue: a window skipped", OverlapQueue, "g", wid("job", 2), "overlap policy queue runs every window", skipped(2)},
		{"queue: a skipped window is not settled", OverlapQueue, "e", wid("job", 2), "which overlap policy queue never does", skipped(2)},
		{"allow: a skip reported for a done window", OverlapAllow, "g", wid("job", 1), "reported superseded by w1", func(t *testing.T, h *History) {
			h.Skips = append(h.Skips, Skip{Window: wid("job", 1), Worker: "w1", Status: StatusSuperseded, Reason: "x"})
		}},
		{"skip: a skip of a window never published", OverlapSkip, "g", wid("job", 9), "never published", func(t *testing.T, h *History) {
			h.Skips = append(h.Skips, Skip{Window: wid("job", 9), Worker: "w1", Status: StatusSkipped, Reason: "x"})
		}},

		// (h) replace
		{"replace: k completed after k+1 started", OverlapReplace, "h", wid("job", 1), "after its successor " + wid("job", 2) + " had started", func(t *testing.T, h *History) {
			attemptOf(t, h, 1).End = at(2500)
		}},
		{"replace: k completed after k+2 started, k+1 superseded unstarted", OverlapReplace, "h", wid("job", 1), "after its successor " + wid("job", 3) + " had started", func(t *testing.T, h *History) {
			attemptOf(t, h, 1).End = at(3500)
			settleWithout(h, 2, StatusSuperseded, "overlap replace: superseded by "+wid("job", 3))
		}},
		{"replace: superseded and completed", OverlapReplace, "h", wid("job", 2), "two outcomes", func(t *testing.T, h *History) {
			settleWithout(h, 2, StatusSuperseded, "overlap replace: superseded by "+wid("job", 3))
			h.Completions = append(h.Completions, Completion{Window: wid("job", 2), Token: 3, Worker: "w1"})
		}},
		{"replace: superseded without a reason", OverlapReplace, "h", wid("job", 2), "superseded in the store without a reason", func(t *testing.T, h *History) {
			settleWithout(h, 2, StatusSuperseded, "")
		}},
		{"replace: superseded, reported as skipped", OverlapReplace, "h", wid("job", 2), "but reported skipped by", func(t *testing.T, h *History) {
			settleWithout(h, 2, StatusSuperseded, "overlap replace: superseded by "+wid("job", 3))
			h.Skips[0].Status = StatusSkipped
		}},
		{"replace: newest window superseded", OverlapReplace, "h", wid("job", 4), "no newer window", func(t *testing.T, h *History) {
			settleWithout(h, 4, StatusSuperseded, "overlap replace: superseded")
		}},
		{"replace: a window skipped", OverlapReplace, "h", wid("job", 2), "overlap policy replace never does", skipped(2)},
		{"replace: a skipped window is not settled", OverlapReplace, "e", wid("job", 2), "which overlap policy replace never does", skipped(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanJob("job", tc.overlap, 5)
			tc.mutate(t, &h)
			vs := check(t, h)
			if testing.Verbose() {
				for _, v := range vs {
					t.Log(v)
				}
			}
			expect(t, vs, tc.rule, tc.window, tc.text)
		})
	}
}

// slicesDelete drops the attempts of window id.
func slicesDelete(as []Attempt, id string) []Attempt {
	var out []Attempt
	for _, a := range as {
		if a.Window != id {
			out = append(out, a)
		}
	}
	return out
}

// A window settled as its policy allows needs no handler invocation, and
// is not stuck.
func TestSkippedWindowIsSettled(t *testing.T) {
	h := cleanJob("job", OverlapSkip, 3)
	settleWithout(&h, 1, StatusSkipped, "overlap skip: previous window still running")
	for _, v := range check(t, h) {
		t.Errorf("violation: %v", v)
	}
}

// The overlap rules' input is checked like the rest.
func TestIncompleteOverlapHistoryIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		mutate     func(h *History)
	}{
		{"unknown overlap", `job "job": Overlap = "forbid"`, func(h *History) { h.Jobs[0].Overlap = "forbid" }},
		{"published job not in Jobs", "published windows of jobs not in Jobs (other)", func(h *History) {
			r := h.Published[0]
			r.Job, r.Window, r.Offset = "other", wid("other", 0), 5
			h.Published = append(h.Published, r)
			h.States[r.Window] = State{Status: StatusAbsent}
		}},
		{"skip with an unknown status", `has Status "dropped"`, func(h *History) {
			h.Skips = append(h.Skips, Skip{Window: wid("job", 1), Worker: "w1", Status: "dropped"})
		}},
		{"skips not collected", "no skip reported although the store has 1 skipped or superseded windows", func(h *History) {
			settleWithout(h, 1, StatusSkipped, "r")
			h.Skips = nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanJob("job", OverlapSkip, 5)
			tc.mutate(&h)
			vs, err := Check(h)
			if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Check = %v, %v; want an error wrapping ErrIncomplete mentioning %q", vs, err, tc.text)
			}
		})
	}
}

// Rule (n): every attempt counts towards max_attempts, interrupted ones
// too. Three attempts cut off and the window dead-lettered is legal with
// max_attempts 3; a fourth attempt (the window run once more after its
// attempts were used up by interruptions) breaks the rule.
func TestInterruptedAttemptsCountTowardsMaxAttempts(t *testing.T) {
	h := clean(3)
	h.Jobs[0].MaxAttempts = 3
	id := wid("tick", 1)
	// Window 1's first attempt (token 2) was cut off; two more were too,
	// and it was dead-lettered with the last one's token.
	h.Attempts[1].End, h.Attempts[1].OK = time.Time{}, false
	h.Attempts = append(h.Attempts,
		Attempt{Window: id, Job: "tick", Token: 10, Worker: "w2", Start: t0.Add(1200 * time.Millisecond)},
		Attempt{Window: id, Job: "tick", Token: 11, Worker: "w3", Start: t0.Add(1400 * time.Millisecond)})
	h.Completions = slices.DeleteFunc(h.Completions, func(c Completion) bool { return c.Window == id })
	h.States[id] = State{Status: StatusDeadLettered, Token: 11}
	h.DeadLettered = map[string]bool{id: true}
	claimedAfter(&h, 1, 11)
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("three interrupted attempts then dead-lettered: violations %v", v)
	}
	// A fourth attempt that ran and completed: one too many.
	h.Attempts = append(h.Attempts, Attempt{Window: id, Job: "tick", Token: 12, Worker: "w1", Start: t0.Add(1600 * time.Millisecond), End: t0.Add(1700 * time.Millisecond), OK: true})
	h.Completions = append(h.Completions, Completion{Window: id, Token: 12, Worker: "w1"})
	h.States[id] = State{Status: StatusDone, Token: 12}
	h.DeadLettered = nil
	claimedAfter(&h, 1, 12)
	expect(t, check(t, h), "n", id, "handler invoked with 4 tokens, more than the job's max_attempts 3")
}
