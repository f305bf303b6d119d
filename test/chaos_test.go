package test

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/chaos"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// The chaos run's settings: the binaries' defaults for the lease and the
// group session, a claim TTL short enough that crashed attempts re-run
// within the CI profile.
const (
	chaosLeaseTTL       = 5 * time.Second // producer default
	chaosSessionTimeout = 6 * time.Second // worker default
	chaosClaimTTL       = 6 * time.Second
	chaosPartitions     = 4
	chaosProducers      = 3
	chaosWorkers        = 4
	// chaosMaxSleep bounds the sleepy jobs' run time (the ledger answers
	// after a random 0..chaosMaxSleep).
	chaosMaxSleep = 3 * time.Second
	// chaosPublishLead is how long before its start a producer publishes
	// a window: the default, passed to the producers explicitly (an
	// inherited KJOB_PUBLISH_LEAD cannot change it) and given to the
	// checker (History.PublishLead; rules (a), (o) to (q) and (s)).
	chaosPublishLead = producer.DefaultPublishLead
)

// chaosSchedules mixes what a worker running windows concurrently must
// keep apart: fast jobs every second, a slow job (seconds per window), a
// failing job whose attempts are retried, and a job under each overlap
// policy whose windows often outlast the next tick. Workers run them with
// the default concurrency (100), so windows of different jobs overlap on
// every partition.
const chaosSchedules = `jobs:
  - name: steady
    schedule: "@every 1s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 10s
    catchup: 1m
    retries: {max_attempts: 50, backoff: 200ms, max_backoff: 2s}
  - name: sleepy
    schedule: "@every 1s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 10s
    catchup: 1m
    retries: {max_attempts: 50, backoff: 200ms, max_backoff: 2s}
  - name: slow
    schedule: "@every 5s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 20s
    catchup: 1m
    retries: {max_attempts: 50, backoff: 200ms, max_backoff: 2s}
  - name: flaky
    schedule: "@every 1s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 10s
    catchup: 1m
    retries: {max_attempts: 50, backoff: 100ms, max_backoff: 1s}
  - name: skipper
    schedule: "@every 1s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 10s
    catchup: 1m
    overlap: skip
    retries: {max_attempts: 50, backoff: 200ms, max_backoff: 2s}
  - name: newest
    schedule: "@every 1s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 10s
    catchup: 1m
    overlap: latest
    retries: {max_attempts: 50, backoff: 200ms, max_backoff: 2s}
  - name: replacer
    schedule: "@every 2s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 10s
    catchup: 1m
    overlap: replace
    retries: {max_attempts: 50, backoff: 200ms, max_backoff: 2s}
  - name: parallel
    schedule: "@every 1s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 10s
    catchup: 1m
    overlap: allow
    max_concurrent: 2
    retries: {max_attempts: 50, backoff: 200ms, max_backoff: 2s}
  - name: mutable
    schedule: "@every 2s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 10s
    catchup: 1m
    retries: {max_attempts: 50, backoff: 200ms, max_backoff: 2s}
`

var chaosJobs = []chaos.Job{
	{Name: "steady", Every: time.Second, Catchup: time.Minute, Overlap: chaos.OverlapQueue, MaxAttempts: 50},
	{Name: "sleepy", Every: time.Second, Catchup: time.Minute, Overlap: chaos.OverlapQueue, MaxAttempts: 50},
	{Name: "slow", Every: 5 * time.Second, Catchup: time.Minute, Overlap: chaos.OverlapQueue, MaxAttempts: 50},
	{Name: "flaky", Every: time.Second, Catchup: time.Minute, Overlap: chaos.OverlapQueue, MaxAttempts: 50},
	{Name: "skipper", Every: time.Second, Catchup: time.Minute, Overlap: chaos.OverlapSkip, MaxAttempts: 50},
	{Name: "newest", Every: time.Second, Catchup: time.Minute, Overlap: chaos.OverlapLatest, MaxAttempts: 50},
	{Name: "replacer", Every: 2 * time.Second, Catchup: time.Minute, Overlap: chaos.OverlapReplace, MaxAttempts: 50},
	{Name: "parallel", Every: time.Second, Catchup: time.Minute, Overlap: chaos.OverlapAllow, MaxConcurrent: 2, MaxAttempts: 50},
	// mutable's spec changes while the faults run (chaosspecs_test.go):
	// its versions, from the change log, give its windows.
	{Name: mutableJob, Catchup: time.Minute, Overlap: chaos.OverlapQueue, MaxAttempts: 50},
}

