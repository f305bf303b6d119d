// Package backoff computes the delays between retries of a failing call:
// capped exponential (Min, 2·Min, 4·Min, ... up to Max), exact or with
// equal jitter. It is the one backoff of this repository, modelled on
// River's serviceutil (ExponentialBackoff, CancellableSleep): the retry
// loops around Kafka and Redis calls use a Backoff, and the worker's
// retry policy of failed attempts uses Exponential.
//
// A retry loop looks like this:
//
//	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
//	for {
//		err := call(ctx)
//		if err == nil {
//			return nil
//		}
//		d := b.Next()
//		log.Warn("cannot ...; retrying", "err", err, "retry_in", d)
//		if err := clock.Sleep(ctx, d); err != nil {
//			return err
//		}
//	}
package backoff

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/kjob/kjob/internal/base/clock"
)

// Jitter is how a delay is randomised.
type Jitter uint8

const (
	// None: the delay is exact. The retry loops of infrastructure calls
	// use it, so their logs show the delay they wait.
	None Jitter = iota
	// Equal: uniformly random in [d/2, d] ("equal jitter"): half the
	// delay is kept, so retries still back off, and half is spread, so
	// failures at one instant do not retry together.
	Equal
)

// Exponential returns the delay before retry n (1 for the first retry)
// of a capped exponential backoff: min(ceil, base·2^(n-1)), randomised by
// j. It returns 0 if base or ceil is not positive; n below 1 counts as 1.
// It never overflows, however large n is.
func Exponential(base, ceil time.Duration, n int, j Jitter) time.Duration {
	if base <= 0 || ceil <= 0 {
		return 0
	}
	d := base
	for i := 1; i < n && d < ceil; i++ {
		if d > ceil/2 {
			d = ceil
			break
		}
		d *= 2
	}
	d = min(d, ceil)
	if j == Equal {
		half := d / 2
		d = half + rand.N(d-half+1)
	}
	return d
}

// Backoff is the sequence of delays of one call's retries: Min, 2·Min,
// 4·Min, ... capped at Max, randomised by Jitter. The zero count starts at
// Min; set Min and Max (positive, Min ≤ Max) and keep the Backoff across
// the retries of one call. A Backoff is not safe for concurrent use.
type Backoff struct {
	// Min is the first delay.
	Min time.Duration
	// Max caps the delays.
	Max time.Duration
	// Jitter randomises each delay; default None.
	Jitter Jitter

	n int // retries so far
}

// Next returns the delay before the next retry and counts that retry.
func (b *Backoff) Next() time.Duration {
	b.n++
	return Exponential(b.Min, b.Max, b.n, b.Jitter)
}

// Reset starts the sequence again at Min: the call succeeded, or ran fine
// for a while before it failed again.
func (b *Backoff) Reset() { b.n = 0 }

// Sleep waits Next() or until ctx is done, whichever comes first, and
// returns ctx.Err() in the second case (clock.Sleep).
func (b *Backoff) Sleep(ctx context.Context) error { return clock.Sleep(ctx, b.Next()) }
