package pause_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

func TestPauseHistory(t *testing.T) {
	r := testenv.NewRedis(t)
	ps, err := pause.New(r.Client(), "t")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if _, err := ps.Pause(ctx, pause.Pause{Job: "a", Since: since, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.ResumeAt(ctx, "a", since.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.ResumeAt(ctx, "a", since.Add(2*time.Hour)); !errors.Is(err, pause.ErrNotPaused) {
		t.Fatalf("second resume: %v", err)
	}
	m, err := ps.PausePeriods(ctx)
	if err != nil || len(m) != 1 || m["a"] != (pause.Period{Since: since, Until: since.Add(time.Hour)}) {
		t.Fatalf("PausePeriods = %+v %v", m, err)
	}
	if pd, err := ps.Paused(ctx); err != nil || pd["a"] {
		t.Fatalf("still paused after resume: %v %v", pd, err)
	}
}
