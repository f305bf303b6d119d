package keepalive

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func policy(t testing.TB, ttl, interval time.Duration) Policy {
	t.Helper()
	p, err := NewPolicy(ttl, interval)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMargin(t *testing.T) {
	for _, c := range []struct {
		ttl, interval, margin time.Duration
	}{
		{6 * time.Second, 2 * time.Second, 2 * time.Second},                      // the worker's defaults: the interval
		{5 * time.Second, time.Second, time.Second},                              // the elector's defaults: both
		{600 * time.Millisecond, 100 * time.Millisecond, 120 * time.Millisecond}, // TTL/5
	} {
		p := policy(t, c.ttl, c.interval)
		if got := p.Margin(); got != c.margin || Margin(c.ttl, c.interval) != c.margin {
			t.Errorf("Margin(%v, %v) = %v, want %v", c.ttl, c.interval, got, c.margin)
		}
		if got := p.Proof(); got != c.ttl-c.margin {
			t.Errorf("Proof(%v, %v) = %v, want %v", c.ttl, c.interval, got, c.ttl-c.margin)
		}
		if p.TTL() != c.ttl || p.RenewInterval() != c.interval {
			t.Errorf("Policy(%v, %v) reports TTL %v, interval %v", c.ttl, c.interval, p.TTL(), p.RenewInterval())
		}
	}
}

func TestNewPolicyRejects(t *testing.T) {
	for _, c := range []struct{ ttl, interval time.Duration }{
		{0, time.Second},
		{-time.Second, time.Millisecond},
		{time.Second, 0},
		{time.Second, -time.Millisecond},
		{time.Second, 500 * time.Millisecond},
		{time.Second, time.Second},
	} {
		if _, err := NewPolicy(c.ttl, c.interval); err == nil {
			t.Errorf("NewPolicy(%v, %v) accepted; want an error", c.ttl, c.interval)
		}
	}
}

// expiries records the onExpire calls.
type expiries struct {
	mu sync.Mutex
	xs []Expiry
}

func (e *expiries) add(x Expiry) {
	e.mu.Lock()
	e.xs = append(e.xs, x)
	e.mu.Unlock()
}

func (e *expiries) all() []Expiry {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Expiry(nil), e.xs...)
}

// With Init the owner's clock drives the Keepalive: it expires at the first
// Check at or after proven + Proof, which is strictly before proven + TTL,
// and not a nanosecond before.
func TestCheckExpiresAtTheDeadlineBeforeTheTTL(t *testing.T) {
	p := policy(t, 6*time.Second, 2*time.Second)
	t0 := time.Now()
	var x expiries
	var k Keepalive
	k.Init(p, t0, x.add)
	if got, want := k.Deadline(), t0.Add(4*time.Second); !got.Equal(want) {
		t.Fatalf("Deadline = %v after the proof, want %v", got.Sub(t0), want.Sub(t0))
	}
	if !k.Check(t0.Add(4*time.Second-time.Nanosecond)) || k.Err() != nil {
		t.Fatalf("expired before its deadline: Err %v", k.Err())
	}
	select {
	case <-k.Done():
		t.Fatal("Done closed while live")
	default:
	}
	if len(x.all()) != 0 {
		t.Fatal("onExpire ran while live")
	}
	at := t0.Add(4 * time.Second)
	if k.Check(at) {
		t.Fatal("live at its deadline")
	}
	if !errors.Is(k.Err(), ErrExpired) {
		t.Errorf("Err = %v, want ErrExpired", k.Err())
	}
	select {
	case <-k.Done():
	default:
		t.Error("Done not closed after expiry")
	}
	xs := x.all()
	if len(xs) != 1 {
		t.Fatalf("onExpire ran %d times, want once", len(xs))
	}
	if !xs[0].Proven.Equal(t0) || !xs[0].Deadline.Equal(at) || !xs[0].At.Equal(at) || xs[0].Unproven() != 4*time.Second {
		t.Errorf("Expiry = %+v, want proven at t0, deadline and at t0+4s", xs[0])
	}
	if !xs[0].At.Before(t0.Add(p.TTL())) {
		t.Errorf("expired %v after the proof, not before the TTL %v", xs[0].At.Sub(t0), p.TTL())
	}
	// Expiry is final: later checks and proofs change nothing.
	if k.Check(at.Add(time.Hour)) || k.Prove(at) || k.Stop() {
		t.Error("an expired Keepalive came back to life")
	}
	if len(x.all()) != 1 {
		t.Error("onExpire ran again")
	}
}

