package kjob_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// A Producer assembled from a ProducerConfig with only the required fields
// (and a short lease, to win it fast) takes the Redis lease, publishes a
// job's windows to the windows topic, serves /readyz once running, and
// returns nil when its context ends, leaving no goroutine behind.
func TestProducerPublishesWindows(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	file, err := schedule.Parse("schedules.yaml", []byte("jobs:\n  - name: tick\n    schedule: \"@every 1s\"\n    handler: log\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's and Redis's own goroutines are the test environment's; the
	// producer's must all be gone when Run returns.
	leaks := []goleak.Option{goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
		// The miniredis fallback (a machine without redis-server) serves
		// the test's Redis connections in goroutines of the test's own.
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer"),
		goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer.func2"),
		// The in-process broker answers a long-polled fetch only when its
		// wait ends (up to 5 s), even after the client hung up, so the
		// broker's side of a closed connection can outlive the client.
		// Those goroutines are the broker's; the producer's own kgo
		// goroutines are still checked.
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*clientConn).read"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*clientConn).write")}
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	p, err := kjob.NewProducer(kjob.ProducerConfig{
		Brokers:  brokers,
		Redis:    rdb,
		Jobs:     file.Jobs,
		ID:       "p1",
		HTTPAddr: addr,
		Logger:   slog.New(slog.NewTextHandler(testenv.NewLogBuffer(t), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	testenv.Eventually(t, 20*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK
	}, "/readyz answers 200 once the producer runs")
	topic := names.Deployment{}.WithDefaults().WindowsTopic()
	// Committed windows, not end offsets: a term that ends on a Kafka
	// error (kfake answered OUT_OF_ORDER_SEQUENCE_NUMBER once in CI)
	// aborts its transaction, whose record and marker count in the end
	// offsets, and publishes the window again in the next term.
	var recs []*kgo.Record
	testenv.Eventually(t, 30*time.Second, func() bool {
		recs = testenv.ReadCommitted(t, brokers, topic)
		return len(recs) >= 3
	}, "three windows committed to %s", topic)
	for _, r := range recs {
		if string(r.Key) != "tick" {
			t.Errorf("record key %q, want the job's name tick", r.Key)
		}
	}

	cancel()
	if err := testenv.Recv(t, done, 20*time.Second, "Run's return after cancel"); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	goleak.VerifyNone(t, leaks...)
}

// NewProducer names the required field that is missing.
func TestNewProducerRefusesMissingFields(t *testing.T) {
	rdb := testenv.NewRedis(t).Client()
	for _, tc := range []struct {
		cfg  kjob.ProducerConfig
		want string
	}{
		{kjob.ProducerConfig{Redis: rdb}, "kjob: ProducerConfig.Brokers is empty"},
		{kjob.ProducerConfig{Brokers: []string{"127.0.0.1:9092"}}, "kjob: ProducerConfig.Redis is nil"},
		{kjob.ProducerConfig{Brokers: []string{"127.0.0.1:9092"}, Redis: (*redis.Client)(nil)}, `kjob: ProducerConfig.Redis = "(*redis.Client)(nil)" is a nil pointer`},
		{kjob.ProducerConfig{Brokers: []string{""}, Redis: rdb}, `kjob: ProducerConfig.Brokers[0] = "" is empty`},
		{kjob.ProducerConfig{Brokers: []string{"127.0.0.1:0"}, Redis: rdb}, `kjob: ProducerConfig.Brokers[0] = "127.0.0.1:0" has port "0", not a number from 1 to 65535`},
		{kjob.ProducerConfig{Brokers: []string{"127.0.0.1:9092"}, Redis: rdb, Jobs: []*schedule.Job{{Name: "a"}}, LeaseTTL: 4 * time.Second, LeaseRenew: 2 * time.Second},
			"kjob: ProducerConfig.LeaseRenew = 2s must be less than ProducerConfig.LeaseTTL/2"},
		{kjob.ProducerConfig{Brokers: []string{"127.0.0.1:9092"}, Redis: rdb, Jobs: []*schedule.Job{{Name: "a"}}, PublishLead: 11 * time.Second},
			"kjob: ProducerConfig.PublishLead = 11s is above 10s"},
	} {
		if _, err := kjob.NewProducer(tc.cfg); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("NewProducer = %v, want an error starting %q", err, tc.want)
		}
	}
}
