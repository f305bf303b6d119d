package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// The workloads of issue 23 (schedules as a log): a spec change reaching
// the leader's publications, an apply of 100,000 new jobs through the
// API, and a takeover with 100,000 specs in the schedules topic. Each
// runs cmd/producer processes with no schedules file: every job comes
// through kjob.Schedules, as an application's would.

const specsNamespace = "bench"

// producerArgs are a producer's flags for the deployment of the windows
// topic, with no schedules file (the schedules topic's jobs only).
func producerArgs(brokers []string, r *testenv.Redis, topic string, partitions int, id string) []string {
	return []string{"--brokers", brokers[0], "--redis-url", r.URL(), "--topic", topic, "--partitions", strconv.Itoa(partitions),
		"--schedules", "", "--namespace", specsNamespace, "--id", id, "--http-addr", ""}
}

// schedulesClient is the Go API of the deployment of topic.
func schedulesClient(b *testing.B, brokers []string, topic string) *kjob.Schedules {
	b.Helper()
	s, err := kjob.NewSchedules(kjob.SchedulesConfig{Brokers: brokers, Namespace: specsNamespace, Topic: topic, Actor: "bench", Wait: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// mixedSpecs returns n jobs with the schedules of the 100k-schedules
// workload (mixedSpec).
func mixedSpecs(n int) []schedule.Spec {
	list := make([]schedule.Spec, n)
	for i := range list {
		spec, zone := mixedSpec(i)
		list[i] = schedule.Spec{Name: fmt.Sprintf("job-%06d", i), Schedule: spec, Timezone: zone, Handler: "noop", Catchup: "0s"}
	}
	return list
}

// seenWindow is a window record as a read-committed consumer saw it.
type seenWindow struct {
	start, published, visible time.Time
	version                   int64
}

// logWatch follows a deployment's windows topic and schedules topic,
// read committed, from their start: the windows of one job (all jobs if
// job is empty), and the instant each spec version took effect.
type logWatch struct {
	mu        sync.Mutex
	windows   []seenWindow
	effective map[int64]time.Time // version of job -> its EffectiveFrom (the leader's instant)
	changed   chan struct{}
}

func watchLogs(b *testing.B, brokers []string, d names.Deployment, job string) *logWatch {
	b.Helper()
	w := &logWatch{effective: map[int64]time.Time{}, changed: make(chan struct{}, 1)}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(d.WindowsTopic(), d.SchedulesTopic()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.Cleanup(func() { cancel(); <-done; cl.Close() })
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			w.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if r.Topic == d.SchedulesTopic() {
					if e, err := specs.ParseSpecRecord(r, specsNamespace); err == nil && e.Record != nil && (job == "" || e.Job == job) {
						w.effective[e.Version] = e.Record.EffectiveFrom
					}
					return
				}
				m, err := jobmsg.FromRecord(r)
				if err != nil || (job != "" && m.Job != job) {
					return
				}
				w.windows = append(w.windows, seenWindow{start: m.ScheduledAt, published: m.PublishedAt, visible: now, version: m.ScheduleVersion})
			})
			w.mu.Unlock()
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	}()
	return w
}

// waitFor waits until cond, called with w locked, returns true.
func (w *logWatch) waitFor(b *testing.B, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok := cond()
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-w.changed:
		case <-deadline.C:
			b.Fatalf("no %s within %v", what, timeout)
		}
	}
}

// firstOfVersion returns the first window of version v (w locked).
func (w *logWatch) firstOfVersion(v int64) (seenWindow, bool) {
	for _, x := range w.windows {
		if x.version == v {
			return x, true
		}
	}
	return seenWindow{}, false
}

// changes is how many spec changes BenchmarkScheduleChange makes
// (KJOB_BENCH_CHANGES, default 100).
func changes() int {
	if n, err := strconv.Atoi(os.Getenv("KJOB_BENCH_CHANGES")); err == nil && n > 0 {
		return n
	}
	return 100
}

// BenchmarkScheduleChange: a job "@every 1s" whose spec is changed
// through kjob.Schedules.Update, one change at a time at a random moment
// within the second, by a client in this process; a producer process
// leads. Per change: the time from the leader's instant F (the change's
// EffectiveFrom, taken before its transaction commits) to the first
// window published under the new version; the time an Update takes
// (submit -> the leader's answer, after its commit); and whether every
// window after F carries the new version with none lost or doubled.
func BenchmarkScheduleChange(b *testing.B) {
	for range b.N {
		benchScheduleChange(b, changes())
	}
}

