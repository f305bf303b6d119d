package lanes

import (
	"strconv"
	"strings"
	"testing"
)

// runFair plays a scenario on a Fair, one step a line:
//
//	push j#1 [limit]   window j#1 of job j waits for a slot (limit: max_concurrent, 0 none)
//	pop j#1            the next slot goes to j#1 ("pop -": to no window)
//	release j          a window of j gives its slot back
//	remove j#1         j#1 is dropped while it waits
//	startable N        N windows may take a slot now
//	waiting N          N windows wait
//	held j N           j's windows hold N slots
//	clear j#1 k#1 ...  Clear returns exactly these windows
func runFair(t *testing.T, steps []string) {
	t.Helper()
	f := NewFair()
	items := map[string]*Item{}
	for i, s := range steps {
		fs := strings.Fields(s)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("step %d %q: "+format, append([]any{i + 1, s}, args...)...)
		}
		num := func(k int) int {
			n, err := strconv.Atoi(fs[k])
			if err != nil {
				fail("bad number %q", fs[k])
			}
			return n
		}
		switch fs[0] {
		case "push":
			key, _, _ := strings.Cut(fs[1], "#")
			it := &Item{Key: key, Policy: Allow, Data: fs[1]}
			items[fs[1]] = it
			limit := 0
			if len(fs) > 2 {
				limit = num(2)
			}
			f.Push(it, limit)
		case "pop":
			got := "-"
			if it := f.Pop(); it != nil {
				got = it.Data.(string)
			}
			if got != fs[1] {
				fail("popped %s", got)
			}
		case "release":
			f.Release(fs[1])
		case "remove":
			if !f.Remove(items[fs[1]]) {
				fail("not waiting")
			}
		case "startable":
			if got := f.Startable(); got != num(1) {
				fail("startable %d", got)
			}
		case "waiting":
			if got := f.Waiting(); got != num(1) {
				fail("waiting %d", got)
			}
		case "held":
			if got := f.Held(fs[1]); got != num(2) {
				fail("held %d", got)
			}
		case "clear":
			got := map[string]bool{}
			for _, it := range f.Clear() {
				got[it.Data.(string)] = true
			}
			if len(got) != len(fs)-1 {
				fail("cleared %v", got)
			}
			for _, n := range fs[1:] {
				if !got[n] {
					fail("cleared %v, not %s", got, n)
				}
			}
		default:
			fail("unknown step")
		}
	}
}

// Fairness: a slot goes to the job holding the fewest, in turn among
// equals, so a job's backlog never starves another job.
func TestFairScenarios(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []string
	}{
		{"one job: in push order", []string{
			"push a#1", "push a#2", "push a#3",
			"pop a#1", "pop a#2", "pop a#3", "pop -", "held a 3",
		}},
		{"a job arriving behind a backlog gets the next slot", []string{
			"push a#1", "push a#2", "push a#3", "push a#4",
			"pop a#1", "pop a#2", // a holds every slot (2)
			"push b#1",
			"release a", // a#1 returned
			"pop b#1",   // b holds none, a holds one
			"release a", "pop a#3",
		}},
		{"round-robin among jobs holding as many", []string{
			"push a#1", "push a#2", "push a#3",
			"push b#1", "push b#2",
			"push c#1",
			"pop a#1", "pop b#1", "pop c#1", // each holds 1
			"pop a#2", "pop b#2", "pop a#3", "pop -",
		}},
		{"a job that released goes behind the jobs already waiting at its count", []string{
			"push a#1", "push b#1", "push b#2", "push c#1", "push c#2",
			"pop a#1", "pop b#1", "pop c#1",
			"push a#2",
			"release a", // a back to 0 holding: served before b and c, which hold 1
			"pop a#2", "pop b#2", "pop c#2",
		}},
		{"many single-window jobs do not starve a job with nothing running", []string{
			"push a#1", "push a#2", "pop a#1",
			"push q1#1", "push q2#1", "push q3#1",
			"pop q1#1", "pop q2#1", "pop q3#1", // they hold none: before a, which holds one
			"pop a#2",
		}},
		{"remove and clear", []string{
			"push a#1", "push a#2", "push b#1", "waiting 3",
			"remove a#1", "waiting 2", "startable 2",
			"pop b#1", "clear a#2", "waiting 0", "startable 0", "pop -",
			"held b 1", "release b", "held b 0",
		}},
		{"a released slot of a job nobody waits on is forgotten", []string{
			"push a#1", "pop a#1", "release a", "release a", "held a 0", "pop -",
			"push a#2", "pop a#2", "held a 1",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runFair(t, tc.steps) })
	}
}

// max_concurrent: a job never holds more slots than its limit; its other
// windows wait (and are not counted as startable) while other jobs' take
// the free slots.
func TestFairMaxConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []string
	}{
		{"a job at its limit waits; another job takes the slot", []string{
			"push a#1 2", "push a#2 2", "push a#3 2", "push a#4 2",
			"startable 2", "waiting 4",
			"pop a#1", "pop a#2", "startable 0", "pop -", "held a 2",
			"push b#1", "startable 1", "pop b#1",
			"release a", "startable 1", "pop a#3", "pop -",
		}},
		{"limit 1 runs one at a time", []string{
			"push a#1 1", "push a#2 1", "pop a#1", "pop -",
			"release a", "pop a#2",
		}},
		{"no limit", []string{
			"push a#1", "push a#2", "push a#3", "startable 3",
			"pop a#1", "pop a#2", "pop a#3",
		}},
		{"the last window pushed sets the limit", []string{
			"push a#1 1", "push a#2 1", "pop a#1", "pop -",
			"push a#3 3", "startable 2", "pop a#2", "pop a#3", "held a 3",
		}},
		{"a lowered limit holds back new windows, never takes a slot away", []string{
			"push a#1 3", "push a#2 3", "pop a#1", "pop a#2",
			"push a#3 1", "startable 0", "pop -",
			"release a", "pop -", "release a", "pop a#3",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runFair(t, tc.steps) })
	}
}

// BenchmarkFair is a backlog's pattern: many jobs with one window each,
// pushed, popped and released.
func BenchmarkFair(b *testing.B) {
	f := NewFair()
	items := make([]*Item, 1024)
	for i := range items {
		items[i] = &Item{Key: "job-" + strconv.Itoa(i)}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, it := range items {
			f.Push(it, 0)
		}
		for range items {
			it := f.Pop()
			f.Release(it.Key)
		}
	}
}