// Fault kinds, as reported in the run's summary.
const (
	faultKillLeader   = "SIGKILL leading producer"
	faultKillWorker   = "SIGKILL worker mid-handler"
	faultStopLeader   = "SIGSTOP leader > lease TTL (zombie leader)"
	faultStopWorker   = "SIGSTOP worker > session timeout (zombie worker)"
	faultBroker       = "broker restart"
	faultRedis        = "redis-server restart"
	faultCutWorkerTCP = "TCP cut worker <-> Redis (reset)"
	faultHoleWorker   = "TCP black-hole worker <-> Redis"
)

// chaosRun is one chaos run's state: the cluster, the fault schedule's
// random source and what was injected.
type chaosRun struct {
	t       *testing.T
	c       *cluster
	rng     *rand.Rand
	seed    uint64
	stopped map[*process]bool
	faults  map[string]int
	next    int // suffix of the next replacement process
	proxies map[*process]*tcpProxy
	// kinds are the fault kinds this run's profile must inject, in the
	// order of its fault functions.
	kinds []string
	// verdict is the run's summary line (seed, figures, checker verdict),
	// printed again as the test's last output when it fails.
	verdict string
	// redisDown are the times redis-server (the producers' lease store)
	// was down, for the checker's rule (a).
	redisDown []chaos.Interval
	// storeLosses are the Redis restarts, for rule (l).
	storeLosses []chaos.StoreLoss
	// watch asks the broker for an answer every second; brokerStuck is
	// closed once it went brokerStallAfter without one (see brokerStalled).
	watch       *brokerWatch
	brokerStuck chan struct{}
	stuckMsg    string
	// brokerMu guards c.brokerP, which restartBroker replaces while the
	// watch may read it.
	brokerMu sync.Mutex
}

// chaosFault is one kind of fault a profile injects: inject returns
// whether it was actually injected (false if the cluster offered no
// target, e.g. no worker mid-handler).
type chaosFault struct {
	kind   string
	inject func() bool
}

// TestChaos runs the broker, a durable redis-server, 3 producers and 4
// workers as processes, injects faults at random from a printed seed, then
// lets the run drain and checks the whole history with chaos.Check.
//
//	KJOB_CHAOS_SEED=n        replay a run's fault schedule
//	KJOB_CHAOS_DURATION=30m  how long faults are injected (default 40s;
//	                         `make soak DURATION=30m`)
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos test; skipped with -short")
	}
	seed, duration := chaosSettings(t)
	r := newChaosRun(t, seed, "")
	r.run(duration, []chaosFault{
		{faultKillLeader, r.killLeader},
		{faultKillWorker, r.killWorkerMidHandler},
		{faultStopLeader, r.stopLeader},
		{faultStopWorker, r.stopWorker},
		{faultBroker, r.restartBroker},
		{faultRedis, r.restartRedis},
		{faultCutWorkerTCP, r.cutWorkerFromRedis},
		{faultHoleWorker, r.blackholeWorkerFromRedis},
	})
}

// TestChaosKafkaErrors is the chaos run against an in-process kfake broker
// whose control hooks inject Kafka errors (failed offset commits, produce
// errors, coordinator not available) in bursts, interleaved with crashes of
// the leading producer and of workers mid-handler.
func TestChaosKafkaErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos test; skipped with -short")
	}
	seed, duration := chaosSettings(t)
	duration /= 2
	kc := testenv.Cluster(t)
	f := &kafkaFaults{}
	f.install(kc)
	r := newChaosRun(t, seed, kc.ListenAddrs()[0])
	hits := map[string]*atomic.Int64{faultKafkaCommit: &f.commitHits, faultKafkaProduce: &f.produceHits, faultKafkaCoordinator: &f.coordinatorHits}
	r.run(duration, []chaosFault{
		{faultKafkaCommit, r.kafkaErrors(&f.commit, &f.commitHits, faultKafkaCommit)},
		{faultKafkaProduce, r.kafkaErrors(&f.produce, &f.produceHits, faultKafkaProduce)},
		{faultKafkaCoordinator, r.kafkaErrors(&f.coordinator, &f.coordinatorHits, faultKafkaCoordinator)},
		{faultKillLeader, r.killLeader},
		{faultKillWorker, r.killWorkerMidHandler},
	})
	t.Logf("requests answered with an injected error: %d offset commits (commit fault), %d produces, %d commits and coordinator lookups (coordinator fault)",
		hits[faultKafkaCommit].Load(), hits[faultKafkaProduce].Load(), hits[faultKafkaCoordinator].Load())
}

