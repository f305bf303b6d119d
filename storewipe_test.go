package kjob_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// TestRedisWipeTokensNeverGoBack is issue 21's reproduction: a worker runs
// a job's windows, a zombie attempt holds a later token, then Redis
// restarts without persistence (all data lost). The next window's token
// must exceed every earlier one, the zombie's included (before the store
// epoch it was 1 again).
func TestRedisWipeTokensNeverGoBack(t *testing.T) {
	r := testenv.NewRedis(t)
	if !r.Real() {
		t.Skip("needs a real redis-server: the test restarts it without persistence, which the in-process fallback cannot do")
	}
	brokers := testenv.Brokers(t, kfake.SeedTopics(1, names.DefaultTopic))
	rdb := r.Client()
	logs := testenv.NewLogBuffer(t)
	w, err := kjob.NewWorker(kjob.WorkerConfig{Brokers: brokers, Redis: rdb, ID: "w1",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	tokens := make(chan int64, 16)
	w.HandleFunc("tick", func(ctx context.Context, j *kjob.Job) error {
		tokens <- j.FencingToken()
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	file, err := schedule.Parse("schedules.yaml", []byte("jobs:\n  - {name: tick, schedule: \"@every 1h\", handler: tick}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	trigger := func() int64 {
		t.Helper()
		if _, _, err := operator.Trigger(ctx, cl, names.Deployment{}, file.Jobs[0], nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		return testenv.Recv(t, tokens, 60*time.Second, "the triggered window's run")
	}

	var before []int64
	for range 3 {
		before = append(before, trigger())
	}
	// A zombie: an attempt that claimed a window and never settles it.
	zombieStore, err := dedupe.New(rdb, dedupe.Config{Namespace: names.DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	zc, err := zombieStore.Claim(ctx, jobmsg.ManualID("tick", time.Now(), "zombie"), "zombie")
	if err != nil || zc.Outcome != dedupe.Claimed {
		t.Fatalf("zombie claim: %+v, %v", zc, err)
	}
	before = append(before, zc.Token)

	r.Restart() // no persistence: every key is gone

	after := trigger()
	t.Logf("fencing tokens of job tick before the wipe %v (the last one a zombie's), after it %d", before, after)
	for _, b := range before {
		if after <= b {
			t.Fatalf("token %d after the wipe is not above token %d from before it (before: %v)", after, b, before)
		}
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"redis lost its data") {
		t.Errorf("no ERROR line about the wiped store in the log:\n%s", logs)
	}
}

// TestWipedStoreIsNotReady: from a wipe until a new store epoch is proven
// (here: while the epoch topic refuses writes), /readyz fails naming the
// loss and kjob_store_wiped is 1; then both clear.
func TestWipedStoreIsNotReady(t *testing.T) {
	r := testenv.NewRedis(t)
	c := testenv.Cluster(t, kfake.SeedTopics(1, names.DefaultTopic))
	brokers := c.ListenAddrs()
	rdb := r.Client()
	logs := testenv.NewLogBuffer(t)
	w, err := kjob.NewWorker(kjob.WorkerConfig{Brokers: brokers, Redis: rdb, ID: "w1",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.HTTPHandler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	testenv.Eventually(t, 60*time.Second, func() bool { code, _ := get("/readyz"); return code == http.StatusOK }, "worker ready")

	var refuse atomic.Bool // the epoch topic refuses writes
	refuse.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, tp := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = tp.Topic
			for _, p := range tp.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.PolicyViolation.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	if err := rdb.FlushAll(ctx).Err(); err != nil { // a wipe, as an empty restarted server
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, body := get("/readyz")
		return code != http.StatusOK && strings.Contains(body, "redis lost its data")
	}, "/readyz fails naming the lost data")
	if _, body := get("/metrics"); !strings.Contains(body, "\nkjob_store_wiped 1\n") || !strings.Contains(body, "\nkjob_store_epoch_proven 0\n") ||
		!strings.Contains(body, `kjob_store_losses_total{cause="wiped"} 1`) {
		t.Errorf("metrics during the unresolved wipe:\n%s", grepLines(body, "kjob_store_"))
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"redis lost its data") {
		t.Errorf("no ERROR line about the wiped store:\n%s", logs)
	}

	refuse.Store(false)
	testenv.Eventually(t, 30*time.Second, func() bool { code, _ := get("/readyz"); return code == http.StatusOK }, "worker ready again once the new epoch is proven")
	if _, body := get("/metrics"); !strings.Contains(body, "\nkjob_store_wiped 0\n") || !strings.Contains(body, "\nkjob_store_epoch 1\n") {
		t.Errorf("metrics after the wipe was resolved:\n%s", grepLines(body, "kjob_store_"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
