package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	if name == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// The 2026 transitions the tables below cross:
//
//	Europe/Berlin     spring 03-29 01:00Z: 02:00 CET  -> 03:00 CEST (+1 -> +2)
//	                  fall   10-25 01:00Z: 03:00 CEST -> 02:00 CET  (+2 -> +1)
//	America/New_York  spring 03-08 07:00Z: 02:00 EST  -> 03:00 EDT  (-5 -> -4)
//	                  fall   11-01 06:00Z: 02:00 EDT  -> 01:00 EST  (-4 -> -5)
func TestTransitionsAreWhereTheTablesSayTheyAre(t *testing.T) {
	for _, tc := range []struct{ tz, at, before, after string }{
		{"Europe/Berlin", "2026-03-29T01:00:00Z", "CET", "CEST"},
		{"Europe/Berlin", "2026-10-25T01:00:00Z", "CEST", "CET"},
		{"America/New_York", "2026-03-08T07:00:00Z", "EST", "EDT"},
		{"America/New_York", "2026-11-01T06:00:00Z", "EDT", "EST"},
	} {
		loc, at := mustLoc(t, tc.tz), utc(tc.at)
		b, _ := at.Add(-time.Nanosecond).In(loc).Zone()
		a, _ := at.In(loc).Zone()
		if b != tc.before || a != tc.after {
			t.Errorf("%s at %s: %s -> %s, want %s -> %s (tzdata changed?)", tc.tz, tc.at, b, a, tc.before, tc.after)
		}
	}
}