// chaosSettings reads the seed and fault duration from the environment.
func chaosSettings(t *testing.T) (uint64, time.Duration) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KJOB_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KJOB_CHAOS_SEED=%q: want a whole number (the seed a previous run printed)", s)
		}
		seed = v
	}
	duration := 40 * time.Second
	if s := os.Getenv("KJOB_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("KJOB_CHAOS_DURATION=%q: want a positive duration such as \"30m\"", s)
		}
		duration = d
	}
	return seed, duration
}

// newChaosRun starts the cluster: a durable redis-server, the broker (a
// kjobdev broker process, or broker if not empty), 3 producers, 4 workers (the
// first reaching Redis through a cuttable proxy).
func newChaosRun(t *testing.T, seed uint64, broker string) *chaosRun {
	r := &chaosRun{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed,
		stopped: map[*process]bool{}, faults: map[string]int{}, proxies: map[*process]*tcpProxy{}}
	// Registered before any process starts, so it runs after their
	// cleanups (which print their last log lines on failure): a failed
	// run ends with its seed and the checker's verdict, enough to replay
	// it.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		v := r.verdict
		if v == "" {
			v = "the run did not reach the checker"
		}
		msg := fmt.Sprintf("chaos %s FAILED: seed %d (replay: KJOB_CHAOS_SEED=%d); %s", t.Name(), seed, seed, v)
		t.Log(msg)
		fmt.Fprintln(os.Stderr, msg)
	})
	r.c = newClusterWith(t, chaosSchedules, chaosPartitions, testenv.NewDurableRedis(t), broker)
	// Producers log at info. Workers keep the cluster's debug level: a
	// worker completing windows in a batch logs each one's "window done"
	// (window, token) only at debug, and the checker needs every
	// completion; the logs also serve the post-mortem of a failed run.
	r.c.env = append(r.c.env, "KJOB_LOG_LEVEL=info")
	r.c.ledger.mu.Lock()
	r.c.ledger.delay = r.sleepOf
	r.c.ledger.fail = r.failOf
	r.c.ledger.mu.Unlock()
	for range chaosProducers {
		r.startProducer()
	}
	r.startProxiedWorker()
	for range chaosWorkers - 1 {
		r.startWorker()
	}
	r.brokerStuck = make(chan struct{})
	r.watch = watchBroker(r.c.broker, brokerStallAfter, r.brokerStalled)
	t.Cleanup(r.watch.close)
	return r
}

// brokerStalled runs (on the watch's goroutine) when the broker left a
// request unanswered for brokerStallAfter: it saves the goroutines of the
// broker at that moment, while the stall lasts (the dev-broker process's,
// SIGQUIT; for an in-process broker, this test process's, which hold
// kfake's request loop), and makes the run stop with checkBroker.
func (r *chaosRun) brokerStalled(since time.Time) {
	dir := artifactsDir(r.t)
	r.brokerMu.Lock()
	p := r.c.brokerP
	r.brokerMu.Unlock()
	var where string
	if p != nil {
		where = r.saveGoroutines(p, dir)
	} else {
		path := filepath.Join(dir, fmt.Sprintf("chaos-%d-in-process-broker-goroutines.log", r.seed))
		if err := os.WriteFile(path, []byte(testenv.Goroutines()), 0o644); err != nil {
			where = "not saved: " + err.Error()
		} else {
			where = path
		}
	}
	r.stuckMsg = fmt.Sprintf("the embedded broker left a request (ApiVersions, on a new connection) unanswered from %s for %v: its request loop is blocked or busy, so every client's requests time out; its goroutines: %s",
		since.Format("15:04:05.000"), brokerStallAfter, where)
	close(r.brokerStuck)
}

// describeGroup is the workers' group as the broker describes it: its state
// and members. A run that does not drain while the broker answers shows
// here whether the group is stuck in a rebalance (see docs/real-kafka.md).
func (r *chaosRun) describeGroup() string {
	gs, err := r.c.admin(r.t).DescribeGroups(ctxTimeout(r.t, 5*time.Second), "kjob-workers")
	if err != nil {
		return "not described: " + err.Error()
	}
	g := gs["kjob-workers"]
	if g.Err != nil {
		return "not described: " + g.Err.Error()
	}
	members := make([]string, 0, len(g.Members))
	for _, m := range g.Members {
		members = append(members, m.ClientID)
	}
	slices.Sort(members)
	return fmt.Sprintf("%s, %d members %v", g.State, len(members), members)
}

