package schedule

import (
	"slices"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
)

// recordPolicy is the policy a window record of j carries, as
// internal/store/window.Policy builds it (schedule's own tests cannot
// import that package: it imports schedule).
func recordPolicy(j *Job) jobmsg.Policy {
	return jobmsg.Policy{
		Timeout: jobmsg.Duration(j.Timeout), MaxAttempts: j.Retries.MaxAttempts,
		Backoff: jobmsg.Duration(j.Retries.Backoff), MaxBackoff: jobmsg.Duration(j.Retries.MaxBackoff),
		Overlap: jobmsg.Overlap(j.Overlap), MaxConcurrent: j.MaxConcurrent,
	}
}

// The file's overlap words are the record's: same strings, same set, so
// the schedules file and the wire format did not change when schedule got
// its own Overlap type.
func TestOverlapsMatchRecords(t *testing.T) {
	ours := []Overlap{OverlapQueue, OverlapSkip, OverlapLatest, OverlapReplace, OverlapAllow}
	if len(ours) != len(jobmsg.Overlaps) {
		t.Fatalf("schedule has %d overlap policies, jobmsg %d", len(ours), len(jobmsg.Overlaps))
	}
	for i, o := range ours {
		if string(o) != string(jobmsg.Overlaps[i]) || !o.Valid() {
			t.Errorf("schedule overlap %q, jobmsg %q (valid %v)", o, jobmsg.Overlaps[i], o.Valid())
		}
	}
	if slices.ContainsFunc([]Overlap{"", "Queue", "forbid"}, Overlap.Valid) {
		t.Error("an unknown overlap policy is valid")
	}
}

// The limits the package documentation states as plain numbers are the
// ones workers enforce.
func TestDocumentedLimits(t *testing.T) {
	if jobmsg.MaxTimeout != 24*time.Hour || jobmsg.MaxBackoffLimit != 24*time.Hour ||
		jobmsg.MaxAttempts != 100 || jobmsg.MaxConcurrentLimit != 10000 {
		t.Fatalf("jobmsg limits changed (timeout %v, backoff %v, attempts %d, concurrent %d): update the docs of Job, RetryPolicy and the package",
			jobmsg.MaxTimeout, jobmsg.MaxBackoffLimit, jobmsg.MaxAttempts, jobmsg.MaxConcurrentLimit)
	}
}
