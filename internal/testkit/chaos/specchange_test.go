package chaos

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/specs"
)

// versioned is clean(n) with a change log: job "tick" created as version
// 1 ("@every 1s") half a second before its first window, every record
// produced by version 1.
func versioned(n int) History {
	h := clean(n)
	h.SpecChanges = []SpecChange{{Job: "tick", Version: 1, Op: specs.OpCreate, Committed: at(-500), EffectiveFrom: at(-500), Schedule: "@every 1s"}}
	for i := range h.Published {
		h.Published[i].ScheduleVersion = 1
	}
	return h
}

// drop removes window i of job "tick" from h: never published, never run.
func drop(h *History, is ...int) {
	for _, i := range is {
		id := wid("tick", i)
		var rs []Record
		for _, r := range h.Published {
			if r.Window != id {
				rs = append(rs, r)
			}
		}
		h.Published = rs
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
		delete(h.States, id)
	}
}

// setVersion says window i of job "tick" was produced by version v.
func setVersion(h *History, i int, v int64) {
	for k := range h.Published {
		if h.Published[k].Window == wid("tick", i) {
			h.Published[k].ScheduleVersion = v
		}
	}
}

// changed is versioned(10) with an update at 4.5s to version 2, "@every
// 2s": version 1 published windows 0..4, version 2 windows 6 and 8; the
// odd windows after the change are not due.
func changed() History {
	h := versioned(10)
	h.SpecChanges = append(h.SpecChanges, SpecChange{Job: "tick", Version: 2, Op: specs.OpUpdate, Committed: at(4500), EffectiveFrom: at(4500), Schedule: "@every 2s"})
	drop(&h, 5, 7, 9)
	setVersion(&h, 6, 2)
	setVersion(&h, 8, 2)
	return h
}

// paused is versioned(10) paused at 4.5s (version 2) and resumed at 7.5s
// (version 3): no window of the paused span is due, and the resume does
// not catch them up.
func paused() History {
	h := versioned(10)
	h.SpecChanges = append(h.SpecChanges,
		SpecChange{Job: "tick", Version: 2, Op: specs.OpPause, Committed: at(4500), EffectiveFrom: at(4500), Schedule: "@every 1s", Paused: true},
		SpecChange{Job: "tick", Version: 3, Op: specs.OpResume, Committed: at(7500), EffectiveFrom: at(7500), Schedule: "@every 1s"})
	drop(&h, 5, 6, 7)
	setVersion(&h, 8, 3)
	setVersion(&h, 9, 3)
	return h
}

// deleted is versioned(10) deleted at 4.5s (version 2, a tombstone: no
// EffectiveFrom) and re-created at 7.5s as version 3.
func deleted() History {
	h := versioned(10)
	h.SpecChanges = append(h.SpecChanges,
		SpecChange{Job: "tick", Version: 2, Op: specs.OpDelete, Committed: at(4500)},
		SpecChange{Job: "tick", Version: 3, Op: specs.OpCreate, Committed: at(7500), EffectiveFrom: at(7500), Schedule: "@every 1s"})
	drop(&h, 5, 6, 7)
	setVersion(&h, 8, 3)
	setVersion(&h, 9, 3)
	return h
}

func TestSpecChangesLegal(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    func() History
	}{
		{"created, never changed", func() History { return versioned(5) }},
		{"imported with no bound", func() History {
			h := versioned(5)
			h.SpecChanges[0].EffectiveFrom = time.Time{}
			return h
		}},
		{"cron changed", changed},
		{"Next instead of a cron spec", func() History {
			h := changed()
			h.SpecChanges[1].Schedule = ""
			h.SpecChanges[1].Next = func(t time.Time) time.Time { return t.Truncate(2 * time.Second).Add(2 * time.Second) }
			return h
		}},
		{"changes given in any order", func() History {
			h := changed()
			h.SpecChanges[0], h.SpecChanges[1] = h.SpecChanges[1], h.SpecChanges[0]
			return h
		}},
		{"paused and resumed without catch-up", paused},
		{"deleted and re-created", deleted},
		{"disabled", func() History {
			h := versioned(10)
			h.SpecChanges = append(h.SpecChanges, SpecChange{Job: "tick", Version: 2, Op: specs.OpUpdate, Committed: at(4500), EffectiveFrom: at(4500), Schedule: "@every 1s", Disabled: true})
			drop(&h, 5, 6, 7, 8, 9)
			return h
		}},
		{"window both versions call for lost beyond catch-up", func() History {
			// Window 6 fell due while nobody led; the next leader acted
			// only at 8s, beyond the 500ms catch-up limit.
			h := changed()
			h.Jobs[0].Catchup = 500 * time.Millisecond
			drop(&h, 6)
			return h
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := check(t, tc.h()); len(v) != 0 {
				t.Fatalf("violations: %v", v)
			}
		})
	}
}

