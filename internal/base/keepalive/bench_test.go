package keepalive

import (
	"testing"
	"time"
)

// The worker keeps one Keepalive per running handler (thousands started
// per second, 10,000 in flight): these measure what one costs.

// BenchmarkStartStop is the life of a Keepalive with its own timer (the
// elector's): Start, one Prove, Stop.
func BenchmarkStartStop(b *testing.B) {
	p, _ := NewPolicy(6*time.Second, 2*time.Second)
	f := func(Expiry) {}
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		k := p.Start(now, f)
		k.Prove(now)
		k.Stop()
	}
}

// BenchmarkInitCheck is the life of a Keepalive driven by its owner's
// timer (the worker's attempt): Init, a Prove, a Check when the owner's
// timer fires, Stop.
func BenchmarkInitCheck(b *testing.B) {
	p, _ := NewPolicy(6*time.Second, 2*time.Second)
	f := func(Expiry) {}
	b.ReportAllocs()
	for b.Loop() {
		var k Keepalive
		now := time.Now()
		k.Init(p, now, f)
		k.Prove(now)
		k.Check(now)
		k.Stop()
	}
}

// BenchmarkProveInFlight proves 10,000 live Keepalives with their own
// timers, as one batched extend call's answer does (one start time for
// the whole batch); ns/op is per Keepalive proven.
func BenchmarkProveInFlight(b *testing.B) {
	p, _ := NewPolicy(time.Minute, 10*time.Second)
	const n = 10000
	ks := make([]*Keepalive, n)
	now := time.Now()
	for i := range ks {
		ks[i] = p.Start(now, nil)
	}
	defer func() {
		for _, k := range ks {
			k.Stop()
		}
	}()
	b.ReportAllocs()
	i, at := 0, time.Now()
	for b.Loop() {
		if i%n == 0 {
			at = time.Now()
		}
		ks[i%n].Prove(at)
		i++
	}
}

// BenchmarkProveContended proves one Keepalive from every P at once: the
// worst case of concurrent proofs.
func BenchmarkProveContended(b *testing.B) {
	p, _ := NewPolicy(time.Minute, 10*time.Second)
	k := p.Start(time.Now(), nil)
	defer k.Stop()
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			k.Prove(start.Add(time.Duration(i)))
		}
	})
}
