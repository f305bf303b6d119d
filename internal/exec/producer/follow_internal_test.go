package producer

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/store/topic"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// specWriter writes the schedules topic as a leader does: in transactions
// (or, for garbage, as a stray client would: without one).
type specWriter struct {
	tb    testing.TB
	topic string
	txn   *kgo.Client
	plain *kgo.Client
	ctx   context.Context
}

func newSpecWriter(tb testing.TB, brokers []string, name string) *specWriter {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	tb.Cleanup(cancel)
	txn, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("spec-writer"), kgo.ProducerLinger(0))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(txn.Close)
	plain, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(plain.Close)
	if err := topic.Ensure(ctx, kadm.NewClient(plain), topic.Spec{Name: name, Partitions: 1, ReplicationFactor: 1, Compacted: true}); err != nil {
		tb.Fatal(err)
	}
	return &specWriter{tb: tb, topic: name, txn: txn, plain: plain, ctx: ctx}
}

// rec is job's record at version v: schedule "@every <every>", in
// namespace ns, effective from eff.
func (w *specWriter) rec(ns, job string, v int64, every, tz string, eff time.Time) *kgo.Record {
	w.tb.Helper()
	r, err := specs.SpecRecord(w.topic, &specs.Record{Namespace: ns, Job: job, Version: v,
		Spec:  schedule.Spec{Name: job, Schedule: "@every " + every, Handler: "log", Timezone: tz},
		SetBy: "test", Source: specs.Source{Kind: specs.SourceAPI}, SetAt: eff, ChangeID: fmt.Sprintf("%s/%d", job, v), EffectiveFrom: eff})
	if err != nil {
		w.tb.Fatal(err)
	}
	return r
}

func (w *specWriter) tombstone(job string, v int64) *kgo.Record {
	return specs.Tombstone(w.topic, job, v)
}

func (w *specWriter) garbage(job string) *kgo.Record {
	return &kgo.Record{Topic: w.topic, Key: []byte(job), Value: []byte("{garbage")}
}

// txn commits recs in one transaction, or aborts them.
func (w *specWriter) txnOf(commit bool, recs ...*kgo.Record) {
	w.tb.Helper()
	if err := w.txn.BeginTransaction(); err != nil {
		w.tb.Fatal(err)
	}
	if err := w.txn.ProduceSync(w.ctx, recs...).FirstErr(); err != nil {
		w.tb.Fatal(err)
	}
	if err := w.txn.EndTransaction(w.ctx, kgo.TransactionEndTry(commit)); err != nil {
		w.tb.Fatal(err)
	}
}

func (w *specWriter) stray(recs ...*kgo.Record) {
	w.tb.Helper()
	if err := w.plain.ProduceSync(w.ctx, recs...).FirstErr(); err != nil {
		w.tb.Fatal(err)
	}
}

// coldRead is what a leader read before standbys followed: the whole
// topic through specs.ReadAll (every current record, spec included), then
// each current record's spec validated.
type coldRead struct {
	snap *specs.Snapshot
	jobs map[string]*schedule.Job
}

// coldView reads the topic cold. It returns the read and how many records
// were malformed or did not validate.
func coldView(tb testing.TB, p *Producer) (coldRead, int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	snap, err := specs.ReadAll(ctx, p.kafkaOpts("cold"), p.cfg.SchedulesTopic, p.cfg.Namespace)
	if err != nil {
		tb.Fatal(err)
	}
	bad := len(snap.Malformed)
	snap.Malformed = nil
	jobs := map[string]*schedule.Job{}
	for name, rec := range snap.Jobs {
		j, err := rec.Spec.Job(name)
		if err != nil {
			bad++
			continue
		}
		jobs[name] = j
	}
	return coldRead{snap: snap, jobs: jobs}, bad
}