// TestDaylightSaving walks consecutive windows across the 2026 transitions
// and asserts their exact UTC instants.
func TestDaylightSaving(t *testing.T) {
	tests := []struct {
		name, spec, tz, from string
		want                 []string // consecutive windows after from, UTC
	}{
		// Europe/Berlin, spring forward: 02:00-02:59 do not exist on 03-29.
		{"berlin spring 30 2: skipped 02:30 runs once when the gap ends", "30 2 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"berlin spring 0 2: runs when the gap ends", "0 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}},
		{"berlin spring 0,30 2: two skipped times make one window", "0,30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:30:00Z"}},
		{"berlin spring 0 2,3: skipped 02:00 and real 03:00 share the instant", "0 2,3 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T01:00:00Z"}},
		{"berlin spring */30: no ticks in the missing hour", "*/30 * * * *", "Europe/Berlin", "2026-03-29T00:10:00Z",
			[]string{"2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"}},
		{"berlin spring 30 *: hourly, 60 minutes apart", "30 * * * *", "Europe/Berlin", "2026-03-28T23:45:00Z",
			[]string{"2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z", "2026-03-29T02:30:00Z"}},
		{"berlin spring @hourly", "@hourly", "Europe/Berlin", "2026-03-29T00:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
		{"berlin spring @every 1h", "@every 1h", "Europe/Berlin", "2026-03-29T00:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "2026-03-29T03:00:00Z"}},
		{"berlin spring @daily", "@daily", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"}},
		{"berlin spring seconds 15 30 2", "15 30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:15Z"}},
		{"berlin spring seconds */20: straight over the gap", "*/20 * * * * *", "Europe/Berlin", "2026-03-29T00:59:30Z",
			[]string{"2026-03-29T00:59:40Z", "2026-03-29T01:00:00Z", "2026-03-29T01:00:20Z", "2026-03-29T01:00:40Z"}},

		// Europe/Berlin, fall back: 02:00-02:59 happen twice on 10-25.
		{"berlin fall 30 2: repeated 02:30 runs once, at its first occurrence", "30 2 * * *", "Europe/Berlin", "2026-10-23T12:00:00Z",
			[]string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"berlin fall 30 2 from inside the repeated hour", "30 2 * * *", "Europe/Berlin", "2026-10-25T01:15:00Z",
			[]string{"2026-10-26T01:30:00Z"}},
		{"berlin fall 0 2", "0 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-26T01:00:00Z"}},
		{"berlin fall */15 2 is fixed-time: once per wall time", "*/15 2 * * *", "Europe/Berlin", "2026-10-24T23:50:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T00:15:00Z", "2026-10-25T00:30:00Z", "2026-10-25T00:45:00Z", "2026-10-26T01:00:00Z"}},
		{"berlin fall */30: both 02:xx hours", "*/30 * * * *", "Europe/Berlin", "2026-10-25T00:10:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"}},
		{"berlin fall 30 *: 02:30 twice", "30 * * * *", "Europe/Berlin", "2026-10-25T00:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:30:00Z"}},
		{"berlin fall @every 1h", "@every 1h", "Europe/Berlin", "2026-10-25T00:00:00Z",
			[]string{"2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
		{"berlin fall @daily", "@daily", "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"}},
		{"berlin fall seconds 15 30 2", "15 30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:15Z", "2026-10-26T01:30:15Z"}},

		// America/New_York, spring forward: 02:00-02:59 do not exist on 03-08.
		{"new york spring 30 2: runs at 03:00 EDT", "30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"new york spring 0 2", "0 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"}},
		{"new york spring */30", "*/30 * * * *", "America/New_York", "2026-03-08T06:10:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}},
		{"new york spring 30 *", "30 * * * *", "America/New_York", "2026-03-08T06:00:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z"}},
		{"new york spring @every 1h", "@every 1h", "America/New_York", "2026-03-08T06:30:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		{"new york spring @daily", "@daily", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}},
		{"new york spring seconds 45 30 2", "45 30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:45Z"}},

		// America/New_York, fall back: 01:00-01:59 happen twice on 11-01.
		{"new york fall 30 1: repeated 01:30 runs once", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"new york fall 0 1", "0 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-02T06:00:00Z"}},
		{"new york fall 0 2: 02:00 occurs once (EST)", "0 2 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T07:00:00Z", "2026-11-02T07:00:00Z"}},
		{"new york fall */30: both 01:xx hours", "*/30 * * * *", "America/New_York", "2026-11-01T04:50:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"}},
		{"new york fall 30 *: 01:30 twice", "30 * * * *", "America/New_York", "2026-11-01T04:00:00Z",
			[]string{"2026-11-01T04:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:30:00Z"}},
		{"new york fall @every 1h ignores the zone", "@every 1h", "America/New_York", "2026-11-01T04:59:59Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		{"new york fall @daily", "@daily", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"}},
		{"new york fall seconds 10 30 1", "10 30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:10Z", "2026-11-02T06:30:10Z"}},

		// Without daylight saving.
		{"@every aligns to the epoch", "@every 7s", "", "2026-11-22T10:00:00Z",
			[]string{"2026-11-22T10:00:04Z", "2026-11-22T10:00:11Z"}},
		{"@every from a window is the next window", "@every 10s", "", "2026-11-22T10:00:10Z",
			[]string{"2026-11-22T10:00:20Z"}},
		{"@every from just before a window", "@every 10s", "", "2026-11-22T10:00:09.999999999Z",
			[]string{"2026-11-22T10:00:10Z"}},
		{"sub-second from", "* * * * * *", "", "2026-11-22T10:00:00.5Z",
			[]string{"2026-11-22T10:00:01Z", "2026-11-22T10:00:02Z"}},
		{"utc weekday", "0 9 * * 1", "", "2026-11-22T10:00:00Z",
			[]string{"2026-11-23T09:00:00Z", "2026-11-30T09:00:00Z"}},
		{"dom or dow as in vixie cron", "0 0 1 * 1", "", "2026-11-28T12:00:00Z",
			[]string{"2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z", "2026-12-07T00:00:00Z"}},
		{"@yearly in a zone", "@yearly", "Asia/Tokyo", "2026-06-01T00:00:00Z",
			[]string{"2026-12-31T15:00:00Z", "2027-12-31T15:00:00Z"}},
		{"leap day", "0 12 29 2 *", "", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T12:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := mustLoc(t, tt.tz)
			s, err := ParseSpec(tt.spec, loc)
			if err != nil {
				t.Fatal(err)
			}
			at, err := time.Parse(time.RFC3339Nano, tt.from)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tt.want {
				at = s.Next(at)
				if got := at.Format(time.RFC3339Nano); got != w {
					t.Fatalf("window %d = %s (%s), want %s", i, got, at.In(loc).Format("2006-01-02 15:04:05 MST"), w)
				}
				if at.Location() != time.UTC {
					t.Fatalf("window %d is in %v, not UTC", i, at.Location())
				}
			}
		})
	}
}

func TestParseSpecErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", "empty spec"},
		{"  ", "empty spec"},
		{"61 * * * *", "end of range (61) above maximum (59): 61"},
		{"* * * *", "expected 5 to 6 fields, found 4: [* * * *]"},
		{"1 2 3 4 5 6 7", "expected 5 to 6 fields, found 7: [1 2 3 4 5 6 7]"},
		{"@reboot", "unrecognized descriptor: @reboot"},
		{"@every", `@every: "" is not a duration such as "10s" or "5m"`},
		{"@every soon", `@every: "soon" is not a duration such as "10s" or "5m"`},
		{"@every 1500ms", "@every 1.5s: want a whole number of seconds, at least 1s"},
		{"@every -1m", "@every -1m0s: want a whole number of seconds, at least 1s"},
		{"TZ=UTC 0 0 * * *", "time zone prefixes are not supported in the spec; use the timezone field"},
		{"CRON_TZ=UTC 0 0 * * *", "time zone prefixes are not supported in the spec; use the timezone field"},
	} {
		_, err := ParseSpec(tc.spec, nil)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseSpec(%q) error = %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestClassification(t *testing.T) {
	for _, tc := range []struct {
		spec string
		kind string
	}{
		{"30 2 * * *", "fixed"},
		{"0 9-17 * * 1-5", "fixed"},
		{"*/15 2 * * *", "fixed"},
		{"0 */2 * * *", "fixed"},
		{"0 0-22 * * *", "fixed"},
		{"@daily", "fixed"},
		{"@midnight", "fixed"},
		{"@weekly", "fixed"},
		{"@monthly", "fixed"},
		{"@yearly", "fixed"},
		{"@annually", "fixed"},
		{"0 30 2 * * *", "fixed"},
		{"*/15 * * * *", "elapsed"},
		{"0 * * * *", "elapsed"},
		{"0 */1 * * *", "elapsed"},
		{"0 0-23 * * *", "elapsed"},
		{"0 * * * 1", "elapsed"},
		{"*/10 * * * * *", "elapsed"},
		{"@hourly", "elapsed"},
		{"@every 1h", "every"},
	} {
		s, err := ParseSpec(tc.spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		var kind string
		switch s.(type) {
		case *fixed:
			kind = "fixed"
		case *elapsed:
			kind = "elapsed"
		case every:
			kind = "every"
		}
		if kind != tc.kind {
			t.Errorf("%q is %s, want %s", tc.spec, kind, tc.kind)
		}
	}
}

// naiveMatcher matches a spec's fields against naive wall-clock times with
// robfig/cron in UTC, where there is no daylight saving: the oracle below
// relies on robfig/cron only for field matching.
func naiveMatcher(t testing.TB, spec string) func(w time.Time) bool {
	t.Helper()
	s, err := parser.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	s.(*cron.SpecSchedule).Location = time.UTC
	return func(w time.Time) bool { return s.Next(w.Add(-time.Second)).Equal(w) }
}

// bruteForce lists the windows in (from, to] by stepping through every
// instant at the given step, straight from the definitions in the package
// documentation:
//
//   - wildcard-hour: an instant is a window iff its wall-clock reading
//     matches;
//   - fixed-time: a matching wall time w fires at the first instant whose
//     reading is >= w (its first occurrence or, in a gap, the end of the
//     gap); instants shared by several wall times count once.
func bruteForce(match func(time.Time) bool, fixedTime bool, loc *time.Location, from, to time.Time, step time.Duration) []time.Time {
	var out []time.Time
	maxSeen := naive(from, loc)
	for t := from.Add(step); !t.After(to); t = t.Add(step) {
		w := naive(t, loc)
		if !fixedTime {
			if match(w) {
				out = append(out, t)
			}
			continue
		}
		if !w.After(maxSeen) {
			continue // a repeated reading: its windows have run
		}
		fire := false
		for c := maxSeen.Add(step); !c.After(w); c = c.Add(step) {
			if match(c) {
				fire = true
			}
		}
		if fire {
			out = append(out, t)
		}
		maxSeen = w
	}
	return out
}

// TestAgainstBruteForce compares Next with the brute-force oracle around
// every 2026 transition of zones with whole-hour, half-hour and southern
// hemisphere daylight saving.
func TestAgainstBruteForce(t *testing.T) {
	specs := []string{
		"30 2 * * *", "0 2 * * *", "0,30 1,2,3 * * *", "*/15 2 * * *", "0 */2 * * *", "45 0-22 * * *",
		"0 0 * * *", "59 23 * * *", "*/30 * * * *", "30 * * * *", "0 * * * *", "*/7 * * * *",
	}
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe", "America/Santiago", "Asia/Tokyo", "UTC"}
	for _, tz := range zones {
		loc := mustLoc(t, tz)
		// The transitions of 2026 and of 2040, a leap year past the zone
		// database's listed transitions (where Go computes them from the
		// zone's POSIX rule), and the 2040/2041 year boundary.
		var at []time.Time
		for _, year := range []int{2026, 2040} {
			at = append(at, transitions(loc, year)...)
		}
		at = append(at, utc("2040-12-31T00:00:00Z"), utc("2041-01-01T00:00:00Z"))
		for _, tr := range at {
			from, to := tr.Add(-26*time.Hour), tr.Add(26*time.Hour)
			for _, spec := range specs {
				s, err := ParseSpec(spec, loc)
				if err != nil {
					t.Fatal(err)
				}
				_, fixedTime := s.(*fixed)
				want := bruteForce(naiveMatcher(t, spec), fixedTime, loc, from, to, time.Minute)
				var got []time.Time
				for w := s.Next(from); !w.After(to); w = s.Next(w) {
					got = append(got, w)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s %q around %v:\n got %v\nwant %v", tz, spec, tr, got, want)
				}
			}
		}
	}
}

// transitions returns the instants in year at which loc's UTC offset
// changes.
func transitions(loc *time.Location, year int) []time.Time {
	var out []time.Time
	x := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
	for x.Year() == year {
		off, _, end := zoneSpan(x, loc)
		if end.IsZero() {
			break
		}
		if o2, _, _ := zoneSpan(end, loc); o2 != off && end.Year() == year {
			out = append(out, end.UTC())
		}
		x = end
	}
	return out
}

func TestZoneSpan(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	// On the last UTC day of a leap year past the listed transitions,
	// time.Time.ZoneBounds ends the zone at or before t.
	for _, at := range []string{"2040-12-31T00:00:00Z", "2040-12-31T12:00:00Z", "2040-12-31T23:59:59Z", "2039-12-31T12:00:00Z", "2026-06-01T00:00:00Z"} {
		x := utc(at)
		off, start, end := zoneSpan(x, berlin)
		if start.After(x) || !end.After(x) {
			t.Errorf("zoneSpan(%s) = [%v, %v), not around it", at, start, end)
		}
		if _, o := x.In(berlin).Zone(); time.Duration(o)*time.Second != off {
			t.Errorf("zoneSpan(%s) offset %v, want %ds", at, off, o)
		}
		if _, o := end.Add(-time.Nanosecond).In(berlin).Zone(); time.Duration(o)*time.Second != off {
			t.Errorf("zoneSpan(%s): offset changes before the span ends at %v", at, end)
		}
	}
	for _, tz := range []string{"Europe/Berlin", "America/New_York", "Australia/Sydney"} {
		for _, year := range []int{2026, 2040, 2100} {
			if n := len(transitions(mustLoc(t, tz), year)); n != 2 {
				t.Errorf("%s %d: %d transitions, want 2", tz, year, n)
			}
		}
	}
	if n := len(transitions(time.UTC, 2040)); n != 0 {
		t.Errorf("UTC: %d transitions", n)
	}
}

// TestAgainstRobfigWithoutDST: in zones without transitions the package
// agrees with robfig/cron's own Next.
func TestAgainstRobfigWithoutDST(t *testing.T) {
	specs := []string{"30 2 * * *", "*/15 * * * *", "0 9-17 * * 1-5", "0 0 1,15 * *", "0 0 * * 0", "5 4 * 2 *",
		"*/10 * * * * *", "0 0 12 29 2 *", "@daily", "@weekly", "@monthly", "@yearly", "@hourly"}
	for _, tz := range []string{"UTC", "Asia/Tokyo", "Asia/Kolkata"} {
		loc := mustLoc(t, tz)
		for _, spec := range specs {
			rs, err := parser.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			rs.(*cron.SpecSchedule).Location = loc
			s, err := ParseSpec(spec, loc)
			if err != nil {
				t.Fatal(err)
			}
			at := utc("2026-01-01T00:00:00Z")
			for range 200 {
				want := rs.Next(at).UTC()
				got := s.Next(at)
				if !got.Equal(want) {
					t.Fatalf("%s %q Next(%v) = %v, robfig says %v", tz, spec, at, got, want)
				}
				at = got
			}
		}
	}
}

// TestYearOfWindows iterates a year of windows: Next is strictly after its
// argument, in UTC, and the counts are what the semantics promise.
func TestYearOfWindows(t *testing.T) {
	tests := []struct {
		year     int
		tz, spec string
		want     int // windows in (year-01-01T00:00Z, year+1-01-01T00:00Z]; -1: don't check
	}{
		{2026, "Europe/Berlin", "30 2 * * *", 365}, // one per local day, gap or not
		{2026, "America/New_York", "30 1 * * *", 365},
		{2026, "Europe/Berlin", "30 * * * *", 8760},    // one per real hour
		{2026, "Europe/Berlin", "*/20 * * * *", 26280}, // three per real hour
		{2026, "America/New_York", "@hourly", 8760},
		{2026, "UTC", "@every 45m", 11680},
		{2026, "Australia/Lord_Howe", "0 2 * * *", -1},
		{2026, "Australia/Lord_Howe", "0,30 * * * *", 17520},
		{2026, "Europe/Berlin", "0 0,1,2,3 * * *", 365*4 - 1}, // 02:00 and 03:00 share 03-29's 01:00Z
		{2026, "America/New_York", "0 30 2 * * 0", -1},
		// A leap year computed from the zones' POSIX rules.
		{2040, "Europe/Berlin", "30 2 * * *", 366},
		{2040, "Europe/Berlin", "30 * * * *", 8784},
		{2040, "America/New_York", "*/20 * * * *", 26352},
		{2040, "Australia/Sydney", "@hourly", 8784},
		{2040, "Australia/Sydney", "0 0 * * *", 366},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.year, " ", tt.tz, " ", tt.spec), func(t *testing.T) {
			s, err := ParseSpec(tt.spec, mustLoc(t, tt.tz))
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(tt.year, 1, 1, 0, 0, 0, 0, time.UTC)
			end := at.AddDate(1, 0, 0)
			n := 0
			for {
				next := s.Next(at)
				if !next.After(at) || next.Location() != time.UTC {
					t.Fatalf("Next(%v) = %v: not strictly after, or not UTC", at, next)
				}
				if next.After(end) {
					break
				}
				n++
				at = next
			}
			if tt.want >= 0 && n != tt.want {
				t.Errorf("%d windows in %d, want %d", n, tt.year, tt.want)
			}
		})
	}
}

