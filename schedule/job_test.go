package schedule

import (
	"fmt"
	"testing"
	"time"
)

func TestWindows(t *testing.T) {
	f, err := Parse("w.yaml", []byte(`jobs:
  - name: tick
    schedule: "@every 10s"
    handler: log
  - name: nightly
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    handler: log
`))
	if err != nil {
		t.Fatal(err)
	}
	tick, nightly := f.Jobs[0], f.Jobs[1]
	tests := []struct {
		name     string
		job      *Job
		from, to string
		max      int
		want     []string
	}{
		{"from excluded, to included", tick, "2026-11-22T10:00:00Z", "2026-11-22T10:00:30Z", 0,
			[]string{"2026-11-22T10:00:10Z", "2026-11-22T10:00:20Z", "2026-11-22T10:00:30Z"}},
		{"max keeps the oldest", tick, "2026-11-22T10:00:00Z", "2026-11-22T10:00:30Z", 2,
			[]string{"2026-11-22T10:00:10Z", "2026-11-22T10:00:20Z"}},
		{"negative max is no limit", tick, "2026-11-22T10:00:00Z", "2026-11-22T10:00:20Z", -1,
			[]string{"2026-11-22T10:00:10Z", "2026-11-22T10:00:20Z"}},
		{"between windows", tick, "2026-11-22T10:00:05Z", "2026-11-22T10:00:25Z", 0,
			[]string{"2026-11-22T10:00:10Z", "2026-11-22T10:00:20Z"}},
		{"none in range", tick, "2026-11-22T10:00:01Z", "2026-11-22T10:00:09Z", 0, nil},
		{"empty range", tick, "2026-11-22T10:00:00Z", "2026-11-22T10:00:00Z", 0, nil},
		{"to before from", tick, "2026-11-22T10:00:30Z", "2026-11-22T10:00:00Z", 0, nil},
		{"across spring forward", nightly, "2026-03-27T12:00:00Z", "2026-03-30T12:00:00Z", 0,
			[]string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"across fall back", nightly, "2026-10-24T00:30:00Z", "2026-10-26T01:30:00Z", 0,
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.job.Windows(utc(tt.from), utc(tt.to), tt.max)
			var gs []string
			for _, w := range got {
				gs = append(gs, w.Format(time.RFC3339))
			}
			if fmt.Sprint(gs) != fmt.Sprint(tt.want) {
				t.Fatalf("Windows = %v, want %v", gs, tt.want)
			}
		})
	}
}

// A Job built by hand rather than by Parse parses its Spec on demand.
func TestHandMadeJob(t *testing.T) {
	j := &Job{Name: "x", Spec: "0 2 * * *", Location: mustLoc(t, "America/New_York")}
	if got := j.Next(utc("2026-03-08T00:00:00Z")); !got.Equal(utc("2026-03-08T07:00:00Z")) {
		t.Fatalf("Next = %v", got)
	}
	if ws := j.Windows(utc("2026-03-08T00:00:00Z"), utc("2026-03-10T00:00:00Z"), 0); len(ws) != 2 {
		t.Fatalf("Windows = %v", ws)
	}
	bad := &Job{Spec: "nonsense"}
	if _, err := bad.Schedule(); err == nil {
		t.Fatal("no error for a bad spec")
	}
	if got := bad.Next(utc("2026-03-08T00:00:00Z")); !got.IsZero() {
		t.Fatalf("Next = %v, want zero", got)
	}
	if ws := bad.Windows(utc("2026-03-08T00:00:00Z"), utc("2026-03-10T00:00:00Z"), 0); ws != nil {
		t.Fatalf("Windows = %v, want none", ws)
	}
}