// viewRecords is every current record v holds: the valid jobs' records
// rebuilt from live (their specs from the jobs), and the records whose
// spec does not validate, which v keeps whole.
func viewRecords(tb testing.TB, v *specView, namespace string) map[string]*specs.Record {
	tb.Helper()
	out := map[string]*specs.Record{}
	for name, l := range v.live {
		out[name] = l.record(namespace)
	}
	for name, rec := range v.snap.Jobs {
		if _, ok := out[name]; ok {
			tb.Errorf("%s is both a valid job and a record that does not validate", name)
		}
		out[name] = rec
	}
	return out
}

// sameView fails tb unless warm holds what cold holds: every job's record
// exactly (its spec rebuilt from the validated job), the deleted jobs'
// versions, the offsets read, and the validated jobs.
func sameView(tb testing.TB, what string, warm *specView, cold coldRead) {
	tb.Helper()
	if recs := viewRecords(tb, warm, cold.namespace()); !reflect.DeepEqual(recs, cold.snap.Jobs) {
		tb.Errorf("%s: jobs differ:\n warm %s\n cold %s", what, dumpJobs(recs), dumpJobs(cold.snap.Jobs))
	}
	if !reflect.DeepEqual(warm.snap.Deleted, cold.snap.Deleted) {
		tb.Errorf("%s: deleted %v, cold read %v", what, warm.snap.Deleted, cold.snap.Deleted)
	}
	if !reflect.DeepEqual(warm.snap.End, cold.snap.End) {
		tb.Errorf("%s: read up to %v, cold read %v", what, warm.snap.End, cold.snap.End)
	}
	if w, c := slices.Sorted(maps.Keys(warm.live)), slices.Sorted(maps.Keys(cold.jobs)); !slices.Equal(w, c) {
		tb.Errorf("%s: validated jobs %v, cold read %v", what, w, c)
	}
	for name, l := range warm.live {
		c, ok := cold.jobs[name]
		if !ok {
			continue
		}
		if !reflect.DeepEqual(l.job.ToSpec(), c.ToSpec()) {
			tb.Errorf("%s: %s is %+v, cold read %+v", what, name, l.job.ToSpec(), c.ToSpec())
		}
	}
}

// namespace is the namespace of the cold read's records ("" if none).
func (c coldRead) namespace() string {
	for _, r := range c.snap.Jobs {
		return r.Namespace
	}
	return ""
}

func dumpJobs(m map[string]*specs.Record) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(m)) {
		r := m[n]
		fmt.Fprintf(&b, "%s=v%d(%s, from %s) ", n, r.Version, r.Spec.Schedule, r.EffectiveFrom.Format(time.RFC3339))
	}
	return b.String()
}

