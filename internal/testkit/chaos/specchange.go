package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// SpecChange is one committed change of a job's spec, for rules (o), (p)
// and (q) and the versioned form of rule (a): a record of the schedule
// change log (specs.Change) joined with what the change did to the job's
// schedules-topic record (specs.Record).
type SpecChange struct {
	// Job is the job's name (specs.Change.Job); it must be in History.Jobs.
	Job string
	// Version is the version the change set (specs.Change.VersionAfter;
	// for a delete, the tombstone's version).
	Version int64
	// Op is the change (specs.Change.Op). OpDelete stops the job.
	Op specs.Op
	// Committed is when the leader committed it (specs.Change.At).
	Committed time.Time
	// EffectiveFrom is the instant the version applies from: its windows
	// start strictly after it (specs.Record.EffectiveFrom of the record
	// the change wrote: Committed + the producers' PublishLead, since the
	// windows up to then may have been published ahead). Zero on the
	// first change of a job means an import with no bound (an upgrade
	// keeps its catch-up); zero on any other change, or on a delete (a
	// tombstone carries no record), means Committed +
	// History.PublishLead: the windows published ahead before the change
	// stand.
	EffectiveFrom time.Time
	// Schedule and Timezone are the version's cron spec and time zone as
	// written (specs.Record.Spec.Schedule and .Timezone), parsed with
	// schedule.ParseSpec. Next, if set, is used instead: the first window
	// start strictly after t (zero if none), which also models a one-shot
	// "at", start and end bounds. A version that stops the job needs
	// neither.
	Schedule, Timezone string
	Next               func(t time.Time) time.Time
	// Paused reports that the version pauses the job (specs.Record.Paused
	// != nil); Disabled that its spec has enabled: false. Either, like a
	// delete, stops the job: it publishes no window of the version.
	Paused, Disabled bool
}

// stops reports whether the version publishes no window.
func (c SpecChange) stops() bool { return c.Op == specs.OpDelete || c.Paused || c.Disabled }

// what names the change in a violation's detail.
func (c SpecChange) what() string {
	switch {
	case c.Op == specs.OpDelete:
		return fmt.Sprintf("version %d (delete)", c.Version)
	case c.Paused:
		return fmt.Sprintf("version %d (%s, paused)", c.Version, c.Op)
	case c.Disabled:
		return fmt.Sprintf("version %d (%s, enabled: false)", c.Version, c.Op)
	}
	if c.Schedule != "" {
		return fmt.Sprintf("version %d (%s %q)", c.Version, c.Op, c.Schedule)
	}
	return fmt.Sprintf("version %d (%s)", c.Version, c.Op)
}

// nextFunc returns c's window-start function, or an error saying why
// there is none.
func (c SpecChange) nextFunc() (func(time.Time) time.Time, error) {
	if c.Next != nil {
		return c.Next, nil
	}
	if c.Schedule == "" {
		return nil, fmt.Errorf("no Schedule and no Next: the checker needs the version's cron spec (specs.Record.Spec.Schedule) to know its windows")
	}
	var loc *time.Location
	if c.Timezone != "" {
		l, err := time.LoadLocation(c.Timezone)
		if err != nil {
			return nil, fmt.Errorf("Timezone %q: %w", c.Timezone, err)
		}
		loc = l
	}
	s, err := schedule.ParseSpec(c.Schedule, loc)
	if err != nil {
		return nil, fmt.Errorf("Schedule %q: %w", c.Schedule, err)
	}
	return s.Next, nil
}

// maxSegmentWindows bounds the window starts computed for one version, so
// that a Next that never reaches DueUntil cannot hang the checker.
const maxSegmentWindows = 1_000_000

// version is one SpecChange placed on its job's timeline: it is in force
// for the window starts in (lo, hi].
type version struct {
	SpecChange
	next func(time.Time) time.Time // nil if the version stops the job
	// lo is the bound its windows start strictly after; unbounded for an
	// import with no EffectiveFrom (then lo is zero).
	lo        time.Time
	unbounded bool
	// hi is the next version's lo (its windows start at or before it);
	// zero for the job's last version.
	hi time.Time
}

