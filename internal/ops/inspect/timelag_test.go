package inspect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// lagEnv is a windows topic on the embedded broker, a real redis-server
// and the idempotency store, at a fixed "now".
type lagEnv struct {
	t       *testing.T
	ctx     context.Context
	brokers []string
	rdb     *redis.Client
	store   *dedupe.Store
	cl      *kgo.Client
	adm     *kadm.Client
	now     time.Time
}

const lagTopic, lagGroup = "kjob.windows", "kjob-workers"

func newLagEnv(t *testing.T, partitions int32) *lagEnv {
	t.Helper()
	e := &lagEnv{t: t, brokers: testenv.Brokers(t), rdb: testenv.NewRedis(t).Client(), now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	e.ctx = ctx
	var err error
	e.store, err = dedupe.New(e.rdb, dedupe.Config{Namespace: "lag"})
	if err != nil {
		t.Fatal(err)
	}
	// Transactional, as the producer publishes: every transaction leaves a
	// commit marker, which takes an offset.
	e.cl, err = kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.TransactionalID("lag-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cl.Close)
	e.adm = kadm.NewClient(e.cl)
	if _, err := e.adm.CreateTopic(ctx, partitions, 1, nil, lagTopic); err != nil {
		t.Fatal(err)
	}
	return e
}

// window is a scheduled window of job starting at now+at.
func (e *lagEnv) window(job string, at time.Duration) *jobmsg.Message {
	start := e.now.Add(at)
	return &jobmsg.Message{ID: jobmsg.WindowID(job, start), Job: job, Handler: "noop", Window: jobmsg.Window{Start: start, End: start.Add(time.Second)},
		ScheduledAt: start, PublishedAt: start, Trigger: jobmsg.TriggerSchedule, Payload: json.RawMessage(`{}`),
		Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Minute), MaxAttempts: 1}}
}

// publish produces each message to partition p in a transaction of its
// own and returns their offsets.
func (e *lagEnv) publish(p int32, ms ...*jobmsg.Message) []int64 {
	e.t.Helper()
	var offs []int64
	for _, m := range ms {
		rec, err := jobmsg.Record(lagTopic, m)
		if err != nil {
			e.t.Fatal(err)
		}
		rec.Partition = p
		if err := e.cl.BeginTransaction(); err != nil {
			e.t.Fatal(err)
		}
		if err := e.cl.ProduceSync(e.ctx, rec).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
		if err := e.cl.EndTransaction(e.ctx, kgo.TryCommit); err != nil {
			e.t.Fatal(err)
		}
		offs = append(offs, rec.Offset)
	}
	return offs
}

// commit commits offset for partition p of the group, which has no
// members (kadm commits directly, as kjobctl replay does for an empty
// group).
func (e *lagEnv) commit(p int32, offset int64) {
	e.t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: lagTopic, Partition: p, At: offset, LeaderEpoch: -1})
	if err := e.adm.CommitAllOffsets(e.ctx, lagGroup, os); err != nil {
		e.t.Fatal(err)
	}
}

