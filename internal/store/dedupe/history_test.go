package dedupe

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// histStore starts a redis-server for the test and returns a Store on it
// with the given retention (0: the default), and the client.
func histStore(tb testing.TB, r *testenv.Redis, retention time.Duration) (*Store, *redis.Client) {
	tb.Helper()
	rdb := r.Client()
	s, err := New(rdb, Config{Namespace: "hist", Retention: retention})
	if err != nil {
		tb.Fatal(err)
	}
	return s, rdb
}

var histT0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// histRun is a done run of job's window starting at start that took d.
func histRun(job string, start time.Time, token int64, d time.Duration) Run {
	st := start.Add(3 * time.Millisecond)
	return Run{WindowID: job + "@" + start.Format(time.RFC3339Nano), Job: job, Trigger: "schedule", Outcome: RunDone,
		WindowStart: start, Started: st, Finished: st.Add(d), Attempt: 1, Token: token, Worker: "worker-1"}
}

func TestHistoryAppendAndRuns(t *testing.T) {
	s, _ := histStore(t, testenv.NewRedis(t), 0)
	ctx := context.Background()
	long := strings.Repeat("é", MaxRunErrorBytes) // 2 bytes per rune: cut at a rune boundary
	runs := []Run{
		histRun("report", histT0, 1, 1500*time.Millisecond),
		{WindowID: "report@" + histT0.Add(time.Minute).Format(time.RFC3339) + "#backfill", Trigger: "backfill", Outcome: RunFailed,
			WindowStart: histT0.Add(time.Minute), Started: histT0.Add(2 * time.Minute), Finished: histT0.Add(2*time.Minute + 7*time.Microsecond),
			Attempt: 2, Token: 2, Worker: "worker-2", Error: long},
		{WindowID: "report@2026-11-22T10:02:00.123456789Z#manual-0a1b", Job: "report", Trigger: "manual", Outcome: RunDeadLettered,
			WindowStart: time.Date(2026, 11, 22, 10, 2, 0, 123456789, time.UTC), Finished: histT0.Add(3 * time.Minute), Worker: "worker-1", Error: "poison: bad payload"},
		{WindowID: "sync@" + histT0.Format(time.RFC3339), Trigger: "odd-trigger", Outcome: RunSkipped, WindowStart: histT0, Finished: histT0.Add(time.Second)},
	}
	for i, o := range []string{RunSuperseded, RunFenced, RunAbandoned, RunSteppedDown} {
		r := histRun("sync", histT0.Add(time.Duration(i+1)*10*time.Second), int64(i+1), time.Second)
		r.Outcome = o
		runs = append(runs, r)
	}
	// In two appends: one batch of both jobs, then one of a single run.
	if err := s.AppendRuns(ctx, runs[:2]); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendRuns(ctx, runs[2:]); err != nil {
		t.Fatal(err)
	}

	got, err := s.Runs(ctx, "report", RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("report has %d runs, want 3: %+v", len(got), got)
	}
	// Newest first, by when they finished.
	want := []Run{runs[2], runs[1], runs[0]}
	for i := range want {
		w := want[i]
		w.Job = "report"
		if w.Started.IsZero() {
			w.Started = w.Finished
		}
		w.Error = truncate(w.Error, MaxRunErrorBytes)
		if !runsEqual(got[i], w) {
			t.Errorf("run %d:\n got %+v\nwant %+v", i, got[i], w)
		}
	}
	if n := len(got[1].Error); n > MaxRunErrorBytes || n < MaxRunErrorBytes-1 || !strings.HasPrefix(long, got[1].Error) {
		t.Errorf("error text of %d bytes stored as %d bytes, want it cut to at most %d at a rune boundary", len(long), n, MaxRunErrorBytes)
	}
	if d := got[2].Duration(); d != 1500*time.Millisecond {
		t.Errorf("duration %v, want 1.5s", d)
	}

	// Limit, Since and Outcomes.
	if got, err := s.Runs(ctx, "report", RunQuery{Limit: 1}); err != nil || len(got) != 1 || got[0].Outcome != RunDeadLettered {
		t.Errorf("Limit 1: %+v, %v", got, err)
	}
	if got, err := s.Runs(ctx, "report", RunQuery{Since: histT0.Add(2 * time.Minute)}); err != nil || len(got) != 2 {
		t.Errorf("Since 10:02: %d runs, %v; want 2", len(got), err)
	}
	if got, err := s.Runs(ctx, "report", RunQuery{Outcomes: []string{RunDone, RunFailed}}); err != nil || len(got) != 2 || got[0].Outcome != RunFailed || got[1].Outcome != RunDone {
		t.Errorf("Outcomes done, failed: %+v, %v", got, err)
	}
	got, err = s.Runs(ctx, "sync", RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, r := range got {
		outcomes = append(outcomes, r.Outcome)
	}
	if fmt.Sprint(outcomes) != "[stepped-down abandoned fenced superseded skipped]" || got[4].Trigger != "odd-trigger" || got[4].Attempt != 0 {
		t.Errorf("sync runs: outcomes %v, oldest %+v", outcomes, got[4])
	}
	if got, err := s.Runs(ctx, "nothing-ran", RunQuery{}); err != nil || len(got) != 0 {
		t.Errorf("unknown job: %+v, %v", got, err)
	}
}

func runsEqual(a, b Run) bool {
	return a.WindowID == b.WindowID && a.Job == b.Job && a.Trigger == b.Trigger && a.Outcome == b.Outcome &&
		a.WindowStart.Equal(b.WindowStart) && a.Started.Equal(b.Started) && a.Finished.Equal(b.Finished) &&
		a.Attempt == b.Attempt && a.Token == b.Token && a.Worker == b.Worker && a.Error == b.Error &&
		a.ScheduleVersion == b.ScheduleVersion
}

// TestHistoryScheduleVersion: each run keeps the schedule version of its
// window, in a batch whose runs change version (a spec edited during a
// backlog) and in one append per run, and 0 stays 0.
func TestHistoryScheduleVersion(t *testing.T) {
	s, _ := histStore(t, testenv.NewRedis(t), 0)
	ctx := context.Background()
	versions := []int64{0, 3, 3, 4, 0, 1 << 40, 4}
	var runs []Run
	for i, v := range versions {
		r := histRun("edited", histT0.Add(time.Duration(i)*time.Minute), int64(i+1), time.Second)
		r.ScheduleVersion = v
		runs = append(runs, r)
	}
	if err := s.AppendRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if err := s.AppendRuns(ctx, []Run{{WindowID: "single" + strings.TrimPrefix(r.WindowID, "edited"), Outcome: RunDone,
			WindowStart: r.WindowStart, Finished: r.Finished, ScheduleVersion: r.ScheduleVersion}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, job := range []string{"edited", "single"} {
		got, err := s.Runs(ctx, job, RunQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(versions) {
			t.Fatalf("%s: %d runs, want %d", job, len(got), len(versions))
		}
		for i, r := range got { // newest first
			if want := versions[len(versions)-1-i]; r.ScheduleVersion != want {
				t.Errorf("%s: run %s has schedule version %d, want %d", job, r.WindowID, r.ScheduleVersion, want)
			}
		}
	}
	bad := runs[0]
	bad.ScheduleVersion = -1
	if err := s.AppendRuns(ctx, []Run{bad}); !errors.Is(err, ErrInvalidRun) || !strings.Contains(err.Error(), "ScheduleVersion -1") {
		t.Errorf("AppendRuns with ScheduleVersion -1 = %v, want ErrInvalidRun naming it", err)
	}
}

// legacyMember is a member as kjob wrote it before runs carried their
// schedule version (encodeRuns of commit 057d48a): two runs of "report",
// the second failed on another worker.
const legacyMember = "\x01\x02\bworker-1\x01\x01\xc0\xf4\x95\xb0\r\x00\x01\xf0.\xe0\xc6[\x01)\x00\x02\x01x\x00\x03\bworker-2\xf0.\xc0\x84=\x01*\x04boom"

// legacyRuns are the runs legacyMember was encoded from.
func legacyRuns() []Run {
	runs := []Run{histRun("report", histT0, 41, 1500*time.Millisecond), histRun("report", histT0.Add(time.Minute), 42, time.Second)}
	runs[1].Outcome, runs[1].Error, runs[1].Worker = RunFailed, "boom", "worker-2"
	return runs
}

// TestHistoryLegacyMember: a member written before schedule versions
// decodes with version 0, and runs without a version still encode to
// exactly that member, so a reader from before keeps reading them.
func TestHistoryLegacyMember(t *testing.T) {
	want := legacyRuns()
	got, err := decodeRuns("report", legacyMember)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("decoded %d runs, want %d", len(got), len(want))
	}
	for i := range want {
		if !runsEqual(got[i], want[i]) || got[i].ScheduleVersion != 0 {
			t.Errorf("run %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if enc := string(encodeRuns(nil, "report", want, []int{0, 1})); enc != legacyMember {
		t.Errorf("runs without a schedule version encode to\n%q\nwant the legacy member\n%q", enc, legacyMember)
	}
	// Through Redis too: a history holding a legacy member and a new one.
	s, rdb := histStore(t, testenv.NewRedis(t), 0)
	ctx := context.Background()
	rdb.ZAdd(ctx, s.historyKey("report"), redis.Z{Score: float64(want[1].Finished.UnixMilli()), Member: legacyMember})
	next := histRun("report", histT0.Add(time.Hour), 43, time.Second)
	next.ScheduleVersion = 2
	if err := s.AppendRuns(ctx, []Run{next}); err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs(ctx, "report", RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].ScheduleVersion != 2 || runs[1].ScheduleVersion != 0 || runs[2].ScheduleVersion != 0 {
		t.Fatalf("runs %+v; want versions 2, 0, 0", runs)
	}
}

// TestHistoryBounded: a job's history keeps at most HistoryBatches
// appends (give or take trimEvery for a busy job) and nothing that ended
// more than HistoryAge before the newest run, and its key expires
// HistoryAge after the last append.
func TestHistoryBounded(t *testing.T) {
	s, rdb := histStore(t, testenv.NewRedis(t), time.Hour)
	ctx := context.Background()
	if s.HistoryAge() != time.Hour {
		t.Fatalf("HistoryAge %v, want the retention 1h", s.HistoryAge())
	}
	// A job settled one window at a time: exactly its last HistoryBatches
	// runs are kept.
	n := HistoryBatches + 150
	for i := range n {
		if err := s.AppendRuns(ctx, []Run{histRun("tick", histT0.Add(time.Duration(i)*time.Second), int64(i+1), time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	key := s.historyKey("tick")
	if got := rdb.ZCard(ctx, key).Val(); got != HistoryBatches {
		t.Fatalf("%s holds %d members, want %d", key, got, HistoryBatches)
	}
	got, err := s.Runs(ctx, "tick", RunQuery{Limit: MaxRunsLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != HistoryBatches || got[0].Token != int64(n) || got[len(got)-1].Token != int64(n-HistoryBatches+1) {
		t.Fatalf("kept %d runs, tokens %d..%d; want the newest %d (tokens %d..%d)", len(got), got[0].Token, got[len(got)-1].Token, HistoryBatches, n, n-HistoryBatches+1)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("%s expires in %v, want the history age 1h", key, ttl)
	}

	// A job in a backlog, settled 100 windows at a time: its runs are
	// packed runsPerMember to a member, trimmed about every trimEvery
	// tokens, and the newest ones come back in order.
	tok := int64(0)
	for b := range 400 {
		var runs []Run
		for range 100 {
			tok++
			runs = append(runs, histRun("busy", histT0.Add(time.Duration(tok)*time.Millisecond), tok, time.Microsecond))
		}
		if err := s.AppendRuns(ctx, runs); err != nil {
			t.Fatal(err)
		}
		if m := rdb.ZCard(ctx, s.historyKey("busy")).Val(); m > HistoryBatches+trimEvery {
			t.Fatalf("after %d appends of 100 runs the history holds %d members, more than %d + %d", b+1, m, HistoryBatches, trimEvery)
		}
	}
	got, err = s.Runs(ctx, "busy", RunQuery{Limit: MaxRunsLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < HistoryBatches || len(got) > runsPerMember*(HistoryBatches+trimEvery) {
		t.Fatalf("the busy job kept %d runs, want %d to %d", len(got), HistoryBatches, runsPerMember*(HistoryBatches+trimEvery))
	}
	for i, r := range got {
		if r.Token != tok-int64(i) {
			t.Fatalf("run %d has token %d, want %d: not the newest runs, newest first", i, r.Token, tok-int64(i))
		}
	}

	// Age: a run 2 hours after the last drops every run older than an hour
	// before it.
	late := histRun("tick", histT0.Add(3*time.Hour), 9999, time.Millisecond)
	if err := s.AppendRuns(ctx, []Run{late}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Runs(ctx, "tick", RunQuery{Limit: MaxRunsLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Token != 9999 {
		t.Fatalf("after a run 2h later the history holds %d runs (newest token %d), want only that run", len(got), got[0].Token)
	}
}

// TestHistorySurvivesRestarts: the history lives in Redis, so a new
// worker process (a new Store) reads what an earlier one wrote, and with
// persistence it survives a Redis restart too.
func TestHistorySurvivesRestarts(t *testing.T) {
	r := testenv.NewDurableRedis(t)
	s1, _ := histStore(t, r, 0)
	ctx := context.Background()
	if err := s1.AppendRuns(ctx, []Run{histRun("report", histT0, 1, time.Second), histRun("report", histT0.Add(time.Hour), 2, time.Second)}); err != nil {
		t.Fatal(err)
	}
	r.Restart()
	s2, _ := histStore(t, r, 0)
	var got []Run
	testenv.Eventually(t, 10*time.Second, func() bool {
		var err error
		got, err = s2.Runs(ctx, "report", RunQuery{})
		return err == nil
	}, "Redis did not answer after its restart")
	if len(got) != 2 || got[0].Token != 2 || got[1].Token != 1 {
		t.Fatalf("after a Redis restart and a new Store: %+v, want both runs", got)
	}
}

func TestHistoryKeySharesTheJobsSlot(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	s, err := New(rdb, Config{Namespace: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	w, tag, err := s.key("report@2026-11-22T10:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	h := s.historyKey("report")
	if h != "kjob:{prod:report}:runs" || !strings.HasPrefix(h, w[:tag]) {
		t.Fatalf("history key %q does not share the hash tag of window key %q", h, w)
	}
}

func TestHistoryRefusesInvalidRuns(t *testing.T) {
	s, _ := histStore(t, testenv.NewRedis(t), 0)
	ctx := context.Background()
	ok := histRun("report", histT0, 1, time.Second)
	for _, tc := range []struct {
		edit func(*Run)
		want string
	}{
		{func(r *Run) { r.WindowID = "no-at-sign" }, `WindowID "no-at-sign" is not "<job>@<window>"`},
		{func(r *Run) { r.Job = "other" }, `Job "other" but WindowID "report@2026-11-22T10:00:00Z" is a window of "report"`},
		{func(r *Run) { r.Outcome = "skipped-done" }, `Outcome "skipped-done" of report@2026-11-22T10:00:00Z; want one of done, failed`},
		{func(r *Run) { r.Finished = time.Time{} }, "Finished of report@2026-11-22T10:00:00Z is zero"},
		{func(r *Run) { r.Token = -1 }, "Attempt 1, Token -1, ScheduleVersion 0"},
	} {
		r := ok
		tc.edit(&r)
		err := s.AppendRuns(ctx, []Run{ok, r})
		if !errors.Is(err, ErrInvalidRun) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "run 1") {
			t.Errorf("AppendRuns(%+v) = %v, want ErrInvalidRun naming run 1 and %q", r, err, tc.want)
		}
	}
	// Nothing of a refused batch was stored.
	if got, err := s.Runs(ctx, "report", RunQuery{}); err != nil || len(got) != 0 {
		t.Errorf("after refused batches: %+v, %v; want nothing stored", got, err)
	}
	for _, q := range []RunQuery{{Limit: -1}, {Limit: MaxRunsLimit + 1}, {Outcomes: []string{"ok"}}} {
		if _, err := s.Runs(ctx, "report", q); err == nil {
			t.Errorf("Runs(%+v) accepted", q)
		}
	}
	if _, err := s.Runs(ctx, "re{port", RunQuery{}); err == nil {
		t.Error(`Runs of job "re{port" accepted`)
	}
}

func TestHistoryRunsRejectsForeignMembers(t *testing.T) {
	s, rdb := histStore(t, testenv.NewRedis(t), 0)
	ctx := context.Background()
	rdb.ZAdd(ctx, s.historyKey("report"), redis.Z{Score: 1, Member: "not a run"})
	if _, err := s.Runs(ctx, "report", RunQuery{}); err == nil || !strings.Contains(err.Error(), "not a batch of runs in a known encoding") {
		t.Fatalf("Runs over a foreign member: %v", err)
	}
}

// FuzzHistoryDecode: decoding never panics, and whatever decodes encodes
// and decodes to the same runs.
func FuzzHistoryDecode(f *testing.F) {
	runs := []Run{histRun("j", histT0, 7, time.Second), {WindowID: "j@x#manual", Outcome: RunSkipped, Trigger: "zz", Finished: histT0, Error: "boom", Worker: "w2"}}
	f.Add(string(encodeRuns(nil, "j", runs, []int{0, 1})))
	f.Add(string(encodeRuns(nil, "j", runs, []int{1})))
	versioned := slices.Clone(runs)
	versioned[0].ScheduleVersion, versioned[1].ScheduleVersion = 3, 1<<62
	f.Add(string(encodeRuns(nil, "j", versioned, []int{0, 1, 0})))
	f.Add(legacyMember)
	f.Add("")
	f.Fuzz(func(t *testing.T, m string) {
		rs, err := decodeRuns("j", m)
		if err != nil {
			return
		}
		idx := make([]int, len(rs))
		for i := range idx {
			idx[i] = i
		}
		rs2, err := decodeRuns("j", string(encodeRuns(nil, "j", rs, idx)))
		if err != nil || len(rs2) != len(rs) {
			t.Fatalf("%+v re-encoded: %+v, %v", rs, rs2, err)
		}
		for i := range rs {
			if !runsEqual(rs[i], rs2[i]) {
				t.Fatalf("run %d: %+v re-encoded decodes to %+v", i, rs[i], rs2[i])
			}
		}
	})
}

// BenchmarkHistoryAppendRuns measures what recording runs costs: batches
// as a worker settles them (1,000 runs of 100 jobs and 500 runs of 25
// jobs: a partition's share of the burst workload; 100 runs of one job, a
// backfill; one run, a scheduled window), on histories already at their
// HistoryBatches bound, so trims remove as much as appends add. It reports
// the Redis server's CPU per run and the bytes a run takes in Redis.
//
// The claim and completion of the same windows cost what
// BenchmarkClaimCompleteBatch reports; the worker sends the history in the
// same pipeline as its completions, so the round trip is shared and the
// added cost is the server's CPU and the worker's encoding
// (BenchmarkHistoryEncode).
func BenchmarkHistoryAppendRuns(b *testing.B) {
	for _, tc := range []struct{ batch, jobs int }{{1000, 100}, {500, 25}, {100, 1}, {1, 1}} {
		b.Run(fmt.Sprintf("runs=%d/jobs=%d", tc.batch, tc.jobs), func(b *testing.B) {
			s, rdb := histStore(b, testenv.NewRedis(b), 0)
			ctx := context.Background()
			runs := make([]Run, tc.batch)
			tokens := make([]int64, tc.jobs)
			n := 0
			next := func() {
				for j := range runs {
					at := histT0.Add(time.Duration(n) * time.Millisecond)
					tokens[j%tc.jobs]++
					runs[j] = histRun("bench"+strconv.Itoa(j%tc.jobs), at, tokens[j%tc.jobs], 50*time.Microsecond)
					n++
				}
			}
			// Fill every job's history to its bound first.
			for rdb.ZCard(ctx, s.historyKey("bench0")).Val() < HistoryBatches {
				next()
				if err := s.AppendRuns(ctx, runs); err != nil {
					b.Fatal(err)
				}
			}
			done := 0
			cpu := testenv.ServerCPU(b, rdb)
			for b.Loop() {
				next()
				if err := s.AppendRuns(ctx, runs); err != nil {
					b.Fatal(err)
				}
				done += tc.batch
			}
			b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "runs/s")
			b.ReportMetric((testenv.ServerCPU(b, rdb)-cpu)/float64(done), "redis-µs/run")
			b.StopTimer()
			key := s.historyKey("bench0")
			mem, err := rdb.MemoryUsage(ctx, key, 0).Result()
			if err == nil {
				rs, _ := s.Runs(ctx, "bench0", RunQuery{Limit: MaxRunsLimit})
				b.ReportMetric(float64(mem)/float64(len(rs)), "bytes/run")
			}
		})
	}
}

// BenchmarkHistoryEncode measures the worker's side of recording a batch
// of 10 runs of one job: the encoding, per run.
func BenchmarkHistoryEncode(b *testing.B) {
	runs := make([]Run, 10)
	idx := make([]int, len(runs))
	for i := range runs {
		runs[i] = histRun("report", histT0.Add(time.Duration(i)*time.Minute), int64(12345+i), 40*time.Millisecond)
		idx[i] = i
	}
	var buf []byte
	for b.Loop() {
		buf = encodeRuns(buf[:0], "report", runs, idx)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(runs)), "ns/run")
	b.ReportMetric(float64(len(buf))/float64(len(runs)), "bytes/run")
}

// A worker records each window it settles; an operator's tool reads a
// job's last failures. It needs a Redis server, so it is compiled but not
// run.
func ExampleStore_AppendRuns() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := New(rdb, Config{Namespace: "prod"})
	if err != nil {
		log.Fatal(err)
	}
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	err = store.AppendRuns(ctx, []Run{{
		WindowID: "report@2026-11-22T10:00:00Z", Trigger: "schedule", Outcome: RunFailed,
		WindowStart: start, Started: start.Add(20 * time.Millisecond), Finished: start.Add(2 * time.Second),
		Attempt: 1, Token: 41, Worker: "worker-1", Error: "http: 503 Service Unavailable",
	}})
	if err != nil {
		log.Fatal(err)
	}
	runs, err := store.Runs(ctx, "report", RunQuery{Limit: 10, Outcomes: []string{RunFailed, RunDeadLettered}})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range runs {
		fmt.Println(r.WindowID, r.Outcome, r.Duration(), r.Error)
	}
}

func TestHistoryRFC3339(t *testing.T) {
	for _, tm := range []time.Time{histT0, time.Date(999, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 3, 29, 1, 0, 0, 120, time.UTC), time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)} {
		if got, want := string(appendRFC3339(nil, tm)), tm.Format(time.RFC3339Nano); got != want {
			t.Errorf("appendRFC3339(%v) = %q, want %q", tm, got, want)
		}
	}
}

func TestHistorySummarizeRuns(t *testing.T) {
	var runs []Run
	for i := range 20 { // done in 1s..20s
		runs = append(runs, histRun("j", histT0, int64(i+1), time.Duration(i+1)*time.Second))
	}
	for _, o := range []string{RunFailed, RunFailed, RunDeadLettered, RunAbandoned, RunFenced, RunSteppedDown, RunSkipped, RunSuperseded} {
		r := histRun("j", histT0, 99, time.Hour)
		r.Outcome = o
		runs = append(runs, r)
	}
	st := SummarizeRuns(runs)
	if st.Runs != 28 || st.Attempts != 24 || st.ByOutcome[RunDone] != 20 || st.ByOutcome[RunFailed] != 2 ||
		st.SuccessRate != 20.0/24 || st.P50 != 10*time.Second || st.P95 != 19*time.Second {
		t.Fatalf("SummarizeRuns = %+v", st)
	}
	if st := SummarizeRuns(nil); st.Runs != 0 || st.SuccessRate != 0 || st.P50 != 0 {
		t.Fatalf("SummarizeRuns(nil) = %+v", st)
	}
}