// A standby that followed the schedules topic, then took over and read
// the tail committed since its last fetch, holds exactly what a cold read
// of the whole topic gives: the same records (EffectiveFrom included),
// tombstones, malformed records skipped (the job keeping its last good
// version), specs that do not validate left out, aborted transactions
// ignored. So does a view that read nothing before the takeover, and a
// view given back after a tenure (with the leader's own changes in it)
// that follows on and takes over again.
func TestStandbyViewMatchesColdRead(t *testing.T) {
	brokers := testenv.Brokers(t)
	var bad atomic.Int64
	logs := testenv.NewLogBuffer(t)
	p, err := New(Config{Brokers: brokers, Elector: noElector{}, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		OnMalformed: func(string) { bad.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	w := newSpecWriter(t, brokers, p.cfg.SchedulesTopic)
	ns := p.cfg.Namespace
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

	// Before the standby starts: creates, a stray garbage record (a keeps
	// v1), a spec that does not validate (b is left out), a delete, a
	// record of another namespace, an aborted transaction.
	w.txnOf(true, w.rec(ns, "a", 1, "1m", "", t0), w.rec(ns, "b", 1, "1m", "", t0), w.rec(ns, "c", 1, "1m", "", t0))
	w.stray(w.garbage("a"))
	w.txnOf(true, w.rec(ns, "b", 2, "1m", "Europe/Berln", t0.Add(time.Minute)), w.tombstone("c", 2))
	w.stray(w.rec("other", "a", 9, "5m", "", t0))
	w.txnOf(false, w.rec(ns, "d", 1, "1m", "", t0))

	ctx, cancel := context.WithCancel(context.Background())
	following := make(chan struct{})
	go func() { defer close(following); p.follower.run(ctx) }()
	defer func() { cancel(); <-following }()
	testenv.Eventually(t, 20*time.Second, func() bool {
		return strings.Contains(logs.String(), "following the schedules topic: read up to its end")
	}, "the standby did not read the topic to its end")

	// While it follows: changes read as they commit. The stray garbage
	// record after them tells when the follower has read them all.
	before := bad.Load()
	w.txnOf(true, w.rec(ns, "a", 2, "2m", "", t0.Add(2*time.Minute)), w.rec(ns, "e", 1, "1m", "", t0.Add(2*time.Minute)))
	w.stray(w.garbage("e"))
	testenv.Eventually(t, 20*time.Second, func() bool { return bad.Load() > before }, "the standby did not follow the changes")

	// Takeover: the follower stops, then changes commit before the new
	// leader's read (a change committed between the standby's last fetch
	// and its takeover), with an aborted transaction among them.
	v, err := p.follower.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.txnOf(true, w.rec(ns, "c", 3, "3m", "", t0.Add(3*time.Minute)), w.tombstone("a", 3), w.rec(ns, "e", 2, "4m", "", t0.Add(3*time.Minute)))
	w.txnOf(false, w.rec(ns, "f", 1, "1m", "", t0))
	tail, err := p.catchUp(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	cold, coldBad := coldView(t, p)
	sameView(t, "takeover after following", v, cold)
	if tail != 3 {
		t.Errorf("the takeover read %d records, want the 3 committed since the standby's last fetch", tail)
	}
	if got := bad.Load(); got != int64(coldBad) {
		t.Errorf("reported %d malformed or invalid records, a cold read finds %d", got, coldBad)
	}
	if recs := viewRecords(t, v, ns); len(recs) != 3 || v.live["b"] != nil || v.snap.Jobs["b"] == nil || v.snap.Deleted["a"] != 3 || v.live["e"].version != 2 {
		t.Errorf("view %s, deleted %v: want b (v2, invalid: not live), c v3, e v2, a deleted at v3", dumpJobs(recs), v.snap.Deleted)
	}

	// A replica that read nothing before it leads reads the whole topic.
	fresh := newSpecView()
	if n, err := p.catchUp(ctx, fresh); err != nil || n < 10 {
		t.Fatalf("cold takeover read %d records, %v", n, err)
	}
	sameView(t, "takeover without following", fresh, cold)

	// The leader commits a change and applies it to its view, as term's
	// apply does; it gives the view back, the follower reads on (the
	// leader's own record again, then a later leader's change), and the
	// next takeover again equals a cold read.
	g := w.rec(ns, "g", 1, "1m", "", t0.Add(5*time.Minute))
	w.txnOf(true, g)
	e, err := specs.ParseSpecRecord(g, ns)
	if err != nil {
		t.Fatal(err)
	}
	gj, err := e.Record.Spec.Job("g")
	if err != nil {
		t.Fatal(err)
	}
	v.live["g"] = newLiveJob(e.Record, gj, &origins{})
	p.follower.release()
	before = bad.Load()
	w.txnOf(true, w.rec(ns, "h", 1, "1m", "", t0.Add(6*time.Minute)), w.tombstone("e", 3))
	w.stray(w.garbage("h"))
	testenv.Eventually(t, 20*time.Second, func() bool { return bad.Load() > before }, "the follower did not resume")
	v, err = p.follower.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.follower.release()
	if _, err := p.catchUp(ctx, v); err != nil {
		t.Fatal(err)
	}
	cold, _ = coldView(t, p)
	sameView(t, "second takeover", v, cold)
}