// checkBroker stops the run if the broker stalled (see brokerStalled).
func (r *chaosRun) checkBroker() {
	select {
	case <-r.brokerStuck:
		r.t.Fatalf("chaos seed %d: %s", r.seed, r.stuckMsg)
	default:
	}
}

// run injects faults drawn from faults for duration, lets the cluster
// settle and drain, and judges the history with chaos.Check. It fails the
// test if a kind of the profile was never injected.
func (r *chaosRun) run(duration time.Duration, faults []chaosFault) {
	t := r.t
	for _, f := range faults {
		r.kinds = append(r.kinds, f.kind)
	}
	t.Logf("chaos seed %d (replay: KJOB_CHAOS_SEED=%d), faults for %v", r.seed, r.seed, duration)
	fmt.Fprintf(os.Stderr, "chaos %s: seed %d (replay: KJOB_CHAOS_SEED=%d), faults for %v\n", t.Name(), r.seed, r.seed, duration)
	testenv.Eventually(t, 90*time.Second, func() bool {
		return len(r.c.ledger.windows("steady")) >= 3 && len(r.c.ledger.windows("sleepy")) >= 3
	}, "the cluster did not start executing windows")

	// Every kind once in a seeded order (a kind that found no target is
	// tried again after the others, up to 3 times), then kinds drawn at
	// random until the duration is up: even the short CI profile injects
	// each kind.
	gap := func() {
		r.checkBroker()
		time.Sleep(time.Duration(2000+r.rng.IntN(4000)) * time.Millisecond) // the schedule's gap between faults
		r.checkBroker()
	}
	stopMutating := make(chan struct{})
	mut, mutated := r.startMutator(stopMutating)
	end := time.Now().Add(duration)
	todo := r.rng.Perm(len(faults))
	for round := 0; len(todo) > 0 && round < 3; round++ {
		var missed []int
		for _, k := range todo {
			if !faults[k].inject() {
				missed = append(missed, k)
			}
			gap()
		}
		todo = missed
	}
	for time.Now().Before(end) {
		faults[r.rng.IntN(len(faults))].inject()
		gap()
	}

	close(stopMutating)
	<-mutated
	t.Log(mut.summary())

	// Faults stop. Wait for any producer to lead and catch up, fix the end
	// of the "due" range, then stop the producers and let the workers
	// drain.
	quiet := time.Now()
	if r.waitLeader(30*time.Second) == nil {
		t.Errorf("no producer leads 30s after faults stopped")
	}
	time.Sleep(3 * time.Second) // windows published by the settled leader
	dueUntil := time.Now().Add(-2 * time.Second)
	for _, p := range r.c.producers {
		if p.alive() {
			p.stop(t, 20*time.Second)
		}
	}
	lag := r.drain(90 * time.Second)
	t.Logf("drained %v after faults stopped: lag %d; the broker took at most %v to answer the watch's requests",
		time.Since(quiet).Round(time.Millisecond), lag, r.watch.longestWait().Round(time.Millisecond))
	if lag != 0 {
		r.checkBroker()
		group := r.describeGroup()
		r.dumpStacks()
		t.Fatalf("chaos seed %d: the run did not drain within 90s (lag %d), while the broker answered the watch within %v; the workers' group: %s; the goroutines of the broker and workers are saved above",
			r.seed, lag, r.watch.longestWait().Round(time.Millisecond), group)
	}
	r.checkBroker()
	for _, w := range r.c.workers {
		if w.alive() {
			w.stop(t, 30*time.Second)
		}
	}

	h := r.history(dueUntil, lag)
	violations, err := chaos.Check(h)
	r.report(h, violations, err)
	if err != nil {
		t.Errorf("chaos seed %d: the checker refused the history: %v", r.seed, err)
	}
	for _, v := range violations {
		t.Errorf("violation %s", v)
	}
	if len(violations) > 0 {
		t.Errorf("chaos seed %d: %d violations (replay: KJOB_CHAOS_SEED=%d)", r.seed, len(violations), r.seed)
	}
	for _, k := range r.kinds {
		if r.faults[k] == 0 {
			t.Errorf("chaos seed %d: fault %q was never injected", r.seed, k)
		}
	}
}