// after reports whether start s falls after v's lower bound.
func (v version) after(s time.Time) bool { return v.unbounded || s.After(v.lo) }

// produces reports whether v's schedule has a window starting at s.
func (v version) produces(s time.Time) bool {
	return v.next != nil && v.next(s.Add(-time.Nanosecond)).Equal(s)
}

// timeline is one job's versions in commit order, with what the checker
// needs to judge its windows.
type timeline struct {
	job Job
	vs  []version
	// records are the job's published records.
	records []Record
	// evidence are the instants a leader is known to have been live and
	// to have acted for the job: its records' publications and its
	// changes' commits (a change is committed only after the windows due
	// up to it are published, in the same transaction).
	evidence []time.Time
}

// inForce returns the index of the version in force for window start s:
// the last one whose lower bound s is after; -1 if none.
func (tl *timeline) inForce(s time.Time) int {
	k := -1
	for i, v := range tl.vs {
		if v.after(s) {
			k = i
		}
	}
	return k
}

// expected returns the window starts version i calls for during the run:
// its schedule's starts in (lo, hi], before DueUntil. An unbounded first
// version starts at the job's first published window or at its commit,
// whichever is earlier: kjob does not invent history.
func (tl *timeline) expected(i int, dueUntil time.Time) []time.Time {
	v := tl.vs[i]
	if v.next == nil {
		return nil
	}
	lo := v.lo
	if v.unbounded {
		lo = v.Committed
		for _, r := range tl.records {
			if r.Start.Before(lo.Add(time.Nanosecond)) {
				lo = r.Start.Add(-time.Nanosecond)
			}
		}
	}
	var out []time.Time
	for s := v.next(lo); !s.IsZero() && s.After(lo) && s.Before(dueUntil) && (v.hi.IsZero() || !s.After(v.hi)); s = v.next(s) {
		if len(out) == maxSegmentWindows {
			break
		}
		out = append(out, s)
	}
	return out
}

// sharedAcross reports whether start s of version i is one that version i
// and an adjacent version (the one before or after it, both publishing)
// both call for: rule (q) judges it, not rule (a).
func (tl *timeline) sharedAcross(i int, s time.Time) bool {
	return (i > 0 && tl.vs[i-1].produces(s)) || (i+1 < len(tl.vs) && tl.vs[i+1].produces(s))
}

// timelines builds the timeline of every job with SpecChanges. complete
// has checked that every change's schedule parses.
func timelines(h History) map[string]*timeline {
	if len(h.SpecChanges) == 0 {
		return nil
	}
	jobs := map[string]Job{}
	for _, j := range h.Jobs {
		jobs[j.Name] = j
	}
	out := map[string]*timeline{}
	for _, c := range h.SpecChanges {
		tl := out[c.Job]
		if tl == nil {
			tl = &timeline{job: jobs[c.Job]}
			out[c.Job] = tl
		}
		v := version{SpecChange: c}
		if !c.stops() {
			v.next, _ = c.nextFunc()
		}
		tl.vs = append(tl.vs, v)
		tl.evidence = append(tl.evidence, c.Committed)
	}
	for _, r := range h.Published {
		if tl := out[r.Job]; tl != nil {
			tl.records = append(tl.records, r)
			tl.evidence = append(tl.evidence, r.PublishedAt)
		}
	}
	for _, tl := range out {
		sort.SliceStable(tl.vs, func(i, j int) bool {
			if !tl.vs[i].Committed.Equal(tl.vs[j].Committed) {
				return tl.vs[i].Committed.Before(tl.vs[j].Committed)
			}
			return tl.vs[i].Version < tl.vs[j].Version
		})
		for i := range tl.vs {
			v := &tl.vs[i]
			switch {
			case !v.EffectiveFrom.IsZero():
				v.lo = v.EffectiveFrom
			case i == 0 && !v.stops():
				v.unbounded = true
			default:
				// A delete (or a change without EffectiveFrom) takes
				// effect PublishLead after its commit: the windows up to
				// then may have been published ahead, and stand.
				v.lo = v.Committed.Add(h.PublishLead)
			}
			if i > 0 {
				tl.vs[i-1].hi = v.lo
			}
		}
	}
	return out
}

