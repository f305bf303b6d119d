package operator_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dlq"
)

// A letter that holds only part of the original record (a value cut to a
// prefix, or a minimal letter) is never redriven, not even with force: the
// plan leaves it out with the original's size, hash and coordinates, and
// ExecuteRedrive leaves it out too when a plan was changed by hand, before
// it records anything or publishes. The dashboard's redrive goes through
// the same two functions.
func TestIncompleteLetterNeverRedriven(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	orig := &kgo.Record{Topic: "w", Partition: 1, Offset: 7, Key: []byte("report"), Value: bytes.Repeat([]byte("x"), 600<<10)}
	meta := dlq.Meta{Reason: "undecodable record: too large", Worker: "w1", At: at}
	for name, rec := range map[string]*kgo.Record{
		"value cut": dlq.New("w.dlq", orig, meta),
		"minimal":   dlq.Minimal("w.dlq", orig, meta),
	} {
		t.Run(name, func(t *testing.T) {
			rec.Offset = 3
			d := operator.ParseDeadLetter(rec)
			if d.Incomplete == "" || d.ValueSize != len(orig.Value) || d.ValueSHA256 == "" || d.Origin.String() != "w[1]@7" || d.LetterError != "" {
				t.Fatalf("parsed %+v", d)
			}
			for _, force := range []bool{false, true} {
				items := operator.PlanRedrive([]operator.DeadLetter{d}, force)
				if !strings.Contains(items[0].Skip, "holds only part of the original record") || !strings.Contains(items[0].Skip, d.ValueSHA256) || !strings.Contains(items[0].Skip, "w[1]@7") {
					t.Fatalf("force=%v: plan %q, want the letter left out with the original's hash and place", force, items[0].Skip)
				}
				items[0].Skip = "" // a plan changed by hand
				// No client and no Redrives: anything past the check
				// would panic.
				out, err := operator.ExecuteRedrive(context.Background(), operator.RedriveConfig{DLQTopic: "w.dlq", Topic: "w", By: "test", Now: time.Now}, items, force)
				if err != nil || len(out) != 0 || !strings.Contains(items[0].Skip, "holds only part of the original record") {
					t.Fatalf("force=%v: ExecuteRedrive redrove %+v, %v; skip %q", force, out, err, items[0].Skip)
				}
			}
		})
	}
	// A DeadLetter not read from the topic has no record to republish.
	items := []operator.RedriveItem{{DeadLetter: operator.DeadLetter{ID: "5", WindowID: "report@2026-11-22T10:00:00Z"}}}
	out, err := operator.ExecuteRedrive(context.Background(), operator.RedriveConfig{DLQTopic: "w.dlq", Topic: "w", By: "test", Now: time.Now}, items, true)
	if err != nil || len(out) != 0 || items[0].Skip == "" {
		t.Fatalf("a hand-made letter: redrove %+v, %v; skip %q", out, err, items[0].Skip)
	}
}