// kafkaErrors returns a fault that turns on a kind of injected Kafka error
// for 3-6s; it counts as injected only if a request was answered with the
// error during the burst.
func (r *chaosRun) kafkaErrors(on *atomic.Bool, hits *atomic.Int64, kind string) func() bool {
	return func() bool {
		d := time.Duration(3000+r.rng.IntN(3000)) * time.Millisecond
		before := hits.Load()
		on.Store(true)
		time.Sleep(d) // the fault is the burst itself
		on.Store(false)
		n := hits.Load() - before
		if n == 0 {
			r.t.Logf("%s: no request of that kind during %v; not counted", kind, d)
			return false
		}
		r.fault(kind, "for %v: %d requests answered with the error", d, n)
		return true
	}
}

// draw is a number in [0, 1) fixed by the seed, the invocation and what.
func (r *chaosRun) draw(e ledgerEntry, what string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d/%s", r.seed, e.WindowID, e.FencingToken, what)
	return float64(h.Sum64()%1_000_000) / 1_000_000
}

// sleepOf is the ledger's run time for an invocation, fixed by the seed,
// the window and the token: none for "steady" and "flaky"; 0..3s skewed to
// short runs (3s * u^3, mean 0.75s) for "sleepy" (a queue job at a 1s
// cadence, so its mean stays below the cadence or its backlog never
// drains); 2..6s for "slow" (every 5s); 0.4..2.4s for the skip, latest and
// allow jobs, so a window often still runs at the next tick; 0.5..3.5s for
// "replacer" (every 2s), so some windows are replaced while they run.
func (r *chaosRun) sleepOf(e ledgerEntry) time.Duration {
	u := r.draw(e, "sleep")
	switch e.Job {
	case "steady", "flaky":
		return 0
	case "slow":
		return 2*time.Second + time.Duration(u*float64(4*time.Second))
	case "skipper", "newest", "parallel":
		return 400*time.Millisecond + time.Duration(u*float64(2*time.Second))
	case "replacer":
		return 500*time.Millisecond + time.Duration(u*float64(3*time.Second))
	}
	return time.Duration(u * u * u * float64(chaosMaxSleep))
}

// failOf fails half of the "flaky" job's attempts (fixed by the seed, the
// window and the token): they are retried with higher tokens.
func (r *chaosRun) failOf(e ledgerEntry) bool {
	return e.Job == "flaky" && r.draw(e, "fail") < 0.5
}

func (r *chaosRun) startProducer() *process {
	r.next++
	return r.c.startProducer(r.t, fmt.Sprintf("producer-%d", r.next), "KJOB_PUBLISH_LEAD="+chaosPublishLead.String())
}

func (r *chaosRun) startWorker(extra ...string) *process {
	r.next++
	env := append([]string{"KJOB_LOG_LEVEL=debug", "KJOB_CLAIM_TTL=" + chaosClaimTTL.String(), "KJOB_GRACE=5s",
		"KJOB_SESSION_TIMEOUT=" + chaosSessionTimeout.String()}, extra...)
	return r.c.startWorker(r.t, fmt.Sprintf("worker-%d", r.next), env...)
}

// leader returns the producer that holds the lease by its own logs, among
// the running ones that are not stopped (see latestLeader); nil if none.
func (r *chaosRun) leader() *process {
	return latestLeader(r.c.producers, func(p *process) bool { return r.stopped[p] })
}

func (r *chaosRun) waitLeader(timeout time.Duration) *process {
	var p *process
	deadline := time.Now().Add(timeout)
	for p = r.leader(); p == nil && time.Now().Before(deadline); p = r.leader() {
		time.Sleep(100 * time.Millisecond) // poll the producers' logs
	}
	return p
}

func (r *chaosRun) fault(kind, format string, args ...any) {
	r.faults[kind]++
	r.t.Logf("%s fault %s: %s", time.Now().Format("15:04:05.000"), kind, fmt.Sprintf(format, args...))
}

func (r *chaosRun) killLeader() bool {
	p := r.waitLeader(15 * time.Second)
	if p == nil {
		r.t.Logf("no leader to kill; skipping the fault")
		return false
	}
	p.kill(r.t)
	r.fault(faultKillLeader, "%s", p.name)
	r.startProducer()
	return true
}

// busyWorker returns a running, not stopped worker with a handler in
// flight (waiting up to 5s for one), and that invocation.
func (r *chaosRun) busyWorker() (*process, ledgerEntry) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		es := r.c.ledger.snapshot()
		for i := len(es) - 1; i >= 0; i-- {
			e := es[i]
			if !e.Ended.IsZero() {
				continue
			}
			for _, w := range r.c.workers {
				if w.name == e.Worker && w.alive() && !r.stopped[w] {
					return w, e
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, ledgerEntry{}
		}
		time.Sleep(20 * time.Millisecond) // poll the ledger
	}
}

