package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watch runs "kjobctl lag --watch" until cond holds for its output, then
// interrupts it (as Ctrl-C does) and returns the output and exit code.
func (e *opsEnv) watch(cond func(out string) bool, args ...string) (int, string) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append(append([]string{"lag", "--watch", "--interval", "50ms"}, args...), e.flags...), &out, io.Discard)
	}()
	testenv.Eventually(e.t, 30*time.Second, func() bool { return cond(out.String()) }, "lag --watch output:\n%s", &out)
	cancel()
	select {
	case code := <-done:
		return code, out.String()
	case <-time.After(30 * time.Second):
		e.t.Fatal("lag --watch did not stop within 30s of its context ending")
	}
	return 0, ""
}

func frames(out string) int { return strings.Count(out, "(every 50ms, Ctrl-C stops)") }

// lag --watch keeps refreshing through a failed refresh, which it shows in
// its frame; it writes no terminal control codes when stdout is not a
// terminal, and one JSON object per line with -o json.
func TestLagWatch(t *testing.T) {
	e, cluster := newOpsEnvCluster(t)
	var mu sync.Mutex
	failing := false
	e.startWorker(&failing, &mu)
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, out, _ := e.kjobctl("lag")
		return code == exitOK && strings.Count(out, "w1") == 2
	}, "worker w1 owns both partitions")

	// Not a terminal: frames are appended, separated by a blank line.
	code, out := e.watch(func(out string) bool { return frames(out) >= 3 })
	if code != exitOK || strings.Contains(out, "\x1b[") || !strings.Contains(out, "\n\n") || !strings.Contains(out, "PARTITION  COMMITTED  END  LAG  OWNER") {
		t.Fatalf("lag --watch on a pipe: exit %d\n%q", code, out)
	}

	// A DescribeGroups that fails once: the frame shows the error and the
	// watch goes on with the next refresh.
	var once sync.Once
	armed := make(chan struct{})
	cluster.ControlKey(int16(kmsg.DescribeGroups), func(req kmsg.Request) (kmsg.Response, error, bool) {
		handled := false
		var resp kmsg.Response
		once.Do(func() {
			r := req.(*kmsg.DescribeGroupsRequest)
			dr := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
			for _, g := range r.Groups {
				rg := kmsg.NewDescribeGroupsResponseGroup()
				rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
				dr.Groups = append(dr.Groups, rg)
			}
			resp, handled = dr, true
			close(armed)
		})
		if !handled {
			cluster.KeepControl()
		}
		return resp, nil, handled
	})
	code, out = e.watch(func(out string) bool {
		i := strings.Index(out, "error: ")
		return i >= 0 && frames(out[i:]) >= 2
	})
	<-armed
	if code != exitOK || !strings.Contains(out, "error: GROUP_AUTHORIZATION_FAILED") || !strings.Contains(out, "(still watching)") {
		t.Fatalf("lag --watch through a failed refresh: exit %d\n%s", code, out)
	}
	if i := strings.Index(out, "error: "); !strings.Contains(out[i:], "PARTITION  COMMITTED") {
		t.Fatalf("no table after the failed refresh:\n%s", out)
	}

	// On a terminal every frame, the first too, starts by clearing it.
	defer func(f func(io.Writer) bool) { isTerminal = f }(isTerminal)
	isTerminal = func(io.Writer) bool { return true }
	code, out = e.watch(func(out string) bool { return frames(out) >= 2 })
	if code != exitOK || !strings.HasPrefix(out, "\x1b[H\x1b[2J") || strings.Count(out, "\x1b[H\x1b[2J") != frames(out) {
		t.Fatalf("lag --watch on a terminal: exit %d\n%q", code, out)
	}
	isTerminal = func(io.Writer) bool { return false }

	// -o json: NDJSON, one frame per line.
	code, out = e.watch(func(out string) bool { return strings.Count(out, "\n") >= 2 }, "-o", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		var f lagFrame
		if err := json.Unmarshal([]byte(l), &f); err != nil || f.At.IsZero() || f.Group == nil || len(f.Group.Partitions) != 2 {
			t.Fatalf("lag --watch -o json line %q: %v", l, err)
		}
	}
	if code != exitOK || len(lines) < 2 {
		t.Fatalf("lag --watch -o json: exit %d, %d lines", code, len(lines))
	}
}