// set brings window id to status: running (claimed), done, failed or dead.
func (e *lagEnv) set(id, status string) {
	e.t.Helper()
	c, err := e.store.Claim(e.ctx, id, "worker-1")
	if err != nil || c.Outcome != dedupe.Claimed {
		e.t.Fatalf("claim %s: %+v %v", id, c, err)
	}
	switch status {
	case "running":
	case "done":
		err = e.store.Complete(e.ctx, id, c.Token)
	case "failed":
		err = e.store.Release(e.ctx, id, c.Token, "boom")
	case "dead":
		err = e.store.DeadLetter(e.ctx, id, c.Token, "poison")
	default:
		e.t.Fatalf("status %q", status)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *lagEnv) read(maxRecords int, states inspect.WindowStates) *inspect.TimeLagReport {
	e.t.Helper()
	if states == nil {
		states = e.store
	}
	tl, err := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: e.brokers, Topic: lagTopic, Group: lagGroup, States: states,
		MaxRecords: maxRecords, Now: func() time.Time { return e.now }})
	if err != nil {
		e.t.Fatal(err)
	}
	defer tl.Close()
	r, err := tl.Read(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func jobLag(r *inspect.TimeLagReport, job string) inspect.JobTimeLag {
	for _, j := range r.Jobs {
		if j.Job == job {
			return j
		}
	}
	return inspect.JobTimeLag{Job: job + " (not reported)"}
}

func oldestID(w *inspect.UnsettledWindow) string {
	if w == nil {
		return "none"
	}
	return w.ID + " (" + w.Status + ")"
}

// TestTimeLagSlowJobInFlight: a slow window is running (claimed, not
// settled) at the committed offset while newer windows of another job on
// the partition are already done, and one window is not due yet. The slow
// window counts: the partition is as late as it. The group has no members.
func TestTimeLagSlowJobInFlight(t *testing.T) {
	e := newLagEnv(t, 2)
	old := e.window("fast", -10*time.Minute)
	slow := e.window("slow", -30*time.Second)
	fast := e.window("fast", -20*time.Second)
	future := e.window("fast", time.Minute)
	offs := e.publish(0, old, slow, fast, future)
	e.set(old.ID, "done")
	e.set(slow.ID, "running")
	e.set(fast.ID, "done")
	e.commit(0, offs[1]) // the committed offset is the first unsettled window

	r := e.read(0, nil)
	p := r.Partitions[0]
	if oldestID(p.Oldest) != slow.ID+" (running)" || p.Age != 30*time.Second || p.Windows != 3 || p.NotDue != 1 || p.AtLeast {
		t.Fatalf("partition 0: oldest %s, age %v, %d windows (%d not due), at least %v; want the running slow window, 30s, 3 windows (1 not due)",
			oldestID(p.Oldest), p.Age, p.Windows, p.NotDue, p.AtLeast)
	}
	if q := r.Partitions[1]; q.Oldest != nil || q.Age != 0 || q.Committed != -1 {
		t.Fatalf("empty partition 1: %+v", q)
	}
	if r.Age != 30*time.Second || r.AgeSeconds != 30 || oldestID(r.Oldest) != slow.ID+" (running)" {
		t.Fatalf("report: age %v, oldest %s", r.Age, oldestID(r.Oldest))
	}
	if j := jobLag(r, "slow"); oldestID(j.Oldest) != slow.ID+" (running)" || j.Age != 30*time.Second {
		t.Fatalf("job slow: %+v", j)
	}
	// fast: nothing due is unsettled; its newest settled window is the one
	// above the committed offset (settled while the slow one runs).
	j := jobLag(r, "fast")
	if j.Oldest != nil || j.Age != 0 || j.NewestSettled == nil || j.NewestSettled.ID != fast.ID || j.NewestSettled.Status != "done" || j.NewestSettledAge != 20*time.Second {
		t.Fatalf("job fast: oldest %s, age %v, newest settled %+v (age %v); want none, 0, %s done 20s ago", oldestID(j.Oldest), j.Age, j.NewestSettled, j.NewestSettledAge, fast.ID)
	}

	// Once the slow window is done, the partition is not late at all.
	c, _ := e.store.State(e.ctx, slow.ID)
	if err := e.store.Complete(e.ctx, slow.ID, c.Token); err != nil {
		t.Fatal(err)
	}
	if r := e.read(0, nil); r.Partitions[0].Oldest != nil || r.Age != 0 {
		t.Fatalf("after the slow window is done: oldest %s, age %v", oldestID(r.Partitions[0].Oldest), r.Age)
	}
}

// TestTimeLagBacklog: 60 windows published, none claimed, no commit yet:
// the oldest is the first window; with a cap below the backlog the age is
// reported as a lower bound (AtLeast). A backfilled window counts from
// when it was published, not from its start a month back.
func TestTimeLagBacklog(t *testing.T) {
	e := newLagEnv(t, 1)
	var ms []*jobmsg.Message
	for i := range 60 {
		ms = append(ms, e.window("tick", time.Duration(i-60)*time.Second))
	}
	e.publish(0, ms...)

	r := e.read(0, nil)
	p := r.Partitions[0]
	if oldestID(p.Oldest) != ms[0].ID+" (pending)" || p.Age != time.Minute || p.Windows != 60 || p.AtLeast || p.Committed != -1 {
		t.Fatalf("backlog: oldest %s, age %v, %d windows, at least %v, committed %d", oldestID(p.Oldest), p.Age, p.Windows, p.AtLeast, p.Committed)
	}
	r = e.read(10, nil)
	if p := r.Partitions[0]; oldestID(p.Oldest) != ms[0].ID+" (pending)" || p.Age != time.Minute || p.Windows != 10 || !p.AtLeast || !r.AtLeast || !jobLag(r, "tick").AtLeast {
		t.Fatalf("capped at 10: oldest %s, age %v, %d windows, at least %v", oldestID(p.Oldest), p.Age, p.Windows, p.AtLeast)
	}

	// The backlog is worked off; then a backfill of last month's window.
	for _, m := range ms {
		e.set(m.ID, "done")
	}
	bf := e.window("tick", -30*24*time.Hour)
	bf.ID, bf.Trigger, bf.PublishedAt = jobmsg.BackfillID("tick", bf.Window.Start), jobmsg.TriggerBackfill, e.now.Add(-5*time.Second)
	offs := e.publish(0, bf)
	e.commit(0, offs[0])
	r = e.read(0, nil)
	if p := r.Partitions[0]; oldestID(p.Oldest) != bf.ID+" (pending)" || p.Age != 5*time.Second || !p.Oldest.Due.Equal(bf.PublishedAt) {
		t.Fatalf("backfill: oldest %s, age %v, want the backfilled window 5s late (since it was published)", oldestID(p.Oldest), p.Age)
	}
	// The windows below the committed offset are settled: the newest one
	// is the job's newest settled window.
	if j := jobLag(r, "tick"); j.NewestSettled == nil || j.NewestSettled.ID != ms[59].ID || j.NewestSettledAge != time.Second {
		t.Fatalf("newest settled: %+v", j.NewestSettled)
	}
}

// TestTimeLagReplay: the group's offset was rewound over windows that are
// done (a replay re-delivers them); they are old but settled, so they do
// not count. The one failed window among them does, and so would one that
// was skipped or superseded if it were not settled.
func TestTimeLagReplay(t *testing.T) {
	e := newLagEnv(t, 1)
	var ms []*jobmsg.Message
	for i := range 20 {
		ms = append(ms, e.window("tick", time.Duration(i-20)*time.Minute))
	}
	offs := e.publish(0, ms...)
	for i, m := range ms {
		switch i {
		case 7:
			e.set(m.ID, "failed")
		case 9:
			e.set(m.ID, "dead")
		default:
			e.set(m.ID, "done")
		}
	}
	e.commit(0, offs[0]) // replayed from the start
	r := e.read(0, nil)
	if p := r.Partitions[0]; oldestID(p.Oldest) != ms[7].ID+" (failed)" || p.Age != 13*time.Minute || p.Windows != 20 {
		t.Fatalf("replay: oldest %s, age %v, %d windows; want the failed window 13m late, not the done ones before it", oldestID(p.Oldest), p.Age, p.Windows)
	}
	// Skipped and superseded settle a window too (the overlap policies'
	// statuses).
	states := overrideStates{WindowStates: e.store, status: map[string]string{ms[7].ID: "superseded"}}
	if r := e.read(0, states); r.Partitions[0].Oldest != nil || r.Age != 0 {
		t.Fatalf("with the failed window superseded: oldest %s, age %v; want none", oldestID(r.Partitions[0].Oldest), r.Age)
	}
	states.status[ms[7].ID] = "skipped"
	if r := e.read(0, states); r.Partitions[0].Oldest != nil {
		t.Fatalf("with the failed window skipped: oldest %s; want none", oldestID(r.Partitions[0].Oldest))
	}
	if j := jobLag(r, "tick"); j.NewestSettled == nil || j.NewestSettled.ID != ms[19].ID || j.NewestSettledAge != time.Minute {
		t.Fatalf("newest settled during the replay: %+v", j.NewestSettled)
	}
}

// overrideStates reports chosen statuses for some windows.
type overrideStates struct {
	inspect.WindowStates
	status map[string]string
}

func (o overrideStates) States(ctx context.Context, ids []string) (map[string]dedupe.State, error) {
	m, err := o.WindowStates.States(ctx, ids)
	for id, s := range o.status {
		if st, ok := m[id]; ok {
			st.Status = s
			m[id] = st
		}
	}
	return m, err
}

// TestTimeLagWithoutMembers: the time lag is read from Kafka and Redis
// only: a group that has committed offsets but no member (every worker
// down), and a group that never existed (read from the log start), both
// report the windows that wait. It also shows the offset lag's
// transaction marker: one running window is 2 offsets but 1 window.
func TestTimeLagWithoutMembers(t *testing.T) {
	e := newLagEnv(t, 1)
	w := e.window("tick", -4*time.Second)
	offs := e.publish(0, w)
	e.set(w.ID, "running")
	tl, err := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: e.brokers, Topic: lagTopic, Group: "never-joined", States: e.store, Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	r, err := tl.Read(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Partitions[0]; oldestID(p.Oldest) != w.ID+" (running)" || p.Age != 4*time.Second || p.Committed != -1 {
		t.Fatalf("group that never existed: %+v", p)
	}

	e.commit(0, offs[0])
	lags, err := e.adm.Lag(e.ctx, lagGroup)
	if err != nil {
		t.Fatal(err)
	}
	gl := lags[lagGroup]
	if len(gl.Members) != 0 || gl.Lag[lagTopic][0].Lag != 2 {
		t.Fatalf("group %s: %d members, offset lag %d; want no members and 2 (the window and its commit marker)", lagGroup, len(gl.Members), gl.Lag[lagTopic][0].Lag)
	}
	r = e.read(0, nil)
	if p := r.Partitions[0]; p.Windows != 1 || oldestID(p.Oldest) != w.ID+" (running)" || p.Age != 4*time.Second || p.Committed != offs[0] {
		t.Fatalf("group without members: %d windows, oldest %s, age %v, committed %d; want 1 window, the running one, 4s, %d", p.Windows, oldestID(p.Oldest), p.Age, p.Committed, offs[0])
	}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"age_seconds":4`) {
		t.Fatalf("JSON %s, %v", b, err)
	}
}

func TestNewTimeLagRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  inspect.TimeLagConfig
		want string
	}{
		{inspect.TimeLagConfig{}, "TimeLagConfig.Brokers is empty"},
		{inspect.TimeLagConfig{Brokers: []string{"b"}}, "TimeLagConfig.States is nil"},
		{inspect.TimeLagConfig{Brokers: []string{"b"}, States: overrideStates{}, MaxRecords: -1}, "TimeLagConfig.MaxRecords = -1 is negative"},
		{inspect.TimeLagConfig{Brokers: []string{"b"}, States: overrideStates{}, LookBack: -2}, "TimeLagConfig.LookBack = -2"},
	} {
		if _, err := inspect.NewTimeLag(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewTimeLag(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// Export the age of the oldest unsettled window, or print it.
func ExampleTimeLag_Read() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "prod"})
	if err != nil {
		panic(err)
	}
	tl, err := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: []string{"127.0.0.1:9092"}, States: store})
	if err != nil {
		panic(err)
	}
	defer tl.Close()
	r, err := tl.Read(context.Background())
	if err != nil {
		panic(err)
	}
	for _, p := range r.Partitions {
		fmt.Printf("partition %d: %v late (%d windows not committed)\n", p.Partition, p.Age, p.Windows)
	}
}
