package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dlq"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name (or writes it with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("output differs from %s (go test -update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestGoldenStatus(t *testing.T) {
	s := &inspect.Snapshot{
		At:     t0,
		Leader: &inspect.Leader{Holder: "producer-1", Epoch: 7, Since: t0.Add(-time.Hour)},
		Group: &inspect.Group{Name: "kjob-workers", State: "Stable", TotalLag: 2, Members: []inspect.Member{
			{ClientID: "worker-1", Host: "127.0.0.1:50001", Partitions: []int32{0, 1}},
			{ClientID: "worker-2", Host: "127.0.0.1:50002", Partitions: []int32{2}},
		}},
		Jobs: []inspect.JobStatus{
			{Name: "nightly-report", Schedule: "30 2 * * *", Timezone: "Europe/Berlin", Overlap: "queue", Enabled: true, InFile: true, Partition: 2,
				Next: []time.Time{t0.Add(15*time.Hour + 30*time.Minute), t0.Add(39*time.Hour + 30*time.Minute)},
				Last: &inspect.WindowStatus{ID: "nightly-report@2026-11-22T01:30:00Z", Outcome: "done", Token: 41, Attempts: 1}},
			{Name: "sync", Schedule: "@every 10s", Timezone: "UTC", Overlap: "queue", Enabled: true, Paused: true, InFile: true, Partition: 0, Next: []time.Time{t0.Add(10 * time.Second)},
				Last: &inspect.WindowStatus{ID: "sync@2026-11-22T09:59:50Z", Outcome: "failed", Token: 9, Attempts: 3}},
			// Settled without completing because of the overlap policy:
			// the reason follows the outcome.
			{Name: "digest", Schedule: "@every 1m", Timezone: "UTC", Overlap: "skip", Enabled: true, InFile: true, Partition: 1, Next: []time.Time{t0.Add(time.Minute)},
				Last: &inspect.WindowStatus{ID: "digest@2026-11-22T10:00:00Z", Outcome: "skipped", LastError: "overlap skip: digest@2026-11-22T09:59:00Z still running"}},
			{Name: "export", Schedule: "@every 5m", Timezone: "UTC", Overlap: "replace", Enabled: true, InFile: true, Partition: 0, Next: []time.Time{t0.Add(5 * time.Minute)},
				Last: &inspect.WindowStatus{ID: "export@2026-11-22T09:55:00Z", Outcome: "superseded", Token: 12, Attempts: 1,
					LastError: "overlap replace: cancelled for\nexport@2026-11-22T10:00:00Z"}},
			{Name: "old-job", Partition: 1, Last: &inspect.WindowStatus{ID: "old-job@2026-11-01T00:00:00Z", Outcome: "pending"}},
		},
		DeadLetters: 3,
	}
	var b bytes.Buffer
	info := statusInfo{group: "kjob-workers", lease: "redis key kjob:{kjob}:producer-lease"}
	renderStatus(&b, s, info)
	golden(t, "status.golden", b.Bytes())

	// Every part unknown: no zero is shown as a fact.
	down := &inspect.Snapshot{
		At:          t0,
		LeaderError: "lease: get kjob:{kjob}:producer-lease: dial tcp 127.0.0.1:6379: connect: connection refused",
		GroupError:  "unable to dial: dial tcp 127.0.0.1:9092: connect: connection refused",
		JobsError:   "state topic: unable to dial; partitions: unable to dial; pauses: dial tcp 127.0.0.1:6379: connect: connection refused",
		Jobs: []inspect.JobStatus{{Name: "sync", Schedule: "@every 10s", Timezone: "UTC", Overlap: "latest", Enabled: true, InFile: true,
			PartitionUnknown: true, PausedUnknown: true, LastUnknown: true, Next: []time.Time{t0.Add(10 * time.Second)}}},
		DeadLettersError: "unable to dial: dial tcp 127.0.0.1:9092: connect: connection refused",
	}
	b.Reset()
	renderStatus(&b, down, info)
	golden(t, "status-down.golden", b.Bytes())

	// A group without members and a Kubernetes lease that expired.
	empty := &inspect.Snapshot{
		At: t0,
		Leader: &inspect.Leader{Holder: "producer-0", Epoch: 3, Since: t0.Add(-time.Hour), Source: "kubernetes Lease kjob/kjob-producer-kjob",
			RenewedAt: t0.Add(-time.Minute), Expired: true},
		Group: &inspect.Group{Name: "kjob-workers", State: "Empty", TotalLag: 4},
	}
	b.Reset()
	renderStatus(&b, empty, info)
	golden(t, "status-empty.golden", b.Bytes())
}

func TestGoldenLag(t *testing.T) {
	g := &inspect.Group{Name: "kjob-workers", State: "Stable", TotalLag: 5, Partitions: []inspect.PartitionLag{
		{Partition: 0, Committed: 120, End: 120, Owner: "worker-1"},
		{Partition: 1, Committed: 95, End: 100, Lag: 5, Owner: "worker-1"},
		{Partition: 2, Committed: -1, End: 0, Owner: ""},
	}}
	var b bytes.Buffer
	g.AddTimeLag(&inspect.TimeLagReport{Partitions: []inspect.PartitionTimeLag{
		{Partition: 0, Committed: 120, End: 120},
		{Partition: 1, Committed: 95, End: 100, Windows: 2, Age: 42 * time.Second,
			Oldest: &inspect.UnsettledWindow{ID: "sync@2026-11-22T09:59:18Z", Job: "sync", Status: "running"}},
		{Partition: 2, Committed: -1},
	}}, nil)
	renderLag(&b, g)
	golden(t, "lag.golden", b.Bytes())

	// A backlog larger than the read cap; and a time lag that could not
	// be read.
	b.Reset()
	g.Partitions[1].TimeLag = &inspect.PartitionTimeLag{Partition: 1, Windows: 5000, AtLeast: true, Age: 3*time.Hour + 2*time.Minute,
		Oldest: &inspect.UnsettledWindow{ID: "sync@2026-11-22T06:58:00Z", Job: "sync", Status: "pending"}}
	renderLag(&b, g)
	b.WriteString("--\n")
	g.AddTimeLag(nil, errors.New("window records: dial tcp 127.0.0.1:6379: connect: connection refused"))
	for i := range g.Partitions {
		g.Partitions[i].TimeLag = nil
	}
	renderLag(&b, g)
	golden(t, "lag-backlog.golden", b.Bytes())
}

func replayPlan() *operator.ReplayPlan {
	return &operator.ReplayPlan{
		Spec:  operator.ReplaySpec{Group: "kjob-workers", Mode: operator.ByDuration, Duration: time.Hour, Job: "sync", Rerun: true},
		Group: "kjob-workers", Topic: "kjob.windows", Online: true, State: "Stable",
		Partitions: []operator.ReplayPartition{{Partition: 0, Owner: "worker-1", Before: 420, Target: 60, Start: 0, End: 420, Replayed: 360, After: -1}},
		Rerun:      []string{"sync@2026-11-22T09:00:00Z", "sync@2026-11-22T09:00:10Z"},
		OtherJobs:  []string{"cleanup"},
	}
}

func TestGoldenReplay(t *testing.T) {
	var b bytes.Buffer
	p := replayPlan()
	renderReplay(&b, "table", p, false)
	golden(t, "replay-dry-run.golden", b.Bytes())

	b.Reset()
	p.Partitions[0].After, p.Partitions[0].AppliedBy = 75, "worker-1"
	renderReplay(&b, "table", p, true)
	golden(t, "replay-executed.golden", b.Bytes())

	b.Reset()
	p = &operator.ReplayPlan{Spec: operator.ReplaySpec{Mode: operator.ToOffset, Offset: 1000}, Group: "kjob-workers", Topic: "kjob.windows", State: "Empty",
		Partitions: []operator.ReplayPartition{
			{Partition: 0, Before: 10, Target: 12, End: 12, Clamped: "latest", After: 12, AppliedBy: "kadm"},
			{Partition: 1, Before: -1, Target: 7, End: 7, Clamped: "latest", After: 7, AppliedBy: "kadm"},
		}}
	renderReplay(&b, "table", p, true)
	golden(t, "replay-empty-group.golden", b.Bytes())

	// A plain replay: failed and dead-lettered windows run again; a long
	// list is cut at 20 rows.
	b.Reset()
	p = &operator.ReplayPlan{Spec: operator.ReplaySpec{Mode: operator.ShiftBy, Offset: -60}, Group: "kjob-workers", Topic: "kjob.windows", Online: true, State: "Stable",
		Partitions: []operator.ReplayPartition{{Partition: 0, Owner: "worker-1", Before: 100, Target: 40, Start: 0, End: 100, Replayed: 30, ReplayedOffsets: 60, After: -1}}}
	for i := range 22 {
		st := "dead"
		if i%2 == 1 {
			st = "failed"
		}
		p.Retry = append(p.Retry, operator.RetryWindow{ID: fmt.Sprintf("sync@2026-11-22T09:%02d:00Z", i), Status: st})
	}
	renderReplay(&b, "table", p, false)
	golden(t, "replay-retry.golden", b.Bytes())
}

func TestGoldenDLQ(t *testing.T) {
	rec := &kgo.Record{
		Topic: "kjob.windows.dlq", Offset: 3, Key: []byte("sync"),
		Value: []byte(`{"v":1,"id":"sync@2026-11-22T09:00:00Z","job":"sync","handler":"http","window":{"start":"2026-11-22T09:00:00Z","end":"2026-11-22T09:00:10Z"},"scheduled_at":"2026-11-22T09:00:00Z","published_at":"2026-11-22T09:00:00Z","trigger":"schedule","payload":{"url":"http://127.0.0.1:9/hook"},"policy":{"timeout":"1m0s","max_attempts":3,"backoff":"1s","max_backoff":"1m0s"}}`),
		Headers: []kgo.RecordHeader{
			{Key: "kjob-schema", Value: []byte("1")},
			{Key: dlq.HeaderReason, Value: []byte("http: POST http://127.0.0.1:9/hook: connection refused")},
			{Key: dlq.HeaderTopic, Value: []byte("kjob.windows")},
			{Key: dlq.HeaderPartition, Value: []byte("0")},
			{Key: dlq.HeaderOffset, Value: []byte("57")},
			{Key: dlq.HeaderAttempts, Value: []byte("3")},
			{Key: dlq.HeaderWorker, Value: []byte("worker-2")},
			{Key: dlq.HeaderTime, Value: []byte("2026-11-22T09:00:04.5Z")},
		},
	}
	bad := &kgo.Record{Topic: "kjob.windows.dlq", Offset: 4, Key: []byte("x"), Value: []byte("not json"), Headers: []kgo.RecordHeader{
		{Key: dlq.HeaderReason, Value: []byte("undecodable record: jobmsg: value: not a JSON object")},
		{Key: dlq.HeaderTopic, Value: []byte("kjob.windows")}, {Key: dlq.HeaderPartition, Value: []byte("1")},
		{Key: dlq.HeaderOffset, Value: []byte("8")}, {Key: dlq.HeaderAttempts, Value: []byte("0")},
	}}
	again := *rec
	again.Offset = 5
	ls := []deadLetter{parseDeadLetter(rec), parseDeadLetter(bad), parseDeadLetter(&again)}
	ls[0].Redriven = &operator.Redrive{Letter: dlq.Origin{Topic: "kjob.windows.dlq", Offset: 3}, WindowID: ls[0].WindowID,
		At: t0, By: "kjobctl ops@host", Topic: "kjob.windows", Partition: 0, Offset: 80}
	ls[2].WindowState = &windowState{Status: "dead", Token: 12, Attempts: 3, Holder: "worker-1", UpdatedAt: t0.Add(time.Minute)}
	ls[0].WindowState = ls[2].WindowState
	var b bytes.Buffer
	renderDLQList(&b, ls)
	golden(t, "dlq-list.golden", b.Bytes())
	b.Reset()
	renderDLQShow(&b, ls[0])
	golden(t, "dlq-show.golden", b.Bytes())
	b.Reset()
	renderRedrivePlan(&b, planRedrive(ls, false), 0)
	golden(t, "dlq-redrive-plan.golden", b.Bytes())
}

func TestGoldenBackfill(t *testing.T) {
	var b bytes.Buffer
	renderBackfill(&b, "table", &backfillResult{Job: "report", From: "2026-01-01T00:00:00Z", To: "2026-01-01T03:00:00Z", Windows: 3, Executed: true,
		Published: []string{"report@2026-01-01T01:00:00Z#backfill", "report@2026-01-01T02:00:00Z#backfill"}, Skipped: []string{"report@2026-01-01T00:00:00Z#backfill"}})
	golden(t, "backfill.golden", b.Bytes())
}

func TestGoldenScheduleCheck(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dst.yaml")
	os.WriteFile(file, []byte(`jobs:
  - name: nightly
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    handler: log
  - name: late
    schedule: "30 1 * * *"
    timezone: America/New_York
    handler: log
    overlap: latest
  - name: tick
    schedule: "@every 10s"
    handler: log
    enabled: false
`), 0o644)
	for _, c := range []struct{ from, name string }{{"2026-03-28T00:00:00Z", "schedule-spring.golden"}, {"2026-10-31T12:00:00Z", "schedule-fall.golden"}} {
		code, out, stderr := runCmd(t, "schedule", "check", "--from", c.from, "--next", "3", file)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		golden(t, c.name, bytes.ReplaceAll([]byte(out), []byte(file), []byte("dst.yaml")))
	}
}