// TestLagTimeLag: lag shows how late the work is. One window a minute old
// waits on a partition of a group that has committed offsets but no
// member: its row shows the window, 1 window not committed (the offset lag
// says 2: the window and its transaction marker) and a time lag of about a
// minute; -o json has the same. With Redis down the time lag is unknown,
// the offsets are still shown, and lag exits 1.
func TestLagTimeLag(t *testing.T) {
	e := newOpsEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	m := &jobmsg.Message{ID: jobmsg.WindowID("report", start), Job: "report", Handler: "ok", Window: jobmsg.Window{Start: start, End: start.Add(time.Hour)},
		ScheduledAt: start, PublishedAt: start, Trigger: jobmsg.TriggerSchedule, Payload: json.RawMessage(`{}`),
		Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Minute), MaxAttempts: 1}}
	rec, err := jobmsg.Record("kjob.windows", m)
	if err != nil {
		t.Fatal(err)
	}
	p := inspectJobPartition("report", 2)
	rec.Partition = p
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.TransactionalID("lag-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "kjob.windows", Partition: p, At: rec.Offset, LeaderEpoch: -1})
	if err := e.adm.CommitAllOffsets(ctx, "kjob-workers", offs); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := e.kjobctl("lag")
	if code != exitOK {
		t.Fatalf("lag: exit %d\n%s%s", code, out, stderr)
	}
	var row []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == fmt.Sprint(p) {
			row = f
		}
	}
	// PARTITION COMMITTED END LAG OWNER TIME LAG WINDOWS OLDEST UNSETTLED
	if len(row) != 9 || row[3] != "2" || row[4] != "-" || row[6] != "1" || row[7] != m.ID || row[8] != "(pending)" {
		t.Fatalf("partition %d's row %q, want offset lag 2, no owner, 1 window, the pending window:\n%s", p, row, out)
	}
	if age, err := time.ParseDuration(row[5]); err != nil || age < time.Minute || age > 2*time.Minute {
		t.Fatalf("time lag %q, want about a minute:\n%s", row[5], out)
	}

	code, out, _ = e.kjobctl("lag", "-o", "json")
	var g inspect.Group
	if err := json.Unmarshal([]byte(out), &g); code != exitOK || err != nil {
		t.Fatalf("lag -o json: exit %d, %v\n%s", code, err, out)
	}
	for _, pl := range g.Partitions {
		if pl.Partition != p {
			continue
		}
		if tl := pl.TimeLag; tl == nil || tl.Windows != 1 || tl.Oldest == nil || tl.Oldest.ID != m.ID || tl.AgeSeconds < 60 {
			t.Fatalf("lag -o json: partition %d time_lag %+v", p, pl.TimeLag)
		}
	}
	if len(g.TimeLagJobs) != 1 || g.TimeLagJobs[0].Job != "report" || g.TimeLagJobs[0].AgeSeconds < 60 {
		t.Fatalf("lag -o json: time_lag_jobs %+v", g.TimeLagJobs)
	}

	e.redis.Kill()
	code, out, stderr = e.kjobctl("lag", "--timeout", "3s")
	if code != exitError || !strings.Contains(out, "PARTITION  COMMITTED") || !strings.Contains(out, "Time lag: unknown (") ||
		!strings.Contains(stderr, "kjobctl: lag: the time lag could not be read (the offsets were)") {
		t.Fatalf("lag with Redis down: exit %d\n%s%s", code, out, stderr)
	}
}