// Each hand-made history breaks one rule of schedules as a log.
func TestSpecChangeViolations(t *testing.T) {
	for _, tc := range []struct {
		name, rule, window, text string
		h                        func() History
	}{
		{"version never committed", "o", wid("tick", 3), "never committed", func() History {
			h := changed()
			setVersion(&h, 3, 7)
			return h
		}},
		{"published before its version committed", "o", wid("tick", 6), "committed only at", func() History {
			h := changed()
			h.SpecChanges[1].Committed = at(6500) // window 6 was published at 6.001s
			return h
		}},
		{"no schedule version", "o", wid("tick", 2), "without a schedule version", func() History {
			h := changed()
			setVersion(&h, 2, 0)
			return h
		}},
		{"new version publishes a window before it took effect", "o", wid("tick", 4), "not after version 2", func() History {
			// Flushed with the change's transaction, but as version 2.
			h := changed()
			setVersion(&h, 4, 2)
			h.Published[4].PublishedAt = at(4600)
			return h
		}},
		{"stale version after the change", "o", wid("tick", 6), "stale version", func() History {
			h := changed()
			setVersion(&h, 6, 1)
			return h
		}},
		{"window of a pausing version", "o", wid("tick", 9), "publishes no window", func() History {
			h := paused()
			setVersion(&h, 9, 2)
			return h
		}},
		{"window after a delete", "p", wid("tick", 5), "version 2 (delete)", func() History {
			h := deleted()
			d := versioned(10)
			for _, r := range d.Published {
				if r.Window == wid("tick", 5) {
					h.Published = append(h.Published, r)
				}
			}
			h.States[wid("tick", 5)] = d.States[wid("tick", 5)]
			return h
		}},
		{"window while paused", "p", wid("tick", 6), "paused", func() History {
			h := paused()
			d := versioned(10)
			for _, r := range d.Published {
				if r.Window == wid("tick", 6) {
					h.Published = append(h.Published, r)
				}
			}
			h.States[wid("tick", 6)] = d.States[wid("tick", 6)]
			return h
		}},
		{"window published under two versions", "q", wid("tick", 6), "versions 1 and 2", func() History {
			h := changed()
			for _, r := range h.Published {
				if r.Window == wid("tick", 6) {
					r.ScheduleVersion, r.Offset = 1, 99
					h.Published = append(h.Published, r)
					break
				}
			}
			return h
		}},
		{"window both versions call for lost", "q", wid("tick", 6), "lost across the change", func() History {
			h := changed()
			drop(&h, 6)
			return h
		}},
		{"version takes effect before the one it follows", "q", "", "before version 1", func() History {
			h := changed()
			h.SpecChanges[1].EffectiveFrom = at(-1000)
			return h
		}},
		{"window only the old version calls for lost", "a", wid("tick", 3), "never published", func() History {
			h := changed()
			drop(&h, 3)
			return h
		}},
		{"window of the resumed version lost", "a", wid("tick", 8), "never published", func() History {
			h := paused()
			drop(&h, 8)
			return h
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, check(t, tc.h()), tc.rule, tc.window, tc.text)
		})
	}
}

// A lost window both versions call for is reported once, under rule (q),
// not also under rule (a).
func TestSharedWindowLostReportedOnce(t *testing.T) {
	h := changed()
	drop(&h, 6)
	vs := check(t, h)
	if len(vs) != 1 || vs[0].Rule != "q" {
		t.Fatalf("want one violation of rule (q); got %v", vs)
	}
}

// Without SpecChanges a record's ScheduleVersion is not judged: the
// checker behaves as when schedules were a file.
func TestNoSpecChangesIgnoresVersions(t *testing.T) {
	h := clean(5)
	h.Published[2].ScheduleVersion = 42
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}

func TestIncompleteSpecChangesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		mutate     func(h *History)
	}{
		{"schedule does not parse", `Schedule "every second"`, func(h *History) { h.SpecChanges[1].Schedule = "every second" }},
		{"no schedule", "no Schedule and no Next", func(h *History) { h.SpecChanges[1].Schedule = "" }},
		{"unknown time zone", `Timezone "Mars/Olympus"`, func(h *History) { h.SpecChanges[1].Timezone = "Mars/Olympus" }},
		{"commit time missing", "Committed not set", func(h *History) { h.SpecChanges[1].Committed = time.Time{} }},
		{"version missing", "Version 0", func(h *History) { h.SpecChanges[1].Version = 0 }},
		{"op missing", "Op empty", func(h *History) { h.SpecChanges[1].Op = "" }},
		{"change of an unknown job", "job not in Jobs", func(h *History) { h.SpecChanges[1].Job = "tock" }},
		{"job without a change", "jobs without a change in SpecChanges (tock)", func(h *History) {
			h.Jobs = append(h.Jobs, Job{Name: "tock", Every: time.Second})
		}},
		{"versions not collected", "no published record carries a ScheduleVersion", func(h *History) {
			for i := range h.Published {
				h.Published[i].ScheduleVersion = 0
			}
		}},
		{"publication time not collected", "without PublishedAt", func(h *History) { h.Published[0].PublishedAt = time.Time{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := changed()
			tc.mutate(&h)
			vs, err := Check(h)
			if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Check = %v, %v; want an error wrapping ErrIncomplete mentioning %q", vs, err, tc.text)
			}
		})
	}
}

// A job with SpecChanges needs no Every: its versions give its schedule.
func TestVersionedJobNeedsNoEvery(t *testing.T) {
	h := changed()
	h.Jobs[0].Every = 0
	if v := check(t, h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}
