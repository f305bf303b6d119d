package kjob_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// The README's worker main, run: a worker with the user's "report"
// handler runs a window an operator triggered, then runs it again after
// an operator's replay with --rerun, with a higher fencing token.
//
// Only the surroundings differ from the README: the example brings its
// own Kafka (the in-process kfake broker) and Redis (a throwaway
// redis-server), logs nowhere, and serves no HTTP; a real main gets its
// context from signal.NotifyContext, so that SIGTERM drains it.
func ExampleWorker() {
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, names.DefaultTopic))
	if err != nil {
		fmt.Println("kafka:", err)
		return
	}
	defer kafka.Close()
	brokers := kafka.ListenAddrs()
	redisAddr, stopRedis, err := testenv.ExampleRedis()
	if err != nil {
		fmt.Println("redis:", err)
		return
	}
	defer stopRedis()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()

	// The README's main, with the example's brokers and Redis.
	w, err := kjob.NewWorker(kjob.WorkerConfig{
		Brokers: brokers,
		Redis:   rdb,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println("worker:", err)
		return
	}
	ran := make(chan struct{}, 2)
	w.HandleFunc("report", func(ctx context.Context, j *kjob.Job) error {
		fmt.Printf("report ran: %s window, attempt %d, fencing token %d\n", j.Trigger(), j.Attempt(), j.FencingToken())
		ran <- struct{}{}
		return nil
	})
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		stop() // as SIGTERM would
		if err := <-done; err != nil {
			fmt.Println("run:", err)
		}
	}()

	// An operator triggers the job now (kjobctl trigger report).
	file, err := schedule.Parse("schedules.yaml", []byte("jobs:\n  - {name: report, schedule: \"@every 1h\", handler: report}\n"))
	if err != nil {
		fmt.Println("schedules:", err)
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	defer cl.Close()
	if _, _, err := operator.Trigger(ctx, cl, names.Deployment{}, file.Jobs[0], nil, time.Now()); err != nil {
		fmt.Println("trigger:", err)
		return
	}
	if !wait(ctx, ran) || !committed(ctx, cl) {
		return
	}

	// The operator replays the job's windows and runs them again
	// (kjobctl replay --to-earliest --job report --rerun --execute): the
	// worker that owns the partition seeks back, and dedupe lets the
	// window run once more, with a higher fencing token.
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: names.DefaultNamespace})
	if err != nil {
		fmt.Println("store:", err)
		return
	}
	r, err := operator.NewReplayer(operator.ReplayerConfig{Brokers: brokers, Store: store})
	if err != nil {
		fmt.Println("replayer:", err)
		return
	}
	defer r.Close()
	plan, err := planReplay(ctx, r, operator.ReplaySpec{Group: names.DefaultGroup, Mode: operator.ToEarliest, Job: "report", Rerun: true})
	if err != nil {
		fmt.Println("replay:", err)
		return
	}
	fmt.Printf("replay plan: %d window to run again, online: %v\n", len(plan.Rerun), plan.Online)
	if err := r.Execute(ctx, plan); err != nil {
		fmt.Println("replay:", err)
		return
	}
	wait(ctx, ran)

	// Output:
	// report ran: manual window, attempt 1, fencing token 1
	// replay plan: 1 window to run again, online: true
	// report ran: manual window, attempt 1, fencing token 2
}

// wait waits for the handler to run, or says it did not.
func wait(ctx context.Context, ran <-chan struct{}) bool {
	select {
	case <-ran:
		return true
	case <-ctx.Done():
		fmt.Println("the window did not run within a minute")
		return false
	}
}

// committed waits until the workers' group has committed the window's
// offset (a worker commits settled records within a second): a replay
// moves back from the committed offsets.
func committed(ctx context.Context, cl *kgo.Client) bool {
	adm := kadm.NewClient(cl)
	for {
		lags, err := adm.Lag(ctx, names.DefaultGroup)
		if err == nil {
			l := lags[names.DefaultGroup]
			if l.Error() == nil && len(l.Lag[names.DefaultTopic]) > 0 && l.Lag.Total() == 0 {
				return true
			}
		}
		select {
		case <-ctx.Done():
			fmt.Println("the group did not commit the window within a minute")
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// planReplay plans as an operator does when kjobctl says the group is
// rebalancing: again, a moment later (the worker has just joined).
func planReplay(ctx context.Context, r *operator.Replayer, spec operator.ReplaySpec) (*operator.ReplayPlan, error) {
	for {
		plan, err := r.Plan(ctx, spec)
		if !errors.Is(err, operator.ErrRebalancing) {
			return plan, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
