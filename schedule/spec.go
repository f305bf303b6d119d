package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule computes window starts.
type Schedule interface {
	// Next returns the first window start strictly after t, in UTC; the
	// zero time if there is none.
	Next(t time.Time) time.Time
}

// parser accepts 5 fields, 6 with leading seconds, and the descriptors.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// allHours is the hour-field bit mask of a spec that matches every hour.
const allHours = 1<<24 - 1

// ParseSpec parses a cron spec for the time zone loc (nil means UTC).
//
// spec is 5 fields (minute hour day-of-month month day-of-week), 6 fields
// with seconds first, "@every D" (D a Go duration, a whole number of
// seconds, at least 1s), or one of @yearly, @annually, @monthly, @weekly,
// @daily, @midnight and @hourly. A "TZ=" or "CRON_TZ=" prefix is refused:
// the time zone comes from loc.
//
// The returned Schedule follows the daylight-saving rules described in the
// package documentation: a spec whose hour field matches every hour
// (wildcard-hour) follows elapsed time; any other spec (fixed-time) is
// evaluated on local wall-clock time with ISC cron semantics.
func ParseSpec(spec string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, errors.New("empty spec")
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, errors.New("time zone prefixes are not supported in the spec; use the timezone field")
	}
	if rest, ok := strings.CutPrefix(s, "@every"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
		rest = strings.TrimSpace(rest)
		d, err := time.ParseDuration(rest)
		if err != nil {
			return nil, fmt.Errorf("@every: %q is not a duration such as \"10s\" or \"5m\"", rest)
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, fmt.Errorf("@every %v: want a whole number of seconds, at least 1s", d)
		}
		return every{d: d}, nil
	}
	sch, err := parser.Parse(s)
	if err != nil {
		return nil, err
	}
	ss, ok := sch.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("unsupported schedule %q", spec)
	}
	// The cron fields are matched against naive wall-clock times: local
	// wall-clock readings represented as UTC times, where robfig/cron's
	// arithmetic has no daylight-saving transitions to trip over.
	ss.Location = time.UTC
	if ss.Hour&allHours == allHours {
		return &elapsed{spec: ss, loc: loc}, nil
	}
	return &fixed{spec: ss, loc: loc}, nil
}

// every fires at the multiples of d since the Unix epoch, so that every
// producer agrees on the window starts whenever it started. It ignores the
// time zone: elapsed time is the same everywhere.
type every struct{ d time.Duration }

func (e every) Next(t time.Time) time.Time {
	n, d := t.UnixNano(), int64(e.d)
	q := n / d
	if n < 0 && n%d != 0 {
		q-- // floor division
	}
	return time.Unix(0, (q+1)*d).UTC()
}

// elapsed is a wildcard-hour spec. It fires at every instant whose local
// wall-clock reading matches, so a repeated hour fires twice and a skipped
// hour not at all. Within one zone period (a constant UTC offset) wall
// clock and instant differ by a constant, so each period is searched with
// plain cron arithmetic on the naive wall clock.
type elapsed struct {
	spec *cron.SpecSchedule
	loc  *time.Location
}

func (e *elapsed) Next(t time.Time) time.Time {
	from := t
	for range 10000 { // spans; robfig/cron gives up after 5 years anyway
		// The span of constant offset holding the first candidate instant.
		off, _, end := zoneSpan(from.Add(time.Nanosecond), e.loc)
		w := e.spec.Next(from.UTC().Add(off))
		if w.IsZero() {
			return time.Time{}
		}
		inst := w.Add(-off)
		if end.IsZero() || inst.Before(end) {
			return inst.UTC()
		}
		// No match before the span ends (the candidate may lie in a
		// spring-forward gap): search the next span from its start.
		from = end.Add(-time.Nanosecond)
	}
	return time.Time{}
}