func (r *chaosRun) killWorkerMidHandler() bool {
	w, e := r.busyWorker()
	if w == nil {
		r.t.Logf("no worker mid-handler; skipping the fault")
		return false
	}
	w.kill(r.t)
	r.fault(faultKillWorker, "%s while it ran %s (token %d)", w.name, e.WindowID, e.FencingToken)
	if r.proxies[w] != nil {
		r.startProxiedWorker()
		return true
	}
	r.startWorker()
	return true
}

// startProxiedWorker starts a worker whose Redis connections go through a
// new tcpProxy.
func (r *chaosRun) startProxiedWorker() *process {
	px := newTCPProxy(r.t, r.c.redis.Addr)
	w := r.startWorker("KJOB_REDIS_URL=redis://" + px.addr())
	r.proxies[w] = px
	return w
}

// proxiedWorker returns a running, not stopped worker whose Redis link
// goes through a proxy, and that proxy.
func (r *chaosRun) proxiedWorker() (*process, *tcpProxy) {
	for _, w := range r.c.workers {
		if px := r.proxies[w]; px != nil && w.alive() && !r.stopped[w] {
			return w, px
		}
	}
	return nil, nil
}

// cutWorkerFromRedis resets the proxied worker's Redis connections and
// refuses new ones for longer than the claim TTL, then restores the link.
func (r *chaosRun) cutWorkerFromRedis() bool {
	return r.disturbWorkerRedis(faultCutWorkerTCP, (*tcpProxy).cut)
}

// blackholeWorkerFromRedis silently drops the proxied worker's Redis
// traffic (connections stay open, nothing answers) for longer than the
// claim TTL, then restores the link.
func (r *chaosRun) blackholeWorkerFromRedis() bool {
	return r.disturbWorkerRedis(faultHoleWorker, (*tcpProxy).blackhole)
}

// disturbWorkerRedis applies disturb to the proxied worker's Redis link
// for longer than the claim TTL, then restores the link, and records the
// fault as kind.
func (r *chaosRun) disturbWorkerRedis(kind string, disturb func(*tcpProxy)) bool {
	w, px := r.proxiedWorker()
	if w == nil {
		r.t.Logf("no proxied worker alive; skipping the fault")
		return false
	}
	d := chaosClaimTTL + 2*time.Second
	disturb(px)
	time.Sleep(d) // the fault is the disturbed link itself
	px.restore()
	r.fault(kind, "%s for %v", w.name, d)
	return true
}

func (r *chaosRun) stopLeader() bool {
	p := r.waitLeader(15 * time.Second)
	if p == nil {
		r.t.Logf("no leader to stop; skipping the fault")
		return false
	}
	d := chaosLeaseTTL + 2*time.Second
	r.pause(p, d)
	r.fault(faultStopLeader, "%s for %v", p.name, d)
	return true
}

func (r *chaosRun) stopWorker() bool {
	w, e := r.busyWorker()
	if w == nil {
		r.t.Logf("no worker mid-handler; skipping the fault")
		return false
	}
	d := chaosSessionTimeout + 2*time.Second
	r.pause(w, d)
	r.fault(faultStopWorker, "%s for %v while it ran %s (token %d)", w.name, d, e.WindowID, e.FencingToken)
	return true
}

// pause SIGSTOPs p for d, then SIGCONTs it.
func (r *chaosRun) pause(p *process, d time.Duration) {
	p.signal(r.t, syscall.SIGSTOP)
	r.stopped[p] = true
	time.Sleep(d) // the fault is the pause itself
	p.signal(r.t, syscall.SIGCONT)
	delete(r.stopped, p)
}

func (r *chaosRun) restartBroker() bool {
	r.c.brokerP.stop(r.t, 20*time.Second)
	down := time.Now()
	r.brokerMu.Lock()
	r.c.startBroker(r.t)
	r.brokerMu.Unlock()
	r.fault(faultBroker, "down for %v", time.Since(down).Round(time.Millisecond))
	return true
}

func (r *chaosRun) restartRedis() bool {
	down := time.Now()
	r.c.redis.Restart()
	r.redisDown = append(r.redisDown, chaos.Interval{From: down, To: time.Now()})
	r.storeLosses = append(r.storeLosses, chaos.StoreLoss{Down: down, Up: time.Now()})
	r.fault(faultRedis, "SIGKILL and restart (AOF) in %v", time.Since(down).Round(time.Millisecond))
	return true
}

