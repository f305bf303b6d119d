package test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/testenv"
)

// Failover settings: the binaries' defaults.
const (
	foLeaseTTL       = 5 * time.Second // producer --lease-ttl default
	foLeaseRenew     = time.Second     // producer --lease-renew default
	foSessionTimeout = 6 * time.Second // worker --session-timeout default
	foHeartbeat      = time.Second     // worker --heartbeat default
	foClaimTTL       = 15 * time.Second
)

const failoverSchedules = `jobs:
  - name: beat
    schedule: "@every 1s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 10s
    catchup: 1m
`

// failoverSample is one repetition: from the fault to the execution of the
// first window due at or after the fault (next), and the part of it not
// spent waiting for that window's start (added).
type failoverSample struct{ next, added time.Duration }

// BenchmarkFailover measures, for each fault, the time from the fault to the
// next window executed, over KJOB_FAILOVER_REPS repetitions (default 10),
// and prints a table with the settings. Run it with `make bench-failover`
// (-benchtime=1x: the repetitions are inside, b.N is not used).
func BenchmarkFailover(b *testing.B) {
	reps := 10
	if s := os.Getenv("KJOB_FAILOVER_REPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("KJOB_FAILOVER_REPS=%q: want a whole number of at least 1", s)
		}
		reps = n
	}
	c := newClusterWith(b, failoverSchedules, 1, testenv.NewDurableRedis(b), "")
	c.env = append(c.env, "KJOB_LOG_LEVEL=info")
	f := &failover{b: b, c: c}
	f.producer()
	f.producer()
	f.worker()
	f.worker()
	f.waitExecuted(time.Now(), 60*time.Second)

	type row struct {
		fault   string
		target  string
		samples []failoverSample
	}
	var rows []row
	measure := func(fault, target string, inject func() time.Time) {
		r := row{fault: fault, target: target}
		for i := range reps {
			// A fault lands at a random point of the 1s cadence.
			time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
			at := inject()
			s := f.waitExecuted(at, 60*time.Second)
			r.samples = append(r.samples, s)
			b.Logf("%s #%d: next window %v (added %v)", fault, i+1, s.next.Round(time.Millisecond), s.added.Round(time.Millisecond))
			f.settle()
		}
		rows = append(rows, r)
	}
	measure("producer leader SIGTERM (graceful handover)", "< 1s", func() time.Time {
		p := f.leader()
		at := time.Now()
		p.stop(b, 20*time.Second)
		f.producer()
		return at
	})
	measure("producer leader SIGKILL (crash)", fmt.Sprintf("<= lease TTL + 1s = %v", foLeaseTTL+time.Second), func() time.Time {
		p := f.leader()
		at := time.Now()
		p.kill(b)
		f.producer()
		return at
	})
	measure("worker SIGTERM (graceful handover)", "< 2s", func() time.Time {
		w := f.owner()
		at := time.Now()
		w.stop(b, 30*time.Second)
		f.worker()
		return at
	})
	measure("worker SIGKILL (crash)", fmt.Sprintf("<= session timeout + 2s = %v", foSessionTimeout+2*time.Second), func() time.Time {
		w := f.owner()
		at := time.Now()
		w.kill(b)
		f.worker()
		return at
	})
	measure("broker restart (SIGTERM, same data dir)", "-", func() time.Time {
		at := time.Now()
		c.brokerP.stop(b, 20*time.Second)
		c.startBroker(b)
		return at
	})
	measure("redis-server SIGKILL + restart (AOF)", "-", func() time.Time {
		at := time.Now()
		c.redis.Restart()
		return at
	})

	var sb strings.Builder
	fmt.Fprintf(&sb, "\nfailover: %d repetitions per fault; 1 job every 1s, 1 partition, 2 producers, 2 workers; lease TTL %v, renew %v; session timeout %v, heartbeat %v; claim TTL %v\n",
		reps, foLeaseTTL, foLeaseRenew, foSessionTimeout, foHeartbeat, foClaimTTL)
	fmt.Fprintf(&sb, "%-45s %10s %10s %10s %10s  %s\n", "fault", "next p50", "next p99", "added p50", "added p99", "target")
	for _, r := range rows {
		next := make([]time.Duration, len(r.samples))
		added := make([]time.Duration, len(r.samples))
		for i, s := range r.samples {
			next[i], added[i] = s.next, s.added
		}
		fmt.Fprintf(&sb, "%-45s %10v %10v %10v %10v  %s\n", r.fault, pct(next, 50), pct(next, 99), pct(added, 50), pct(added, 99), r.target)
	}
	sb.WriteString("next: fault -> first window due at or after the fault executed (includes up to 1s waiting for that window's start);\n" +
		"added: that execution's delay past max(fault, window start). With few samples p99 is their maximum.\n")
	fmt.Fprint(os.Stdout, sb.String())
}

