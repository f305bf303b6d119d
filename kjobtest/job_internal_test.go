package kjobtest

import (
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

// The policy fields a Job does not show (backoff, overlap) reach the
// window's message with their defaults.
func TestWindowPolicy(t *testing.T) {
	m, err := Window{}.message(defaultStart, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(m.Policy.Backoff) != DefaultBackoff || time.Duration(m.Policy.MaxBackoff) != DefaultMaxBackoff || m.Policy.Overlap != jobmsg.OverlapQueue {
		t.Errorf("default policy = %+v", m.Policy)
	}
	m, err = Window{Backoff: time.Second, Overlap: "skip"}.message(defaultStart, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(m.Policy.MaxBackoff) != time.Second || m.Policy.Overlap != jobmsg.OverlapSkip {
		t.Errorf("policy = %+v; want max backoff 1s (the backoff), overlap skip", m.Policy)
	}
}

// The outcomes a Result reports are the worker's, in the same words.
func TestOutcomesAreTheWorkers(t *testing.T) {
	for got, want := range map[Outcome]string{
		OutcomeDone: worker.OutcomeDone, OutcomeFailed: worker.OutcomeFailed, OutcomeDeadLettered: worker.OutcomeDeadLettered,
		OutcomeSkipped: worker.OutcomeSkipped, OutcomeSuperseded: worker.OutcomeSuperseded, OutcomeSkippedDone: worker.OutcomeSkippedDone,
		OutcomeFenced: worker.OutcomeFenced, OutcomeAbandoned: worker.OutcomeAbandoned,
	} {
		if string(got) != want {
			t.Errorf("kjobtest outcome %q, the worker's %q", got, want)
		}
	}
}