// drain waits until the group's lag is 0 and returns the last lag read
// (-1 if it could never be read).
func (r *chaosRun) drain(timeout time.Duration) int64 {
	lag, deadline := int64(-1), time.Now().Add(timeout)
	for {
		l, err := r.c.groupLag(r.t)
		if err == nil {
			lag = l
			if l == 0 {
				return 0
			}
		}
		if time.Now().After(deadline) {
			r.t.Logf("lag %d after %v (err %v)", lag, timeout, err)
			return lag
		}
		r.checkBroker()
		time.Sleep(200 * time.Millisecond) // poll the group's offsets
	}
}

var (
	doneLine = regexp.MustCompile(`msg="window done".* window=(\S+) .*token=(\d+)`)
	skipLine = regexp.MustCompile(`msg="window skipped".* window=(\S+) .*status=(\S+) reason=("(?:[^"\\]|\\.)*"|\S+)`)
)

// history gathers the run's history for the checker: the topic
// read-committed, the dead letters, the ledger, the completions the workers
// logged and the store's state of every published window.
func (r *chaosRun) history(dueUntil time.Time, lag int64) chaos.History {
	t := r.t
	h := chaos.History{Jobs: chaosJobs, DueUntil: dueUntil, FinalLag: lag, DeadLettered: map[string]bool{}, States: map[string]chaos.State{},
		Partitions: chaosPartitions, LeaseStoreOutages: r.redisDown, StoreLosses: r.storeLosses, PublishLead: chaosPublishLead}
	read := testenv.ReadTopic(t, []string{r.c.broker}, "kjob.windows")
	h.TopicEnds, h.TopicReadTo = read.Ends, read.ReadTo
	for _, rec := range read.Records {
		m, err := jobmsg.FromRecord(rec)
		if err != nil {
			t.Errorf("undecodable record at %d/%d: %v", rec.Partition, rec.Offset, err)
			continue
		}
		h.Published = append(h.Published, chaos.Record{Window: m.ID, Job: m.Job, Start: m.Window.Start, PublishedAt: m.PublishedAt, ScheduleVersion: m.ScheduleVersion,
			Partition: rec.Partition, Offset: rec.Offset, ProducerID: rec.ProducerID, ProducerEpoch: rec.ProducerEpoch})
	}
	h.SpecChanges = r.specChanges()
	for _, rec := range testenv.ReadCommitted(t, []string{r.c.broker}, "kjob.windows.dlq") {
		if m, err := jobmsg.FromRecord(rec); err == nil {
			h.DeadLettered[m.ID] = true
		}
	}
	for _, e := range r.c.ledger.snapshot() {
		h.Attempts = append(h.Attempts, chaos.Attempt{Window: e.WindowID, Job: e.Job, Token: e.FencingToken, Worker: e.Worker,
			Start: e.Received, End: e.Ended, OK: e.Answered})
	}
	for _, w := range r.c.workers {
		w.mu.Lock()
		for _, l := range w.lines {
			if m := doneLine.FindStringSubmatch(l); m != nil {
				tok, _ := strconv.ParseInt(m[2], 10, 64)
				h.Completions = append(h.Completions, chaos.Completion{Window: m[1], Token: tok, Worker: w.name})
			}
			if m := skipLine.FindStringSubmatch(l); m != nil {
				reason := m[3]
				if u, err := strconv.Unquote(reason); err == nil {
					reason = u
				}
				h.Skips = append(h.Skips, chaos.Skip{Window: m[1], Worker: w.name, Status: m[2], Reason: reason})
			}
		}
		w.mu.Unlock()
	}
	store, err := dedupe.New(r.c.redis.Client(), dedupe.Config{Namespace: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range h.Published {
		st, err := store.State(ctxTimeout(t, 5*time.Second), p.Window)
		switch {
		case errors.Is(err, dedupe.ErrNotFound):
			h.States[p.Window] = chaos.State{Status: chaos.StatusAbsent}
		case err != nil:
			t.Fatalf("state of %s: %v", p.Window, err)
		default:
			h.States[p.Window] = chaos.State{Status: st.Status, Token: st.Token, ClaimLive: st.ClaimTTL > 0, Reason: st.LastError}
			if dedupe.SkippedByReplay(st) { // none in this run: Check then asks for the replay skips (rule (j))
				h.States[p.Window] = chaos.State{Status: chaos.StatusSkippedReplay, Token: st.Token, Reason: st.LastError}
			}
		}
	}
	return h
}

// report logs the run's figures: seed, windows, attempts, faults per type,
// verdict.
func (r *chaosRun) report(h chaos.History, violations []chaos.Violation, checkErr error) {
	windows := map[string]bool{}
	for _, p := range h.Published {
		windows[p.Window] = true
	}
	perWindow := map[string]int{}
	for _, a := range h.Attempts {
		perWindow[a.Window]++
	}
	reruns := 0
	for _, n := range perWindow {
		reruns += n - 1
	}
	kinds := make([]string, 0, len(r.kinds))
	total := 0
	for _, k := range r.kinds {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, r.faults[k]))
		total += r.faults[k]
	}
	verdict := "checker: no violations"
	switch {
	case checkErr != nil:
		verdict = "checker REFUSED the history: " + checkErr.Error()
	case len(violations) > 0:
		var vs []string
		for _, v := range violations {
			vs = append(vs, v.String())
		}
		verdict = fmt.Sprintf("checker: %d VIOLATIONS: %s", len(violations), strings.Join(vs, "; "))
	}
	// Windows settled without running, per job (and so per policy).
	settled := map[string]int{}
	for id, st := range h.States {
		if st.Status == chaos.StatusSkipped || st.Status == chaos.StatusSuperseded {
			job, _, _ := strings.Cut(id, "@")
			settled[job+" "+st.Status]++
		}
	}
	var perPolicy []string
	for _, j := range h.Jobs {
		for _, status := range []string{chaos.StatusSkipped, chaos.StatusSuperseded} {
			if n := settled[j.Name+" "+status]; n > 0 {
				perPolicy = append(perPolicy, fmt.Sprintf("%s (%s): %d %s", j.Name, j.Overlap, n, status))
			}
		}
	}
	if len(perPolicy) == 0 {
		perPolicy = append(perPolicy, "none")
	}
	r.verdict = fmt.Sprintf("%d windows, %d re-runs, %d skipped or superseded; %s", len(windows), reruns, len(h.Skips), verdict)
	msg := fmt.Sprintf("chaos %s seed %d: %d windows published, %d handler invocations (%d re-runs), %d completions, %d dead-lettered; %d faults; %s\nsettled without running, per job: %s\nfaults injected per type:\n  %s",
		r.t.Name(), r.seed, len(windows), len(h.Attempts), reruns, len(h.Completions), len(h.DeadLettered), total, verdict, strings.Join(perPolicy, ", "), strings.Join(kinds, "\n  "))
	r.t.Log(msg)
	fmt.Fprintln(os.Stderr, "chaos:", msg)
}