// pct returns the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))].Round(10 * time.Millisecond)
}

// failover drives the benchmark's cluster.
type failover struct {
	b    *testing.B
	c    *cluster
	next int
}

func (f *failover) producer() *process {
	f.next++
	return f.c.startProducer(f.b, fmt.Sprintf("producer-%d", f.next))
}

func (f *failover) worker() *process {
	f.next++
	return f.c.startWorker(f.b, fmt.Sprintf("worker-%d", f.next), "KJOB_CLAIM_TTL="+foClaimTTL.String())
}

// leader returns the live producer whose logs say it holds the lease.
func (f *failover) leader() *process {
	var p *process
	testenv.Eventually(f.b, 30*time.Second, func() bool {
		for _, q := range f.c.producers {
			if q.alive() && leads(q) {
				p = q
				return true
			}
		}
		return false
	}, "no producer leads")
	return p
}

// leads reports whether p's last lease event is an acquisition.
func leads(p *process) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	leading := false
	for _, l := range p.lines {
		switch {
		case strings.Contains(l, `msg="lease acquired"`):
			leading = true
		case strings.Contains(l, `msg="lease lost"`), strings.Contains(l, `msg="lease released"`):
			leading = false
		}
	}
	return leading
}

// owner returns the worker that ran the latest window: the partition's
// owner.
func (f *failover) owner() *process {
	es := f.c.ledger.snapshot()
	last := es[len(es)-1].Worker
	for _, w := range f.c.workers {
		if w.name == last && w.alive() {
			return w
		}
	}
	f.b.Fatalf("owner %s of the latest window is not running", last)
	return nil
}

// waitExecuted waits for the first window due at or after at to reach the
// ledger.
func (f *failover) waitExecuted(at time.Time, timeout time.Duration) failoverSample {
	var s failoverSample
	testenv.Eventually(f.b, timeout, func() bool {
		for _, e := range f.c.ledger.snapshot() {
			if !e.WindowStart.Before(at) {
				s.next = e.Received.Sub(at)
				from := at
				if e.WindowStart.After(at) {
					from = e.WindowStart
				}
				s.added = e.Received.Sub(from)
				return true
			}
		}
		return false
	}, "no window due after %v executed within %v", at, timeout)
	return s
}

// settle waits until the cluster is steady again: a leader and a standby,
// two workers in the group, and a few windows executed in a row.
func (f *failover) settle() {
	f.leader()
	testenv.Eventually(f.b, 60*time.Second, func() bool {
		n := 0
		for _, p := range f.c.producers {
			if p.alive() && (p.hasLine("lease held by another replica") || leads(p)) {
				n++
			}
		}
		return n >= 2
	}, "no standby producer")
	for _, w := range f.c.workers {
		if w.alive() {
			testenv.Eventually(f.b, 60*time.Second, func() bool { return w.hasLine("worker running") }, "%s did not start", w.name)
		}
	}
	f.waitExecuted(time.Now().Add(3*time.Second), 60*time.Second)
}