// Prove moves the deadline to the start of the later call, never back.
func TestProveExtendsAndNeverMovesBack(t *testing.T) {
	p := policy(t, time.Second, 100*time.Millisecond) // proof 800ms
	t0 := time.Now()
	var k Keepalive
	k.Init(p, t0, nil)
	if !k.Prove(t0.Add(500 * time.Millisecond)) {
		t.Fatal("Prove reports not live")
	}
	if got := k.Deadline().Sub(t0); got != 1300*time.Millisecond {
		t.Errorf("deadline %v after t0, want 1.3s", got)
	}
	k.Prove(t0.Add(200 * time.Millisecond)) // an older call answered late
	if got := k.Proven().Sub(t0); got != 500*time.Millisecond {
		t.Errorf("proof moved back to %v, want 500ms", got)
	}
	if !k.Check(t0.Add(1299 * time.Millisecond)) {
		t.Error("expired before the extended deadline")
	}
	if k.Check(t0.Add(1300 * time.Millisecond)) {
		t.Error("live at the extended deadline")
	}
}

// Proofs from many goroutines at once (the worker's batched extend calls)
// keep the latest start.
func TestConcurrentProve(t *testing.T) {
	p := policy(t, time.Minute, time.Second)
	t0 := time.Now()
	k := p.Start(t0, nil)
	defer k.Stop()
	const goroutines, each = 8, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				k.Prove(t0.Add(time.Duration(i*goroutines+g) * time.Microsecond))
			}
		})
	}
	wg.Go(func() {
		for range each {
			k.Deadline()
			k.Check(time.Now())
		}
	})
	wg.Wait()
	if got, want := k.Proven().Sub(t0), time.Duration(goroutines*each-1)*time.Microsecond; got != want {
		t.Errorf("proven %v after t0, want the latest proof %v", got, want)
	}
	if k.Err() != nil {
		t.Errorf("Err = %v while proven, want nil", k.Err())
	}
}

// With its own timer a Keepalive that keeps being proven stays live;
// once the proofs stop it expires by itself, closing Done and calling
// onExpire, after its proof ran out and before the TTL could.
func TestStartStepsDownBeforeExpiry(t *testing.T) {
	p := policy(t, time.Second, 100*time.Millisecond) // margin 200ms, proof 800ms
	var x expiries
	var calls atomic.Int32
	k := p.Start(time.Now(), func(e Expiry) { calls.Add(1); x.add(e) })
	defer k.Stop()
	// Prove it for longer than a proof lasts: it must stay live.
	until := time.Now().Add(2 * p.TTL())
	tick := time.NewTicker(p.RenewInterval())
	for time.Now().Before(until) {
		<-tick.C
		if !k.Prove(time.Now()) {
			t.Fatalf("expired while proven every %v: Err %v", p.RenewInterval(), k.Err())
		}
	}
	tick.Stop()
	last := k.Proven()
	select {
	case <-k.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed 10s after the last proof")
	}
	if !errors.Is(k.Err(), ErrExpired) {
		t.Errorf("Err = %v, want ErrExpired", k.Err())
	}
	xs := x.all()
	if len(xs) != 1 || calls.Load() != 1 {
		t.Fatalf("onExpire ran %d times, want once", calls.Load())
	}
	if !xs[0].Proven.Equal(last) {
		t.Errorf("Expiry.Proven = %v, want the last proof %v", xs[0].Proven, last)
	}
	t.Logf("expired %v after the last proof (proof %v, TTL %v)", xs[0].Unproven(), p.Proof(), p.TTL())
	if xs[0].At.Before(xs[0].Deadline) || xs[0].Unproven() < p.Proof() {
		t.Errorf("expired %v after the last proof, before its proof %v ran out", xs[0].Unproven(), p.Proof())
	}
	if !xs[0].At.Before(last.Add(p.TTL())) {
		t.Errorf("expired %v after the last proof: not before the TTL %v", xs[0].Unproven(), p.TTL())
	}
	if k.Stop() {
		t.Error("Stop after expiry reports it stopped a live Keepalive")
	}
}