func benchScheduleChange(b *testing.B, n int) {
	brokers := broker(b)
	r := redis(b)
	const topic, job = "change", "tick"
	d := names.Deployment{Namespace: specsNamespace, Topic: topic}
	p := start(b, "producer", "publishing as leader", producerArgs(brokers, r, topic, 1, "producer-a")...)
	p.wait(b, 60*time.Second, "leadership")
	s := schedulesClient(b, brokers, topic)
	w := watchLogs(b, brokers, d, job)
	ctx := context.Background()

	spec := func(i int) schedule.Spec {
		return schedule.Spec{Name: job, Schedule: "@every 1s", Handler: "noop", Catchup: "0s", Payload: json.RawMessage(fmt.Sprintf(`{"change":%d}`, i))}
	}
	v, err := s.Create(ctx, spec(0), "bench: created")
	if err != nil {
		b.Fatal(err)
	}
	w.waitFor(b, 10*time.Second, "window of the created job", func() bool { _, ok := w.firstOfVersion(v); return ok })

	var follow, firstLate, commit []time.Duration
	versions := []int64{v}
	b.ResetTimer()
	for i := 1; i <= n; i++ {
		time.Sleep(rand.N(time.Second)) // a random moment within the job's second
		t0 := time.Now()
		nv, err := s.Update(ctx, spec(i), v, "bench: change")
		if err != nil {
			b.Fatalf("change %d: %v", i, err)
		}
		commit = append(commit, time.Since(t0))
		var first seenWindow
		w.waitFor(b, 10*time.Second, fmt.Sprintf("window of version %d", nv), func() bool {
			var ok bool
			first, ok = w.firstOfVersion(nv)
			_, known := w.effective[nv]
			return ok && known
		})
		w.mu.Lock()
		f := w.effective[nv]
		w.mu.Unlock()
		follow = append(follow, first.published.Sub(f))
		firstLate = append(firstLate, first.published.Sub(first.start))
		v = nv
		versions = append(versions, nv)
	}
	b.StopTimer()

	// Every window that starts after a version's F and up to the next's
	// carries that version; windows are one per second, none lost or
	// doubled, from the first change to the last window seen.
	w.mu.Lock()
	eff := make([]time.Time, len(versions))
	for i, x := range versions {
		eff[i] = w.effective[x]
	}
	var stale []time.Duration
	starts := map[int64]int{}
	var lo, hi int64
	for _, x := range w.windows {
		if !x.start.After(eff[1]) {
			continue
		}
		i := len(eff) - 1
		for i > 0 && !x.start.After(eff[i]) {
			i--
		}
		if x.version != versions[i] {
			stale = append(stale, x.start.Sub(eff[i]))
		}
		sec := x.start.Unix()
		starts[sec]++
		if lo == 0 || sec < lo {
			lo = sec
		}
		hi = max(hi, sec)
	}
	w.mu.Unlock()
	var lost, doubled int
	for sec := lo; sec <= hi; sec++ {
		switch c := starts[sec]; {
		case c == 0:
			lost++
		case c > 1:
			doubled += c - 1
		}
	}
	settings := fmt.Sprintf("1 job @every 1s, %d changes (payload) through kjob.Schedules.Update at random moments within the second, one at a time; producer process (no schedules file) on the embedded broker, 1 partition; %s", n, machine())
	reportDurations(b, "schedule change: leader's instant F -> first window of the new version published (includes the wait for the next second)", follow, settings)
	reportDurations(b, "schedule change: first window of a new version, published_at - window start", firstLate, settings)
	reportDurations(b, "schedule change: Update submit -> answer (committed)", commit, settings)
	report(b, "schedule change: windows after F published under an older version", float64(len(stale)), "windows", settings)
	report(b, fmt.Sprintf("schedule change: windows lost / doubled over %d s of changes", hi-lo+1), float64(lost+doubled), "windows", fmt.Sprintf("%d lost, %d doubled; %s", lost, doubled, settings))
}

// reportDurations reports p50, p99 (nearest rank) and max of ds, with
// the sample count.
func reportDurations(b *testing.B, what string, ds []time.Duration, settings string) {
	b.Helper()
	l := &lateness{}
	for _, d := range ds {
		l.add(d)
	}
	reportLateness(b, what, l, settings)
}

