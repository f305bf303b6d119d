package chaos

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/specs"
)

// only fails t unless vs is exactly one violation, of rule on window,
// mentioning text.
func only(t *testing.T, vs []Violation, rule, window, text string) {
	t.Helper()
	if len(vs) != 1 {
		t.Fatalf("want one violation of rule (%s) on %q; got %v", rule, window, vs)
	}
	expect(t, vs, rule, window, text)
}

// Rule (r): a worker holds a window published ahead and starts its
// handler at its start, never before.
func TestAttemptBeforeWindowStart(t *testing.T) {
	h := clean(5)
	h.PublishLead = 500 * time.Millisecond
	a := attemptOf(t, &h, 2)

	a.Start = h.Published[2].Start // exactly at the start: on time
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("an attempt starting at its window's start reported: %v", v)
	}

	a.Start = h.Published[2].Start.Add(-time.Millisecond)
	only(t, check(t, h), "r", wid("tick", 2), "attempt with token 3 on w1 started at 2026-11-23T02:00:01.999Z, 1ms before the window's start 2026-11-23T02:00:02Z")
}

// Rule (r) judges the attempts of windows whose record is known only.
func TestAttemptOfUnpublishedWindowNotJudgedByR(t *testing.T) {
	h := clean(5)
	h.Attempts = append(h.Attempts, Attempt{Window: "other@x", Job: "other", Token: 1, Worker: "w1", Start: t0.Add(-time.Hour), End: t0, OK: true})
	for _, v := range check(t, h) {
		if v.Rule == "r" {
			t.Fatalf("attempt of a window without a record judged by rule (r): %v", v)
		}
	}
}

// Rule (s): a window is published at most PublishLead before its start,
// give or take 1ms of slack.
func TestPublishedMoreThanLeadEarly(t *testing.T) {
	const lead = 500 * time.Millisecond
	for _, tc := range []struct {
		name  string
		lead  time.Duration
		early time.Duration // how long before its start window 2 is published
		want  string        // the violation's text; "" for none
	}{
		{"exactly the lead early", lead, lead, ""},
		{"the lead and the slack early", lead, lead + time.Millisecond, ""},
		{"the lead and 2ms early", lead, lead + 2*time.Millisecond, "published at 2026-11-23T02:00:01.498Z (0/2), 502ms before its start 2026-11-23T02:00:02Z: more than the publish lead 500ms"},
		{"no lead, published at the start", 0, 0, ""},
		{"no lead, published 5ms early", 0, 5 * time.Millisecond, "5ms before its start 2026-11-23T02:00:02Z: more than the publish lead 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean(5)
			h.PublishLead = tc.lead
			h.Published[2].PublishedAt = h.Published[2].Start.Add(-tc.early)
			vs := check(t, h)
			if tc.want == "" {
				if len(vs) != 0 {
					t.Fatalf("violations: %v", vs)
				}
				return
			}
			only(t, vs, "s", wid("tick", 2), tc.want)
		})
	}
}

// A record without PublishedAt is not judged by rule (s) (a history
// without spec changes need not have it).
func TestRecordWithoutPublishedAtNotJudgedByS(t *testing.T) {
	h := clean(5)
	h.Published[2].PublishedAt = time.Time{}
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}

func TestNegativePublishLeadRefused(t *testing.T) {
	h := clean(5)
	h.PublishLead = -time.Second
	vs, err := Check(h)
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "PublishLead -1s negative") {
		t.Fatalf("Check = %v, %v; want an error wrapping ErrIncomplete naming PublishLead", vs, err)
	}
}

// republish adds window i of job "tick" back to h as versioned(10) had it
// (record, attempt, completion, done state), produced by version v and
// published at publishedAt.
func republish(h *History, i int, v int64, publishedAt time.Time) {
	d := versioned(10)
	id := wid("tick", i)
	for _, r := range d.Published {
		if r.Window == id {
			r.ScheduleVersion, r.PublishedAt = v, publishedAt
			h.Published = append(h.Published, r)
		}
	}
	for _, a := range d.Attempts {
		if a.Window == id {
			h.Attempts = append(h.Attempts, a)
		}
	}
	for _, c := range d.Completions {
		if c.Window == id {
			h.Completions = append(h.Completions, c)
		}
	}
	h.States[id] = d.States[id]
}