// dumpStacks, for a run that did not drain, makes the broker process (if
// there is one) and every live worker print its goroutines (SIGQUIT: the
// Go runtime prints them and exits) and saves each one's whole log in
// KJOB_TEST_ARTIFACTS (CI keeps it), so that a stall can be told apart:
// a broker that stopped answering, or a worker waiting on itself.
func (r *chaosRun) dumpStacks() {
	dir := artifactsDir(r.t)
	procs := append([]*process{}, r.c.workers...)
	r.brokerMu.Lock()
	if r.c.brokerP != nil {
		procs = append(procs, r.c.brokerP)
	}
	r.brokerMu.Unlock()
	for _, p := range procs {
		if p.alive() {
			r.saveGoroutines(p, dir)
		}
	}
}

// artifactsDir is KJOB_TEST_ARTIFACTS (CI keeps it; created if missing),
// or a temporary directory.
func artifactsDir(t *testing.T) string {
	if dir := os.Getenv("KJOB_TEST_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Logf("KJOB_TEST_ARTIFACTS: %v", err)
		}
		return dir
	}
	return t.TempDir()
}

// saveGoroutines makes p print its goroutines (SIGQUIT: the Go runtime
// prints them and exits), saves its whole log in dir and returns the
// file's path, or why it could not.
func (r *chaosRun) saveGoroutines(p *process, dir string) string {
	t := r.t
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Logf("%s did not exit within 10s of SIGQUIT", p.name)
		return "none: it did not exit within 10s of SIGQUIT"
	}
	p.mu.Lock()
	body := strings.Join(p.lines, "\n")
	p.mu.Unlock()
	path := filepath.Join(dir, fmt.Sprintf("chaos-%d-%s.log", r.seed, p.name))
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Logf("saving %s's goroutines: %v", p.name, err)
		return "not saved: " + err.Error()
	}
	t.Logf("%s's log with its goroutines at the stall: %s", p.name, path)
	return path
}