func TestNoWindow(t *testing.T) {
	s, err := ParseSpec("0 0 30 2 *", nil) // February 30th
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(utc("2026-01-01T00:00:00Z")); !got.IsZero() {
		t.Fatalf("Next = %v, want the zero time", got)
	}
	s, _ = ParseSpec("0 0 30 2 *", mustLoc(t, "Europe/Berlin"))
	if got := s.Next(utc("2026-01-01T00:00:00Z")); !got.IsZero() {
		t.Fatalf("Next = %v, want the zero time", got)
	}
}

func TestNilLocationIsUTC(t *testing.T) {
	s, err := ParseSpec("0 2 * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(utc("2026-03-29T00:00:00Z")); !got.Equal(utc("2026-03-29T02:00:00Z")) {
		t.Fatalf("Next = %v", got)
	}
}

func BenchmarkNext(b *testing.B) {
	loc := mustLoc(b, "Europe/Berlin")
	for _, spec := range []string{"30 2 * * *", "0 9 * * 1-5", "*/15 * * * *", "*/10 * * * * *", "@every 1s"} {
		s, err := ParseSpec(spec, loc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.NewReplacer(" ", "_", "/", "÷").Replace(spec), func(b *testing.B) {
			start := utc("2026-01-01T00:00:00Z")
			at := start
			for b.Loop() {
				if at = s.Next(at); at.Year() > 2027 {
					at = start // stay in the present, across both transitions
				}
			}
		})
	}
}