// Done is closed only after onExpire returned: whoever waits on Done sees
// what onExpire did. (CI once saw Done closed while onExpire had not run
// yet, when Done was closed first.)
func TestDoneClosedAfterOnExpire(t *testing.T) {
	p := policy(t, time.Second, 100*time.Millisecond)
	entered, release := make(chan struct{}), make(chan struct{})
	k := p.Start(time.Now().Add(-p.Proof()), func(Expiry) {
		close(entered)
		<-release
	})
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("onExpire not called 10s after the deadline")
	}
	if !errors.Is(k.Err(), ErrExpired) {
		t.Errorf("Err = %v while onExpire runs, want ErrExpired", k.Err())
	}
	select {
	case <-k.Done():
		t.Fatal("Done closed while onExpire was still running")
	default:
	}
	close(release)
	select {
	case <-k.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed 10s after onExpire returned")
	}
}

// A Keepalive whose proof ran out before Start expires at once.
func TestStartAlreadyExpired(t *testing.T) {
	p := policy(t, time.Second, 100*time.Millisecond)
	called := make(chan Expiry, 1)
	k := p.Start(time.Now().Add(-p.Proof()), func(x Expiry) { called <- x })
	select {
	case <-k.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a Keepalive started past its deadline did not expire")
	}
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("onExpire not called")
	}
	if !errors.Is(k.Err(), ErrExpired) {
		t.Errorf("Err = %v, want ErrExpired", k.Err())
	}
}

// Stop ends a Keepalive without expiring it: Done is closed, onExpire
// never runs, its timer is stopped, later checks and proofs change nothing.
func TestStop(t *testing.T) {
	p := policy(t, time.Minute, time.Second)
	var calls atomic.Int32
	k := p.Start(time.Now(), func(Expiry) { calls.Add(1) })
	done := k.Done()
	if !k.Stop() {
		t.Fatal("Stop of a live Keepalive reports false")
	}
	select {
	case <-done:
	default:
		t.Error("Done not closed by Stop")
	}
	select {
	case <-k.Done():
	default:
		t.Error("Done asked after Stop is not closed")
	}
	if !errors.Is(k.Err(), ErrStopped) {
		t.Errorf("Err = %v, want ErrStopped", k.Err())
	}
	if k.timer.Stop() {
		t.Error("Stop left the timer running")
	}
	if k.Stop() {
		t.Error("second Stop reports true")
	}
	if k.Check(time.Now().Add(time.Hour)) || k.Prove(time.Now()) {
		t.Error("a stopped Keepalive is live again")
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("onExpire ran %d times after Stop", n)
	}
}

// Stop and an expiry racing: exactly one of them wins, and onExpire runs
// once if the expiry won, never if Stop did.
func TestStopRacingExpiry(t *testing.T) {
	p := policy(t, 10*time.Millisecond, time.Millisecond) // proof 8ms
	won := map[bool]int{}
	for i := range 200 {
		var calls atomic.Int32
		called := make(chan struct{})
		// Deadlines from 100µs ago to 100µs ahead: sometimes the timer
		// fires first, sometimes Stop comes first.
		ahead := time.Duration(i%21-10) * 10 * time.Microsecond
		k := p.Start(time.Now().Add(-p.Proof()+ahead), func(Expiry) {
			calls.Add(1)
			close(called)
		})
		if ahead < 0 {
			runtime.Gosched()
		}
		stopped := k.Stop()
		won[stopped]++
		<-k.Done()
		if stopped {
			if k.Err() != ErrStopped {
				t.Fatalf("Stop won but Err = %v", k.Err())
			}
			// onExpire runs only for the winner of the expiry: never now.
			if n := calls.Load(); n != 0 {
				t.Fatalf("Stop won, yet onExpire ran %d times", n)
			}
			continue
		}
		if k.Err() != ErrExpired {
			t.Fatalf("Stop lost but Err = %v", k.Err())
		}
		select {
		case <-called:
		case <-time.After(10 * time.Second):
			t.Fatal("the expiry won, yet onExpire was not called")
		}
	}
	t.Logf("Stop won %d times, the expiry %d times", won[true], won[false])
}
