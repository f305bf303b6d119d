package chaos

import (
	"sort"
	"strings"
	"time"
)

// The overlap rules (f), (g) and (h): how the windows of one job may
// overlap, by the job's policy; rule (i), the order of a queue job's
// fencing tokens; and rule (k), an allow job's max_concurrent.

// policies maps each job to its overlap policy (OverlapQueue if unset).
func policies(h History) map[string]string {
	m := make(map[string]string, len(h.Jobs))
	for _, j := range h.Jobs {
		m[j.Name] = j.policy()
	}
	return m
}

// jobWindow is one published window of a job with what the run did to it.
type jobWindow struct {
	id       string
	start    time.Time
	attempts []Attempt // in start order
}

// firstStart is the start of w's earliest attempt; ok is false if it has
// none.
func (w jobWindow) firstStart() (t time.Time, a Attempt, ok bool) {
	if len(w.attempts) == 0 {
		return time.Time{}, Attempt{}, false
	}
	return w.attempts[0].Start, w.attempts[0], true
}

// overlapRun is what the overlap rules share: each job's published
// windows in start order, and the run's attempts, completions and skips
// by window.
type overlapRun struct {
	h           History
	byJob       map[string][]jobWindow
	completions map[string][]Completion
	skips       map[string][]Skip
}

func newOverlapRun(h History) *overlapRun {
	o := &overlapRun{h: h, byJob: map[string][]jobWindow{}, completions: map[string][]Completion{}, skips: map[string][]Skip{}}
	attempts := map[string][]Attempt{}
	for _, a := range h.Attempts {
		attempts[a.Window] = append(attempts[a.Window], a)
	}
	seen := map[string]bool{}
	for _, r := range h.Published {
		if seen[r.Window] {
			continue // published twice: rule (a)
		}
		seen[r.Window] = true
		as := attempts[r.Window]
		sort.SliceStable(as, func(i, j int) bool { return as[i].Start.Before(as[j].Start) })
		o.byJob[r.Job] = append(o.byJob[r.Job], jobWindow{id: r.Window, start: r.Start, attempts: as})
	}
	for _, ws := range o.byJob {
		sort.SliceStable(ws, func(i, j int) bool {
			if !ws[i].start.Equal(ws[j].start) {
				return ws[i].start.Before(ws[j].start)
			}
			return ws[i].id < ws[j].id
		})
	}
	for _, c := range h.Completions {
		o.completions[c.Window] = append(o.completions[c.Window], c)
	}
	for _, sk := range h.Skips {
		o.skips[sk.Window] = append(o.skips[sk.Window], sk)
	}
	return o
}

// settling returns when window w was settled as far as the ledger tells:
// the End of the attempt whose token the store holds for a done or
// dead-lettered window (for a dead-lettered one without such an ended
// attempt, the latest End of its attempts). settled is false for a window
// neither done, dead-lettered, skipped nor superseded; known is false if
// it was settled but the ledger does not tell when (always for skipped and
// superseded windows, which rules (e), (g) and (h) judge). by is the
// settling attempt.
func (o *overlapRun) settling(w jobWindow) (at time.Time, by Attempt, settled, known bool) {
	st := o.h.States[w.id]
	dead := o.h.DeadLettered[w.id] || st.Status == StatusDeadLettered
	switch {
	case st.Status == StatusSkipped || st.Status == StatusSuperseded || st.Status == StatusSkippedReplay:
		return time.Time{}, Attempt{}, true, false
	case st.Status != StatusDone && !dead:
		return time.Time{}, Attempt{}, false, false
	}
	for _, a := range w.attempts {
		if a.Token == st.Token && !a.End.IsZero() && a.End.After(at) {
			at, by = a.End, a
		}
	}
	if at.IsZero() && dead && st.Status != StatusDone {
		for _, a := range w.attempts {
			if a.End.After(at) {
				at, by = a.End, a
			}
		}
	}
	return at, by, true, !at.IsZero()
}