// specChangesMissing lists what SpecChanges lacks for the rules to judge
// it; nil when SpecChanges is empty.
func specChangesMissing(h History) []string {
	if len(h.SpecChanges) == 0 {
		return nil
	}
	var missing []string
	miss := func(format string, args ...any) { missing = append(missing, fmt.Sprintf(format, args...)) }
	jobs := map[string]bool{}
	for _, j := range h.Jobs {
		jobs[j.Name] = true
	}
	changed := map[string]bool{}
	for i, c := range h.SpecChanges {
		changed[c.Job] = true
		at := fmt.Sprintf("SpecChanges[%d] (job %q, version %d)", i, c.Job, c.Version)
		switch {
		case c.Job == "":
			miss("%s: Job empty; want the change log record's job", at)
		case !jobs[c.Job]:
			miss("%s: job not in Jobs; the checker needs every changed job's catch-up and overlap policy", at)
		}
		if c.Version < 1 {
			miss("%s: Version %d; want the change's VersionAfter (>= 1)", at, c.Version)
		}
		if c.Op == "" {
			miss("%s: Op empty; want the change log record's op", at)
		}
		if c.Committed.IsZero() {
			miss("%s: Committed not set; want the change log record's At", at)
		}
		if !c.stops() {
			if _, err := c.nextFunc(); err != nil {
				miss("%s: %v", at, err)
			}
		}
	}
	var unchanged []string
	for _, j := range h.Jobs {
		if !changed[j.Name] {
			unchanged = append(unchanged, j.Name)
		}
	}
	if len(unchanged) > 0 {
		miss("jobs without a change in SpecChanges (%s): with a change log, every job has at least its creation or import", strings.Join(unchanged, ", "))
	}
	var noVersion, noTime int
	versioned := 0
	for _, r := range h.Published {
		if !changed[r.Job] {
			continue
		}
		versioned++
		if r.ScheduleVersion == 0 {
			noVersion++
		}
		if r.PublishedAt.IsZero() {
			noTime++
		}
	}
	if versioned > 0 && noVersion == versioned {
		miss("no published record carries a ScheduleVersion: fill Record.ScheduleVersion from the window record's schedule_version")
	}
	if noTime > 0 {
		miss("%d published records without PublishedAt: fill it from the window record's published_at", noTime)
	}
	return missing
}

// checkVersionedPublished is rule (a) for a job with SpecChanges: the
// windows due are those of the version in force at each start; a version
// that stops the job calls for none. A window both versions of a change
// call for is left to rule (q).
func checkVersionedPublished(h History, tl *timeline, add addFunc) {
	starts := map[int64]bool{}
	for _, r := range tl.records {
		starts[r.Start.UnixNano()] = true
	}
	for i := range tl.vs {
		for _, s := range tl.expected(i, h.DueUntil) {
			if starts[s.UnixNano()] || tl.sharedAcross(i, s) {
				continue
			}
			if why := lostWhy(h, tl.job, s, tl.evidence); why != "" {
				add("a", windowID(tl.job.Name, s), "%s (%s, in force from %s)", why, tl.vs[i].what(), bound(tl.vs[i]))
			}
		}
	}
}