// fixed is a fixed-time spec, evaluated on wall-clock time with ISC cron
// daylight-saving semantics: a wall time skipped by spring-forward fires
// once at the end of the gap; a wall time repeated by fall-back fires once,
// at its first occurrence.
type fixed struct {
	spec *cron.SpecSchedule
	loc  *time.Location
}

func (f *fixed) Next(t time.Time) time.Time {
	// Every wall time up to the latest reading the clock has shown by t has
	// had its window already (at its first occurrence or, if skipped, at
	// the end of the gap), so the search starts there. That is the reading
	// at t except inside the repeated hour of a fall-back, where it is the
	// reading just before the clocks went back.
	w := maxWall(t, f.loc)
	for range 100000 {
		cw := f.spec.Next(w)
		if cw.IsZero() {
			return time.Time{}
		}
		if inst, ok := resolveFirst(cw, f.loc); ok && inst.After(t) {
			return inst.UTC()
		}
		// Only reached if zone transitions pile up in ways no real zone
		// does; keep walking the wall clock.
		w = cw
	}
	return time.Time{}
}

// naive returns the wall-clock reading of t in loc as a UTC time.
func naive(t time.Time, loc *time.Location) time.Time {
	_, off := t.In(loc).Zone()
	return t.UTC().Add(time.Duration(off) * time.Second)
}

// zoneSpan returns the UTC offset in effect in loc at t, and the bounds of
// a span of instants around t that all have that offset: start <= t < end,
// end zero if the offset never changes again. Spans can end without the
// offset changing (at year boundaries, see below): callers must not take a
// span's end for a transition unless the offset differs after it.
//
// It wraps time.Time.ZoneBounds, which beyond a zone's last listed
// transition (for most zones in 2037) computes bounds from the zone's
// POSIX rule one UTC year at a time, reports year boundaries as bounds and
// ends leap years a day early: on the last day of such a year it returns
// an end at or before t. No rule changes the offset that day, so the span
// is then cut at the start of the next UTC year instead.
func zoneSpan(t time.Time, loc *time.Location) (offset time.Duration, start, end time.Time) {
	l := t.In(loc)
	_, off := l.Zone()
	start, end = l.ZoneBounds()
	if !end.IsZero() && !end.After(t) {
		end = time.Date(t.UTC().Year()+1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if start.After(t) { // never seen; keep the contract
		start = t
	}
	return time.Duration(off) * time.Second, start, end
}

// maxWall returns the latest naive wall-clock reading shown in loc at or
// before t, considering t's span and the instant just before it.
func maxWall(t time.Time, loc *time.Location) time.Time {
	w := naive(t, loc)
	_, start, _ := zoneSpan(t, loc)
	if start.IsZero() {
		return w
	}
	if before := naive(start.Add(-time.Nanosecond), loc); before.After(w) {
		return before
	}
	return w
}

// resolveFirst maps a naive wall time to the first instant whose reading in
// loc it is or, for a wall time inside a spring-forward gap, to the instant
// the gap ends. ok is false only if no span could be found.
func resolveFirst(w time.Time, loc *time.Location) (inst time.Time, ok bool) {
	// UTC offsets lie within ±14h, so every instant reading w lies within
	// 15h of w taken as UTC. Walk the spans of that stretch in order; each
	// starts where the one before ended.
	a := w.Add(-15 * time.Hour)
	limit := w.Add(15 * time.Hour)
	var prevOff time.Duration
	for first := true; a.Before(limit); first = false {
		off, start, end := zoneSpan(a, loc)
		if !first {
			start = a
			if off > prevOff {
				// The clocks jumped forward at start: wall times in
				// [start+prevOff, start+off) never occur.
				if !w.Before(start.Add(prevOff)) && w.Before(start.Add(off)) {
					return start.UTC(), true
				}
			}
		}
		inst := w.Add(-off)
		if (start.IsZero() || !inst.Before(start)) && (end.IsZero() || inst.Before(end)) {
			return inst.UTC(), true
		}
		if end.IsZero() {
			break
		}
		prevOff, a = off, end
	}
	return time.Time{}, false
}
