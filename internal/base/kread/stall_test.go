package kread_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/base/kread"
)

// A read that keeps progressing outlives its bound many times over; one
// that stops ends with ErrStalled as its cause.
func TestStallContext(t *testing.T) {
	ctx, progressed, cancel := kread.StallContext(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		if ctx.Err() != nil {
			t.Fatalf("ended after %v although it progressed every 20ms: %v", time.Since(start), context.Cause(ctx))
		}
		progressed()
		time.Sleep(20 * time.Millisecond) // the read's pace, not synchronisation
	}
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("not ended 20s after the last progress")
	}
	if !errors.Is(context.Cause(ctx), kread.ErrStalled) {
		t.Fatalf("cause %v, want ErrStalled", context.Cause(ctx))
	}

	parent, stop := context.WithCancel(context.Background())
	ctx2, _, cancel2 := kread.StallContext(parent, time.Hour)
	defer cancel2()
	stop()
	<-ctx2.Done()
	if errors.Is(context.Cause(ctx2), kread.ErrStalled) {
		t.Fatal("a cancelled parent is not a stall")
	}
}
