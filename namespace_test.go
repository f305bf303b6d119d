package kjob_test

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// The two-deployment reproduction of issue 21: deployments a and b share
// one Kafka and one Redis, both define a job tick, and set nothing but
// their namespace. Each deployment's windows go to its own topic, labelled
// with its namespace, and each runs exactly once, by its own workers: none
// is run by the other deployment, and none is skipped as already done
// (both publish tick@T with the same window id).
func TestTwoDeploymentsOnOneKafkaKeepApart(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	file, err := schedule.Parse("schedules.yaml", []byte("jobs:\n  - name: tick\n    schedule: \"@every 1s\"\n    handler: tick\n"))
	if err != nil {
		t.Fatal(err)
	}
	type run struct{ by, namespace string }
	var mu sync.Mutex
	runs := map[string][]run{} // window id "<namespace>/<id>" as its topic holds it -> runs
	ran := func(by string) func(context.Context, *kjob.Job) error {
		return func(_ context.Context, j *kjob.Job) error {
			mu.Lock()
			defer mu.Unlock()
			ns := j.Namespace()
			runs[ns+"/"+j.ID()] = append(runs[ns+"/"+j.ID()], run{by: by, namespace: ns})
			return nil
		}
	}
	count := func(ns string) (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range runs {
			for _, r := range rs {
				if r.by == ns {
					n++
				}
			}
		}
		return n
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	producersCtx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	var procs sync.WaitGroup
	errs := make(chan error, 4)
	start := func(ctx context.Context, run func(context.Context) error) {
		procs.Add(1)
		go func() {
			defer procs.Done()
			errs <- run(ctx)
		}()
	}
	for _, ns := range []string{"a", "b"} {
		log := slog.New(slog.NewTextHandler(testenv.NewLogBuffer(t), nil)).With("deployment", ns)
		w, err := kjob.NewWorker(kjob.WorkerConfig{Brokers: brokers, Redis: rdb, Namespace: ns, ID: "worker-" + ns, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		w.HandleFunc("tick", ran(ns))
		p, err := kjob.NewProducer(kjob.ProducerConfig{Brokers: brokers, Redis: rdb, Namespace: ns, ID: "producer-" + ns, Jobs: file.Jobs,
			LeaseTTL: time.Second, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		start(ctx, w.Run)
		start(producersCtx, p.Run)
	}
	testenv.Eventually(t, 60*time.Second, func() bool { return count("a") >= 3 && count("b") >= 3 },
		"each deployment's workers run at least 3 windows of tick")
	stopProducers()

	// Every window published to a deployment's topic runs, once, by its
	// own workers.
	published := map[string][]string{}
	for _, ns := range []string{"a", "b"} {
		topic := names.Deployment{Namespace: ns}.WindowsTopic()
		if topic != "kjob."+ns+".windows" {
			t.Fatalf("deployment %s's windows topic is %q", ns, topic)
		}
		for _, rec := range testenv.ReadCommitted(t, brokers, topic) {
			m, err := jobmsg.FromRecord(rec)
			if err != nil {
				t.Fatalf("%s: %v", topic, err)
			}
			if m.Namespace != ns {
				t.Errorf("%s holds window %s of namespace %q", topic, m.ID, m.Namespace)
			}
			published[ns] = append(published[ns], m.Namespace+"/"+m.ID)
		}
		if len(published[ns]) < 3 {
			t.Fatalf("%s holds %d windows, want at least 3", topic, len(published[ns]))
		}
	}
	all := append(slices.Clone(published["a"]), published["b"]...)
	testenv.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range all {
			if len(runs[id]) == 0 {
				return false
			}
		}
		return true
	}, "every published window runs")
	cancel()
	procs.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for ns, ids := range published {
		for _, id := range ids {
			if rs := runs[id]; len(rs) != 1 || rs[0].by != ns {
				t.Errorf("window %s of deployment %s ran %d times, by %v; want once, by %s", id, ns, len(rs), rs, ns)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(runs)) {
		if !slices.Contains(all, id) {
			t.Errorf("window %s ran (by %v) but is in neither deployment's topic", id, runs[id])
		}
	}
}