// checkOverlap is rules (f), (g), (h) and (i).
func checkOverlap(h History, add addFunc) {
	o := newOverlapRun(h)
	policy := policies(h)
	published := map[string]bool{}
	for _, ws := range o.byJob {
		for _, w := range ws {
			published[w.id] = true
		}
	}
	for _, j := range h.Jobs {
		ws := o.byJob[j.Name]
		switch p := j.policy(); p {
		case OverlapQueue:
			o.checkQueue(ws, add)
			o.checkQueueTokens(ws, add)
			o.neverSettledByPolicy(p, ws, add)
		case OverlapAllow:
			o.neverSettledByPolicy(p, ws, add)
			if j.MaxConcurrent > 0 {
				checkMaxConcurrent(j, ws, add)
			}
		case OverlapSkip, OverlapLatest:
			o.checkSettledByPolicy(p, "g", ws, add)
		case OverlapReplace:
			o.checkReplace(ws, add)
			o.checkSettledByPolicy(p, "h", ws, add)
		}
	}
	var stray []string
	for id := range o.skips {
		if !published[id] {
			stray = append(stray, id)
		}
	}
	sort.Strings(stray)
	for _, id := range stray {
		rule := "g"
		if job, _, _ := strings.Cut(id, "@"); policy[job] == OverlapReplace {
			rule = "h"
		}
		add(rule, id, "reported %s by %s, but the window was never published", o.skips[id][0].Status, o.skips[id][0].Worker)
	}
}

// checkQueue is rule (f) for the windows of one queue job.
func (o *overlapRun) checkQueue(ws []jobWindow, add addFunc) {
	var (
		bound     time.Time // the latest settling of an earlier window
		boundWin  string    // that window
		boundBy   Attempt   // and its settling attempt
		unsettled = -1      // the first earlier window never settled
	)
	for i, w := range ws {
		if first, a, ok := w.firstStart(); ok {
			switch {
			case unsettled >= 0:
				add("f", w.id, "attempt on %s (token %d) started at %s although the earlier window %s was never settled (status %q): a queue job runs its windows one at a time, in order",
					a.Worker, a.Token, first.Format(time.RFC3339Nano), ws[unsettled].id, o.h.States[ws[unsettled].id].Status)
			case first.Before(bound):
				add("f", w.id, "attempt on %s (token %d) started at %s, before the earlier window %s was settled: its settling attempt (token %d on %s) ended at %s",
					a.Worker, a.Token, first.Format(time.RFC3339Nano), boundWin, boundBy.Token, boundBy.Worker, bound.Format(time.RFC3339Nano))
			}
		}
		at, by, settled, known := o.settling(w)
		switch {
		case !settled && unsettled < 0:
			unsettled = i
		case known && at.After(bound):
			bound, boundWin, boundBy = at, w.id, by
		}
	}
}

// checkQueueTokens is rule (i) for the windows of one queue job: every
// attempt of a window carries a token above the token that settled (done
// or dead-lettered) each earlier window of the job. A window's claim is
// taken only once the window before it is settled (with that window's
// completion, in the same store call), from the job's one token counter,
// so a queue job's fencing tokens grow in window order, and a downstream
// system may fence by job, not only by window.
func (o *overlapRun) checkQueueTokens(ws []jobWindow, add addFunc) {
	var (
		max    int64  // the highest settling token of an earlier window
		maxWin string // that window
	)
	for _, w := range ws {
		for _, a := range w.attempts {
			if max > 0 && a.Token <= max {
				add("i", w.id, "attempt on %s has token %d, not above token %d that settled the earlier window %s: a queue job's windows are claimed in order, each after the one before it was settled",
					a.Worker, a.Token, max, maxWin)
				break
			}
		}
		st := o.h.States[w.id]
		if (st.Status == StatusDone || st.Status == StatusDeadLettered) && st.Token > max {
			max, maxWin = st.Token, w.id
		}
	}
}

// checkReplace is the ordering half of rule (h) for the windows of one
// replace job: the attempt that completed a window ended before any later
// window's first attempt started.
func (o *overlapRun) checkReplace(ws []jobWindow, add addFunc) {
	for i, w := range ws {
		st := o.h.States[w.id]
		if st.Status != StatusDone {
			continue
		}
		var end time.Time
		var by Attempt
		for _, a := range w.attempts {
			if a.Token == st.Token && a.End.After(end) {
				end, by = a.End, a
			}
		}
		if end.IsZero() {
			continue // rule (e) reports a done window without its invocation
		}
		for _, later := range ws[i+1:] {
			if first, a, ok := later.firstStart(); ok && first.Before(end) {
				add("h", w.id, "completed by token %d (%s) whose attempt ended at %s, after its successor %s had started at %s (token %d on %s): a superseded window was completed",
					by.Token, by.Worker, end.Format(time.RFC3339Nano), later.id, first.Format(time.RFC3339Nano), a.Token, a.Worker)
				break
			}
		}
	}
}