// deletedAhead is deleted() with a publish lead of 1s: the delete
// committed at 4.5s takes effect at 5.5s, and window 5, published ahead
// at 4.4s under version 1, stands. The job is re-created at 6.5s (version
// 3, effective from 7.5s).
func deletedAhead() History {
	h := deleted()
	h.PublishLead = time.Second
	h.SpecChanges[2].Committed = at(6500)
	republish(&h, 5, 1, at(4400))
	return h
}

// Rule (p) with a publish lead: a delete committed at T takes effect at
// T + PublishLead. A window starting in (T, T+PublishLead] published
// ahead before T stands; one starting after T+PublishLead is a
// violation.
func TestDeleteTakesEffectAfterPublishLead(t *testing.T) {
	if v := check(t, deletedAhead()); len(v) != 0 {
		t.Fatalf("a window published ahead before the delete, starting within its lead, reported: %v", v)
	}

	// Window 6 starts after 5.5s: the delete stopped it, although it was
	// published (1s ahead) under version 1.
	h := deletedAhead()
	republish(&h, 6, 1, at(5000))
	only(t, check(t, h), "p", wid("tick", 6), "version 2 (delete), committed at 2026-11-23T02:00:04.5Z, stopped the job from 2026-11-23T02:00:05.5Z")

	// Without the lead the delete takes effect at its commit, and window
	// 5 is a violation.
	h = deletedAhead()
	h.PublishLead = 0
	expect(t, check(t, h), "p", wid("tick", 5), "stopped the job from 2026-11-23T02:00:04.5Z")

	// Rule (a): the old version is in force up to T + PublishLead, so its
	// window 5 is due: the delete's transaction publishes it.
	h = deletedAhead()
	drop(&h, 5)
	only(t, check(t, h), "a", wid("tick", 5), "never published")
}

// A delete committed within the publish lead of the change before it
// takes effect after that change did (rule (q)), and the window between
// the two instants is the changed version's (rules (o), (p)).
func TestDeleteWithinLeadOfChange(t *testing.T) {
	build := func() History {
		h := versioned(10)
		h.PublishLead = time.Second
		h.SpecChanges = append(h.SpecChanges,
			SpecChange{Job: "tick", Version: 2, Op: specs.OpUpdate, Committed: at(4500), EffectiveFrom: at(5500), Schedule: "@every 1s", Timezone: "UTC"},
			SpecChange{Job: "tick", Version: 3, Op: specs.OpDelete, Committed: at(5000)})
		drop(&h, 6, 7, 8, 9)
		republish(&h, 6, 2, at(5000)) // flushed by the delete's transaction
		return h
	}
	if v := check(t, build()); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}

	// Were the delete to take effect at its commit, it would precede the
	// update's EffectiveFrom.
	h := build()
	h.PublishLead = 0
	expect(t, check(t, h), "q", "", "version 3 (delete) takes effect at 2026-11-23T02:00:05Z, before version 2")
}

// A change other than a job's first without EffectiveFrom takes effect
// at Committed + PublishLead, like a delete.
func TestZeroEffectiveFromMeansCommittedPlusLead(t *testing.T) {
	// paused(): pause committed at 4.5s, resume at 7.5s. With a lead of
	// 700ms and no EffectiveFrom, the pause is in force for (5.2s, 8.2s]:
	// window 5 is version 1's (published ahead at 4.3s), window 8 is
	// paused, window 9 is the resumed version's.
	build := func() History {
		h := paused()
		h.PublishLead = 700 * time.Millisecond
		h.SpecChanges[1].EffectiveFrom = time.Time{}
		h.SpecChanges[2].EffectiveFrom = time.Time{}
		drop(&h, 8)
		republish(&h, 5, 1, at(4300))
		return h
	}
	if v := check(t, build()); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}

	h := build()
	republish(&h, 8, 3, at(8001))
	expect(t, check(t, h), "p", wid("tick", 8), "stopped the job from 2026-11-23T02:00:05.2Z")
}