// BenchmarkScheduleApply: 100,000 new jobs (the mix of the 100k-schedules
// workload) applied with kjob.Schedules.Apply by a client in this process
// to a leading producer process with no schedules file. Committed: Apply
// returns (every request answered, after its transaction). Scheduled: the
// producer logged "schedule changed" for every job, which it does after
// the commit, once the job's next window is in its timer heap. The
// producer's resident memory when all are scheduled, and its peak.
func BenchmarkScheduleApply(b *testing.B) {
	for range b.N {
		benchScheduleApply(b, 100_000)
	}
}

// applyAll applies n new jobs through s to the leader p, which tracks
// "schedule changed", and returns the time to committed and to the last
// job scheduled (the producer's log time of its last "schedule changed").
func applyAll(b *testing.B, s *kjob.Schedules, p *proc, n int) (committed, scheduled time.Duration) {
	b.Helper()
	list := mixedSpecs(n)
	before := p.seen("schedule changed").count
	t0 := time.Now()
	res, err := s.Apply(context.Background(), list, kjob.ApplyOptions{Note: "bench: apply"})
	committed = time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	if len(res.Created) != n {
		b.Fatalf("apply created %d jobs, want %d (updated %d, unchanged %d)", len(res.Created), n, len(res.Updated), len(res.Unchanged))
	}
	t := p.waitCount(b, "schedule changed", before+n, 2*time.Minute)
	if t.last.at.IsZero() {
		b.Fatalf("no time= in the producer's log line %q", t.last.text)
	}
	return committed, t.last.at.Sub(t0)
}

func benchScheduleApply(b *testing.B, n int) {
	brokers := broker(b)
	r := redis(b)
	const topic = "apply"
	bins(b)
	p := startTracking(b, "producer", nil, "publishing as leader", []string{"schedule changed"}, producerArgs(brokers, r, topic, 4, "producer-a")...)
	p.wait(b, 60*time.Second, "leadership")
	s := schedulesClient(b, brokers, topic)
	pid := p.cmd.Process.Pid
	u0 := readUsage(b, pid)
	b.ResetTimer()
	committed, scheduled := applyAll(b, s, p, n)
	u1 := readUsage(b, pid)
	b.StopTimer()
	settings := fmt.Sprintf("%d new jobs (mixed 6-field, @every, hourly, daily; 4 zones) in one kjob.Schedules.Apply from this process, %d requests of %d; producer process (no schedules file, log level info) on the embedded broker, 4 partitions; %s",
		n, (n+specs.MaxEdits-1)/specs.MaxEdits, specs.MaxEdits, machine())
	report(b, "apply 100k new jobs: to committed (Apply returns)", committed.Seconds(), "s", settings)
	report(b, "apply 100k new jobs: to all scheduled (producer's last 'schedule changed')", scheduled.Seconds(), "s", settings)
	report(b, "apply 100k new jobs: producer RSS when all are scheduled", float64(u1.rss)/(1<<20), "MiB", settings)
	report(b, "apply 100k new jobs: producer peak RSS", float64(u1.hwm)/(1<<20), "MiB", settings)
	report(b, "apply 100k new jobs: producer RSS, anonymous only (without the mapped binary)", float64(u1.anon)/(1<<20), "MiB", settings)
	report(b, "apply 100k new jobs: producer CPU during the apply", (u1.cpu - u0.cpu).Seconds(), "s", settings)
}

// followLine is what a producer that follows the schedules topic while
// standing by logs once it has read it to its end (the standby follower
// of issue 23); a producer without it reads the whole topic at takeover.
const followLine = "following the schedules topic: read up to its end"

// binaryHas reports whether the binary name under test contains text (a
// log message it can write).
func binaryHas(b *testing.B, name, text string) bool {
	b.Helper()
	bin, err := os.ReadFile(filepath.Join(bins(b), name))
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Contains(bin, []byte(text))
}

// BenchmarkScheduleTakeover: producer A leads 100,000 jobs applied
// through the API (as BenchmarkScheduleApply); producer B stands by (and,
// if it follows the schedules topic, has read it to its end). A is killed
// with SIGKILL; its lease expires at the instant Redis gives (PTTL after
// the kill). Measured from that expiry: B's lease acquired, B leading
// ("publishing as leader", after it fenced A and read the state and the
// specs), and B's first window published (its published_at) and visible
// to a read-committed consumer. Also the time B spent reading the specs:
// the schedules_read_took B logs if it logs it, else a cold read of the
// topic (specs.ReadAll and validation of each spec, as readSpecs does) in
// this process after the takeover.
func BenchmarkScheduleTakeover(b *testing.B) {
	for range b.N {
		benchScheduleTakeover(b, 100_000)
	}
}