// checkSettledByPolicy is rule (g) for a skip or latest job and the
// per-window half of rule (h) for a replace job: a window settled without
// running has one outcome, with its reason, reported once, and a window
// it gave way to; no other outcome is reported as a skip.
func (o *overlapRun) checkSettledByPolicy(policy, rule string, ws []jobWindow, add addFunc) {
	want := settledStatus(policy)
	for i, w := range ws {
		st := o.h.States[w.id]
		skips := o.skips[w.id]
		switch st.Status {
		case want:
			if cs := o.completions[w.id]; len(cs) > 0 {
				add(rule, w.id, "%s and also completed by token %d (%s): two outcomes", want, cs[0].Token, cs[0].Worker)
			}
			if st.Reason == "" {
				add(rule, w.id, "%s in the store without a reason", want)
			}
			n := 0
			for _, sk := range skips {
				if sk.Status == want {
					n++
				}
			}
			// Recorded once: the store's status is terminal. Reported at most
			// once: a worker reports a settlement only when its own write
			// made it, and a worker killed between that write and its log
			// line reports none.
			if n > 1 {
				add(rule, w.id, "%s in the store, but reported %s %d times (want at most once: only the write that settled it reports it)", want, want, n)
			}
			switch {
			case policy == OverlapSkip && i == 0:
				add(rule, w.id, "skipped, but no earlier window of the job was published: overlap skip skips a window only while the previous one runs")
			case policy != OverlapSkip && i == len(ws)-1:
				add(rule, w.id, "%s, but no newer window of the job was published: overlap %s gives way only to a newer window", want, policy)
			}
			for _, sk := range skips {
				if sk.Status != want {
					add(rule, w.id, "%s in the store, but reported %s by %s (%s): two outcomes", want, sk.Status, sk.Worker, sk.Reason)
				}
			}
		case StatusSkipped, StatusSuperseded:
			add(rule, w.id, "settled as %q (%s), which overlap policy %s never does", st.Status, st.Reason, policy)
		default:
			for _, sk := range skips {
				add(rule, w.id, "reported %s by %s (%s), but its final status is %q: two outcomes", sk.Status, sk.Worker, sk.Reason, st.Status)
			}
		}
	}
}

// neverSettledByPolicy is the part of rule (g) for queue and allow jobs:
// their windows are never skipped or superseded.
func (o *overlapRun) neverSettledByPolicy(policy string, ws []jobWindow, add addFunc) {
	for _, w := range ws {
		if st := o.h.States[w.id]; st.Status == StatusSkipped || st.Status == StatusSuperseded {
			add("g", w.id, "settled as %q (%s), but overlap policy %s runs every window", st.Status, st.Reason, policy)
		}
		for _, sk := range o.skips[w.id] {
			add("g", w.id, "reported %s by %s (%s), but overlap policy %s runs every window", sk.Status, sk.Worker, sk.Reason, policy)
		}
	}
}

// checkMaxConcurrent is rule (k) for the windows of one allow job: per
// worker, the attempts running at each start never exceed the job's
// MaxConcurrent.
func checkMaxConcurrent(j Job, ws []jobWindow, add addFunc) {
	type event struct {
		at    time.Time
		start bool
		a     Attempt
	}
	byWorker := map[string][]event{}
	for _, w := range ws {
		for _, a := range w.attempts {
			if a.End.IsZero() {
				continue // its worker died with it
			}
			byWorker[a.Worker] = append(byWorker[a.Worker], event{a.Start, true, a}, event{a.End, false, a})
		}
	}
	workers := make([]string, 0, len(byWorker))
	for w := range byWorker {
		workers = append(workers, w)
	}
	sort.Strings(workers)
	for _, worker := range workers {
		evs := byWorker[worker]
		sort.SliceStable(evs, func(x, y int) bool {
			if !evs[x].at.Equal(evs[y].at) {
				return evs[x].at.Before(evs[y].at)
			}
			return !evs[x].start && evs[y].start // an end frees its slot for a start at the same instant
		})
		running := 0
		for _, e := range evs {
			if !e.start {
				running--
				continue
			}
			running++
			if running > j.MaxConcurrent {
				add("k", e.a.Window, "worker %s started it (token %d) while %d other windows of job %s ran there; max_concurrent is %d",
					worker, e.a.Token, running-1, j.Name, j.MaxConcurrent)
			}
		}
	}
}
