package test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// Failover settings: the binaries' defaults.
const (
	foLeaseTTL       = 2 * time.Second        // producer --lease-ttl default
	foLeaseRenew     = 300 * time.Millisecond // producer --lease-renew default
	foSessionTimeout = 6 * time.Second        // worker --session-timeout default
	foHeartbeat      = time.Second            // worker --heartbeat default
	foClaimTTL       = 6 * time.Second        // worker --claim-ttl default
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
	reps := testenv.Reps(b, "KJOB_FAILOVER_REPS", 10)
	c := newClusterWith(b, failoverSchedules, 1, testenv.NewDurableRedis(b), "")
	c.env = append(c.env, "KJOB_LOG_LEVEL=info")
	f := &failover{b: b, c: c}
	f.producer()
	f.producer()
	f.worker()
	f.worker()
	f.waitExecuted(time.Now(), 60*time.Second)

	type row struct {
		fault  string
		target time.Duration // 0: none set
		why    string        // how the target is derived
		// samples are the repetitions; missed counts windows due
		// during the row that never executed (all are within the
		// job's 1m catch-up).
		samples []failoverSample
		missed  []string
		// doubled counts windows whose handler ran more than once
		// during the row (a worker's crash re-runs its window with a
		// higher token; a producer's fault must double nothing).
		doubled int
	}
	var rows []row
	only, err := regexp.Compile(os.Getenv("KJOB_FAILOVER_FAULTS"))
	if err != nil {
		b.Fatalf("KJOB_FAILOVER_FAULTS=%q: not a regular expression: %v", os.Getenv("KJOB_FAILOVER_FAULTS"), err)
	}
	measure := func(fault string, target time.Duration, why string, inject func() time.Time) {
		if !only.MatchString(fault) {
			return
		}
		r := row{fault: fault, target: target, why: why}
		from := time.Now()
		for i := range reps {
			// A fault lands at a random point of the 1s cadence.
			time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
			at := inject()
			s := f.waitExecuted(at, 60*time.Second)
			r.samples = append(r.samples, s)
			b.Logf("%s #%d: next window %v (added %v)", fault, i+1, s.next.Round(time.Millisecond), s.added.Round(time.Millisecond))
			f.settle()
		}
		r.missed = f.missed(from, time.Now().Add(-3*time.Second))
		if len(r.missed) > 0 {
			b.Errorf("%s: %d windows due during the row never executed (all within catch-up): %v", fault, len(r.missed), r.missed)
		}
		r.doubled = f.doubled(from)
		if r.doubled > 0 && strings.HasPrefix(fault, "producer") {
			b.Errorf("%s: %d windows ran more than once", fault, r.doubled)
		}
		rows = append(rows, r)
	}
	measure("producer leader SIGTERM (graceful handover)", time.Second, "< 1s", func() time.Time {
		p := f.leader()
		at := time.Now()
		p.stop(b, 20*time.Second)
		f.producer()
		return at
	})
	measure("producer leader SIGKILL (crash)", foLeaseTTL+time.Second, "lease TTL + 1s", func() time.Time {
		p := f.leader()
		at := time.Now()
		p.kill(b)
		f.producer()
		return at
	})
	// zombie stops p (SIGSTOP) and resumes it (SIGCONT) only after another
	// replica executed a window and hold (longer than the lease TTL or
	// session timeout) has passed: from then on p is a zombie that must
	// notice it lost its lease or partitions (and is fenced).
	zombie := func(p *process, hold time.Duration) time.Time {
		at := time.Now()
		p.signal(b, syscall.SIGSTOP)
		f.waitExecuted(at, 60*time.Second)
		if d := time.Until(at.Add(hold)); d > 0 {
			time.Sleep(d) // the fault is a pause of this length
		}
		p.signal(b, syscall.SIGCONT)
		return at
	}
	measure("producer leader SIGSTOP > lease TTL (zombie)", foLeaseTTL+time.Second, "lease TTL + 1s", func() time.Time {
		return zombie(f.leader(), foLeaseTTL+2*time.Second)
	})
	measure("worker SIGTERM (graceful handover)", 2*time.Second, "< 2s", func() time.Time {
		w := f.owner()
		at := time.Now()
		w.stop(b, 30*time.Second)
		f.worker()
		return at
	})
	measure("worker SIGKILL (crash)", foSessionTimeout+2*time.Second, "session timeout + 2s", func() time.Time {
		w := f.owner()
		at := time.Now()
		w.kill(b)
		f.worker()
		return at
	})
	measure("worker SIGSTOP > session timeout (zombie)", foSessionTimeout+2*time.Second, "session timeout + 2s", func() time.Time {
		return zombie(f.owner(), foSessionTimeout+2*time.Second)
	})
	measure("broker restart (SIGTERM, same data dir)", 0, "", func() time.Time {
		at := time.Now()
		c.brokerP.stop(b, 20*time.Second)
		c.startBroker(b)
		return at
	})
	measure("redis-server SIGKILL + restart (AOF)", 0, "", func() time.Time {
		at := time.Now()
		c.redis.Restart()
		return at
	})

	if os.Getenv("KJOB_TEST_ARTIFACTS") != "" { // what each process saw, to explain a slow sample
		for _, p := range append(append([]*process(nil), c.producers...), c.workers...) {
			b.Logf("%s's log: %s", p.name, p.saveLog(b, "failover"))
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nfailover: %d repetitions per fault; 1 job every 1s (catch-up 1m), 1 partition, 2 producers, 2 workers (dev broker, %s)\n", reps, c.redis)
	fmt.Fprintf(&sb, "settings: lease TTL %v, lease renew %v; session timeout %v, heartbeat %v; claim TTL %v\n",
		foLeaseTTL, foLeaseRenew, foSessionTimeout, foHeartbeat, foClaimTTL)
	fmt.Fprintf(&sb, "%-46s %9s %9s %9s %9s %9s %9s  %-28s %-4s %6s %s\n", "fault", "next p50", "next p99", "next max", "added p50", "added p99", "added max", "target (added p99)", "met", "missed", "runs>1")
	for _, r := range rows {
		next := make([]time.Duration, len(r.samples))
		added := make([]time.Duration, len(r.samples))
		for i, s := range r.samples {
			next[i], added[i] = s.next, s.added
		}
		target, met := "-", "-"
		if r.target > 0 {
			target = fmt.Sprintf("<= %v (%s)", r.target, r.why)
			met = "yes"
			if pct(added, 99) > r.target {
				met = "NO"
			}
		}
		fmt.Fprintf(&sb, "%-46s %9v %9v %9v %9v %9v %9v  %-28s %-4s %6d %d\n", r.fault, pct(next, 50), pct(next, 99), pct(next, 100),
			pct(added, 50), pct(added, 99), pct(added, 100), target, met, len(r.missed), r.doubled)
	}
	sb.WriteString("next: fault -> first window due at or after the fault executed (includes up to 1s waiting for that window's start);\n" +
		"added: that execution's delay past max(fault, window start), the failover's own cost, judged against the target.\n" +
		"With fewer than 100 samples p99 is the maximum. missed: windows due during the row's repetitions never executed (must be 0);\n" +
		"runs>1: windows whose handler ran more than once during the row (a worker crash re-runs its window; a producer fault must be 0).\n" +
		"KJOB_FAILOVER_FAULTS (a regular expression) picks the rows.\n")
	fmt.Fprint(os.Stdout, sb.String())
}

// pct returns the p-th percentile (nearest rank) of ds; 100 is the maximum.
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

// leader waits for any live producer to lead and returns it.
func (f *failover) leader() *process {
	var p *process
	testenv.Eventually(f.b, 30*time.Second, func() bool {
		p = latestLeader(f.c.producers, nil)
		return p != nil
	}, "no producer leads")
	return p
}

// latestLeader returns, among the live producers not skipped whose last
// lease event is an acquisition, the one that acquired the lease last (a
// resumed zombie still believes it leads until it notices); nil if none.
func latestLeader(ps []*process, skip func(*process) bool) *process {
	var best *process
	var bestAt time.Time
	for _, p := range ps {
		if !p.alive() || (skip != nil && skip(p)) || !leads(p) {
			continue
		}
		at, _ := lastLineTime(p, `msg="lease acquired"`)
		if best == nil || at.After(bestAt) {
			best, bestAt = p, at
		}
	}
	return best
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

// doubled counts the windows whose handler was called more than once
// since from.
func (f *failover) doubled(from time.Time) int {
	runs := map[string]int{}
	for _, e := range f.c.ledger.snapshot() {
		if !e.Received.Before(from) {
			runs[e.WindowID]++
		}
	}
	n := 0
	for _, c := range runs {
		if c > 1 {
			n++
		}
	}
	return n
}

// missed returns the windows of the job due in [from, to] (by the 1s
// cadence of the executed windows) that never reached the ledger.
func (f *failover) missed(from, to time.Time) []string {
	starts := map[int64]bool{}
	var first time.Time
	for _, e := range f.c.ledger.snapshot() {
		starts[e.WindowStart.UnixNano()] = true
		if first.IsZero() || e.WindowStart.Before(first) {
			first = e.WindowStart
		}
	}
	var out []string
	if first.IsZero() {
		return nil
	}
	// The first due start at or after from, on the cadence.
	s := first
	if s.Before(from) {
		s = s.Add(from.Sub(s).Truncate(time.Second))
		if s.Before(from) {
			s = s.Add(time.Second)
		}
	}
	for ; !s.After(to); s = s.Add(time.Second) {
		if !starts[s.UnixNano()] {
			out = append(out, s.UTC().Format(time.RFC3339))
		}
	}
	return out
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
