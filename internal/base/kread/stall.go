package kread

import (
	"context"
	"errors"
	"time"
)

// ErrStalled is the cause (context.Cause) of a context that StallContext
// ended because the read made no progress within its bound.
var ErrStalled = errors.New("kread: no progress")

// StallContext bounds a read by its progress rather than by its length:
// the returned context ends with cause ErrStalled once bound passes
// without a call of progressed, and with ctx. A read of a large topic
// that keeps receiving records so runs as long as it needs; one that
// stops receiving fails after bound. Call cancel when the read is done.
func StallContext(ctx context.Context, bound time.Duration) (_ context.Context, progressed func(), cancel context.CancelFunc) {
	sctx, cancelCause := context.WithCancelCause(ctx)
	t := time.AfterFunc(bound, func() { cancelCause(ErrStalled) })
	progressed = func() { t.Reset(bound) }
	cancel = func() {
		t.Stop()
		cancelCause(context.Canceled)
	}
	return sctx, progressed, cancel
}
