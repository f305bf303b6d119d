package kjob_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// NewWorker refuses a config it cannot run with a *kjob.ConfigError naming
// the WorkerConfig field, and leaves nothing running behind a refusal.
func TestNewWorkerRefuses(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	brokers := []string{"127.0.0.1:1"}
	for _, tc := range []struct {
		cfg         kjob.WorkerConfig
		field, want string
	}{
		{kjob.WorkerConfig{Redis: rdb}, "WorkerConfig.Brokers", "is empty"},
		{kjob.WorkerConfig{Brokers: brokers}, "WorkerConfig.Redis", "is nil"},
		{kjob.WorkerConfig{Brokers: brokers, Redis: (*redis.Client)(nil)}, "WorkerConfig.Redis", `= "(*redis.Client)(nil)" is a nil pointer`},
		{kjob.WorkerConfig{Brokers: []string{""}, Redis: rdb}, "WorkerConfig.Brokers[0]", `= "" is empty; want host:port`},
		{kjob.WorkerConfig{Brokers: []string{"127.0.0.1:9092", "127.0.0.1:0"}, Redis: rdb}, "WorkerConfig.Brokers[1]", `= "127.0.0.1:0" has port "0", not a number from 1 to 65535`},
		{kjob.WorkerConfig{Brokers: []string{"kafka-1"}, Redis: rdb}, "WorkerConfig.Brokers[0]", `= "kafka-1" is not host:port`},
		{kjob.WorkerConfig{Brokers: []string{":9092"}, Redis: rdb}, "WorkerConfig.Brokers[0]", `has no host`},
		{kjob.WorkerConfig{Brokers: brokers, Redis: rdb, HTTPAllowHosts: []string{"http://x/"}}, "WorkerConfig.HTTPAllowHosts", "without scheme or port"},
		{kjob.WorkerConfig{Brokers: brokers, Redis: rdb, Namespace: "a b"}, "WorkerConfig.Namespace", "contains ' '"},
		{kjob.WorkerConfig{Brokers: brokers, Redis: rdb, Grace: -1}, "WorkerConfig.Grace", "is negative"},
		{kjob.WorkerConfig{Brokers: brokers, Redis: rdb, ControlTopic: "kjob.windows"}, "WorkerConfig.ControlTopic", "is the windows topic"},
		{kjob.WorkerConfig{Brokers: brokers, Redis: rdb, ClaimTTL: 9 * time.Second, ClaimExtendInterval: 5 * time.Second}, "WorkerConfig.ClaimExtendInterval", "must be less than WorkerConfig.ClaimTTL/2"},
	} {
		w, err := kjob.NewWorker(tc.cfg)
		var ce *kjob.ConfigError
		errors.As(err, &ce)
		if w != nil || ce == nil || ce.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewWorker(%+v) = %v, %v; want a *kjob.ConfigError on %s containing %q", tc.cfg, w, err, tc.field, tc.want)
		}
	}
}

// Run with a Redis client that was closed returns an error naming the
// field (errors.Is redis.ErrClosed), for a worker and a producer, and one
// closed while Run runs stops it the same way. Before, Run retried the
// closed client for ever.
func TestRunStopsOnClosedRedis(t *testing.T) {
	brokers := testenv.Brokers(t)
	file, err := schedule.Parse("schedules.yaml", []byte("jobs:\n  - name: tick\n    schedule: \"@every 1s\"\n    handler: log\n"))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testenv.NewLogBuffer(t), nil))
	r := testenv.NewRedis(t)
	for _, tc := range []struct {
		name, field string
		run         func(rdb redis.UniversalClient) (func(context.Context) error, error)
	}{
		{"worker", "WorkerConfig.Redis", func(rdb redis.UniversalClient) (func(context.Context) error, error) {
			w, err := kjob.NewWorker(kjob.WorkerConfig{Brokers: brokers, Redis: rdb, Logger: logger})
			if err != nil {
				return nil, err
			}
			return w.Run, nil
		}},
		{"producer", "ProducerConfig.Redis", func(rdb redis.UniversalClient) (func(context.Context) error, error) {
			p, err := kjob.NewProducer(kjob.ProducerConfig{Brokers: brokers, Redis: rdb, Jobs: file.Jobs, Logger: logger})
			if err != nil {
				return nil, err
			}
			return p.Run, nil
		}},
	} {
		for _, when := range []string{"before Run", "after Run started"} {
			rdb := r.Client()
			run, err := tc.run(rdb)
			if err != nil {
				t.Fatal(err)
			}
			if when == "before Run" {
				rdb.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			done := make(chan error, 1)
			go func() { done <- run(ctx) }()
			if when == "after Run started" {
				// Closed once Run started and Redis answered it.
				testenv.Eventually(t, 30*time.Second, func() bool { return rdb.Get(ctx, "kjob:probe").Err() == redis.Nil }, "redis not answering")
				rdb.Close()
			}
			err = testenv.Recv(t, done, 30*time.Second, tc.name+" Run after its Redis client was closed "+when)
			cancel()
			var ce *kjob.ConfigError
			errors.As(err, &ce)
			if !errors.Is(err, redis.ErrClosed) || ce == nil || ce.Field != tc.field || !strings.Contains(err.Error(), "is closed") {
				t.Errorf("%s, client closed %s: Run = %v; want a *kjob.ConfigError on %s that is redis.ErrClosed", tc.name, when, err, tc.field)
			}
		}
	}
}

// A Run stopped before its consumer runs (here: while it waits for Kafka)
// releases the consumer's Kafka client, which NewWorker made. Before, the
// client's goroutines were left running.
func TestRunStoppedWhileStartingReleases(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	w, err := kjob.NewWorker(kjob.WorkerConfig{Brokers: []string{"127.0.0.1:1"}, Redis: rdb,
		Logger: slog.New(slog.DiscardHandler), SkipKafkaAccessCheck: true, SkipRedisAccessCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run stopped while starting = %v, want nil", err)
	}
}