func benchScheduleTakeover(b *testing.B, n int) {
	brokers := broker(b)
	r := redis(b)
	const topic = "takeover"
	d := names.Deployment{Namespace: specsNamespace, Topic: topic}
	bins(b)
	follows := binaryHas(b, "producer", followLine)
	pa := startTracking(b, "producer", nil, "publishing as leader", []string{"schedule changed"}, producerArgs(brokers, r, topic, 4, "producer-a")...)
	pa.wait(b, 60*time.Second, "leadership")
	s := schedulesClient(b, brokers, topic)
	applyAll(b, s, pa, n)

	track := []string{"lease held by another replica", "lease acquired", "publishing as leader", followLine}
	pb := startTracking(b, "producer", nil, "", track, producerArgs(brokers, r, topic, 4, "producer-b")...)
	pb.waitCount(b, "lease held by another replica", 1, 60*time.Second)
	if follows {
		pb.waitCount(b, followLine, 1, 60*time.Second)
	}
	w := watchLogs(b, brokers, d, "")

	b.ResetTimer()
	killed := time.Now()
	if err := pa.cmd.Process.Kill(); err != nil {
		b.Fatal(err)
	}
	<-pa.done
	ctx := context.Background()
	t0 := time.Now()
	pttl, err := r.Client().PTTL(ctx, d.LeaseKey()).Result()
	if err != nil {
		b.Fatal(err)
	}
	if pttl <= 0 {
		b.Fatalf("the lease key %s has PTTL %v after the leader was killed: want the remaining TTL", d.LeaseKey(), pttl)
	}
	expiry := t0.Add(time.Since(t0)/2 + pttl)

	leading := pb.waitCount(b, "publishing as leader", 1, 2*time.Minute).first
	acquired := pb.seen("lease acquired").first
	var first seenWindow
	w.waitFor(b, time.Minute, "window published by the new leader", func() bool {
		for _, x := range w.windows {
			if x.published.After(killed) && (first.published.IsZero() || x.published.Before(first.published)) {
				first = x
			}
		}
		return !first.published.IsZero()
	})
	b.StopTimer()

	var readTook time.Duration
	readHow := "logged by the new leader (schedules_read_took)"
	if v, ok := logField(leading.text, "schedules_read_took"); ok {
		if readTook, err = time.ParseDuration(v); err != nil {
			b.Fatalf("schedules_read_took=%q: %v", v, err)
		}
	} else {
		readHow = "a cold read of the whole topic in the bench process after the takeover (specs.ReadAll + Spec.Job of each), as the new leader's readSpecs"
		t := time.Now()
		snap, err := specs.ReadAll(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, d.SchedulesTopic(), specsNamespace)
		if err != nil {
			b.Fatal(err)
		}
		for name, rec := range snap.Jobs {
			if _, err := rec.Spec.Job(name); err != nil {
				b.Fatal(err)
			}
		}
		readTook = time.Since(t)
		if len(snap.Jobs) != n {
			b.Fatalf("read %d specs, want %d", len(snap.Jobs), n)
		}
	}
	standby := "reads the whole schedules topic when it takes over"
	if follows {
		standby = "follows the schedules topic while standing by (read to its end before the kill)"
	}
	settings := fmt.Sprintf("%d jobs applied through kjob.Schedules (mixed specs), 2 producer processes (lease TTL 2s, renew 300ms, their defaults; the standby %s), leader SIGKILLed, expiry = kill + Redis PTTL of the lease; embedded broker, 4 partitions; %s",
		n, standby, machine())
	report(b, "takeover 100k specs: lease expiry -> new leader's lease acquired", acquired.at.Sub(expiry).Seconds(), "s", settings)
	report(b, "takeover 100k specs: lease expiry -> new leader leading", leading.at.Sub(expiry).Seconds(), "s", settings)
	report(b, "takeover 100k specs: lease expiry -> first window published", first.published.Sub(expiry).Seconds(), "s", settings)
	report(b, "takeover 100k specs: lease expiry -> first window visible (read committed)", first.visible.Sub(expiry).Seconds(), "s", settings)
	report(b, "takeover 100k specs: new leader's lease acquired -> leading (fence, read state and specs)", leading.at.Sub(acquired.at).Seconds(), "s", settings)
	report(b, "takeover 100k specs: reading the specs", readTook.Seconds(), "s", readHow+"; "+settings)
}
