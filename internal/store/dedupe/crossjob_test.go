package dedupe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// scriptCalls returns how many EVALSHA and EVAL calls the server has run.
func scriptCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\r\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if v, ok := strings.CutPrefix(line, cmd); ok {
				v, _, _ = strings.Cut(v, ",")
				c, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("commandstats %q: %v", line, err)
				}
				n += c
			}
		}
	}
	return n
}

// On a single server, a batch over many jobs is one script call, not one
// per job, with the same per-job tokens.
func TestCrossJobBatchIsOneCall(t *testing.T) {
	r := testenv.NewRedis(t)
	if !r.Real() {
		t.Skip("counting script calls needs a real redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(r.Client(), Config{Namespace: "xjob"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for w := range 3 {
		for j := range 40 {
			ids = append(ids, fmt.Sprintf("job-%02d@2026-11-22T10:00:%02dZ", j, w))
		}
	}
	// Warm up: the first use of a script on a server is EVALSHA, refused
	// NOSCRIPT, then EVAL.
	warm := []string{"warm-a@1", "warm-b@1"}
	wc, err := s.ClaimBatch(ctx, warm, "w0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompleteBatch(ctx, warm, []int64{wc[0].Token, wc[1].Token}); err != nil {
		t.Fatal(err)
	}
	before := scriptCalls(t, r.Client())
	claims, err := s.ClaimBatch(ctx, ids, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if got := scriptCalls(t, r.Client()) - before; got != 1 {
		t.Errorf("ClaimBatch of 120 windows over 40 jobs made %d script calls, want 1", got)
	}
	if m := s.scripts.Load(); m != scriptsCrossJob {
		t.Errorf("scripts mode %d after a batch on a standalone server, want cross-job (%d)", m, scriptsCrossJob)
	}
	tokens := make([]int64, len(ids))
	for i, c := range claims {
		// Windows are in order w0 of every job, then w1, then w2: the
		// tokens of each job's windows are 1, 2, 3 in batch order.
		if want := int64(i/40 + 1); c.Outcome != Claimed || c.Token != want || c.Attempt != 1 || c.WindowID != ids[i] {
			t.Fatalf("claim %d: %+v, want Claimed with token %d, attempt 1", i, c, want)
		}
		tokens[i] = c.Token
	}
	before = scriptCalls(t, r.Client())
	errs, err := s.CompleteBatch(ctx, ids, tokens)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("complete %s: %v", ids[i], err)
		}
	}
	if got := scriptCalls(t, r.Client()) - before; got != 1 {
		t.Errorf("CompleteBatch of 120 windows over 40 jobs made %d script calls, want 1", got)
	}
	again, err := s.ClaimBatch(ctx, ids, "w2")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range again {
		if c.Outcome != AlreadyDone || c.Token != tokens[i] || c.Holder != "w1" {
			t.Fatalf("claim of done %s: %+v", ids[i], c)
		}
	}
}

// A plain client talking to a Redis Cluster node makes one call per job:
// the node reports mode "cluster" to HELLO. And if a cross-job call
// reaches a server that holds several slots (a proxy in front of a cluster
// that reported itself standalone), the server refuses it without running
// it, and the batch is redone one job per call, for good.
func TestCrossJobFallsBackOnSlotError(t *testing.T) {
	c := testenv.NewRedisCluster(t)
	rdb := redis.NewClient(&redis.Options{Addr: c.Addrs[0]})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(rdb, Config{Namespace: "fb"})
	if err != nil {
		t.Fatal(err)
	}
	if s.crossJob(ctx) {
		t.Fatal("crossJob = true for a client of a Redis Cluster node")
	}
	// Jobs whose slots this node owns (others answer MOVED to any call).
	var jobs []string
	for j := 0; len(jobs) < 5; j++ {
		if j > 1000 {
			t.Fatal("no 5 jobs among 1000 hash to the first node")
		}
		job := fmt.Sprintf("job-%d", j)
		key, _, err := s.key(job + "@x")
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Exists(ctx, key).Err(); err == nil {
			jobs = append(jobs, job)
		}
	}
	var ids []string
	for w := range 2 {
		for _, job := range jobs {
			ids = append(ids, fmt.Sprintf("%s@2026-11-22T10:00:%02dZ", job, w))
		}
	}
	s.scripts.Store(scriptsCrossJob) // as if a proxy had said "standalone"
	claims, err := s.ClaimBatch(ctx, ids, "w1")
	if err != nil {
		t.Fatalf("ClaimBatch after a slot error: %v", err)
	}
	if m := s.scripts.Load(); m != scriptsPerJob {
		t.Errorf("scripts mode %d after a slot error, want per job (%d)", m, scriptsPerJob)
	}
	tokens := make([]int64, len(ids))
	for i, c := range claims {
		// The refused call did not run: each job's windows get tokens 1, 2.
		if want := int64(i/len(jobs) + 1); c.Outcome != Claimed || c.Token != want {
			t.Fatalf("claim %s: %+v, want Claimed with token %d", ids[i], c, want)
		}
		tokens[i] = c.Token
	}
	s.scripts.Store(scriptsCrossJob)
	errs, err := s.CompleteBatch(ctx, ids, tokens)
	if err != nil {
		t.Fatalf("CompleteBatch after a slot error: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("complete %s: %v", ids[i], err)
		}
	}
	if m := s.scripts.Load(); m != scriptsPerJob {
		t.Errorf("scripts mode %d after a slot error, want per job (%d)", m, scriptsPerJob)
	}
}