// checkVersions is rule (o): every window was produced by a version of
// its job committed at or before its publication, and in force at its
// start.
func checkVersions(h History, tls map[string]*timeline, add addFunc) {
	for _, r := range h.Published {
		tl := tls[r.Job]
		if tl == nil {
			continue
		}
		if r.ScheduleVersion == 0 {
			add("o", r.Window, "published at %s without a schedule version", stamp(r.PublishedAt))
			continue
		}
		// The version's change: the latest committed at or before the
		// publication (a job re-created after its tombstone was compacted
		// may count its versions from 1 again).
		idx, early := -1, -1
		for i, v := range tl.vs {
			if v.Version != r.ScheduleVersion {
				continue
			}
			if v.Committed.After(r.PublishedAt) {
				if early < 0 {
					early = i
				}
				continue
			}
			idx = i
		}
		switch {
		case idx < 0 && early >= 0:
			add("o", r.Window, "published at %s by version %d, which was committed only at %s", stamp(r.PublishedAt), r.ScheduleVersion, stamp(tl.vs[early].Committed))
			continue
		case idx < 0:
			add("o", r.Window, "published at %s by version %d, which the change log never committed", stamp(r.PublishedAt), r.ScheduleVersion)
			continue
		}
		v := tl.vs[idx]
		k := tl.inForce(r.Start)
		switch {
		case k >= 0 && tl.vs[k].stops():
			// Rule (p) judges a window due while the job was stopped.
		case v.stops():
			add("o", r.Window, "published by %s, which publishes no window", v.what())
		case k < idx:
			add("o", r.Window, "starts at %s, not after %s took effect at %s", stamp(r.Start), v.what(), bound(v))
		case k > idx:
			w := tl.vs[k]
			add("o", r.Window, "published by %s, but %s, committed at %s, was in force from %s: a stale version produced it",
				v.what(), w.what(), stamp(w.Committed), bound(w))
		}
	}
}

// checkStopped is rule (p): no window of a job is published for a start
// after a delete, pause or disable took effect, until the job is
// re-created, resumed or enabled again.
func checkStopped(tls map[string]*timeline, add addFunc) {
	for _, tl := range tls {
		for _, r := range tl.records {
			k := tl.inForce(r.Start)
			if k < 0 || !tl.vs[k].stops() {
				continue
			}
			v := tl.vs[k]
			add("p", r.Window, "published at %s (version %d), but %s, committed at %s, stopped the job from %s",
				stamp(r.PublishedAt), r.ScheduleVersion, v.what(), stamp(v.Committed), bound(v))
		}
	}
}

// checkAcrossChanges is rule (q): across a change, no window is published
// under two versions, a version never takes effect before the one it
// follows, and a window both the old and the new version call for is
// published (explained only by the catch-up limit, as in rule (a)).
func checkAcrossChanges(h History, tls map[string]*timeline, add addFunc) {
	versions := map[string]map[int64]bool{}
	for _, r := range h.Published {
		if tls[r.Job] == nil {
			continue
		}
		if versions[r.Window] == nil {
			versions[r.Window] = map[int64]bool{}
		}
		versions[r.Window][r.ScheduleVersion] = true
	}
	for id, vs := range versions {
		if len(vs) < 2 {
			continue
		}
		var list []string
		for v := range vs {
			list = append(list, fmt.Sprint(v))
		}
		sort.Strings(list)
		add("q", id, "published under versions %s: a change published the window again", strings.Join(list, " and "))
	}
	for _, tl := range tls {
		starts := map[int64]bool{}
		for _, r := range tl.records {
			starts[r.Start.UnixNano()] = true
		}
		reported := map[int64]bool{} // a start shared with both neighbours is reported once
		for i := 1; i < len(tl.vs); i++ {
			a, b := tl.vs[i-1], tl.vs[i]
			if !a.unbounded && b.lo.Before(a.lo) {
				add("q", "", "job %s: %s takes effect at %s, before %s that it follows took effect at %s: their windows overlap",
					tl.job.Name, b.what(), bound(b), a.what(), bound(a))
			}
			if a.stops() || b.stops() {
				continue
			}
			for _, k := range []int{i - 1, i} {
				other := tl.vs[2*i-1-k]
				for _, s := range tl.expected(k, h.DueUntil) {
					if starts[s.UnixNano()] || reported[s.UnixNano()] || !other.produces(s) {
						continue
					}
					if why := lostWhy(h, tl.job, s, tl.evidence); why != "" {
						reported[s.UnixNano()] = true
						add("q", windowID(tl.job.Name, s), "called for by both %s and %s (change effective from %s), lost across the change: %s",
							a.what(), b.what(), bound(b), why)
					}
				}
			}
		}
	}
}

// windowID is a window's id, "<job>@<start>".
func windowID(job string, s time.Time) string {
	return fmt.Sprintf("%s@%s", job, s.UTC().Format(time.RFC3339Nano))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// bound names the instant a version took effect.
func bound(v version) string {
	if v.unbounded {
		return "the start (imported with no bound)"
	}
	return stamp(v.lo)
}
