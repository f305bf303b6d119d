package kjob_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// brokerWithout starts a broker that does not implement the given
// requests: it neither lists them in its ApiVersions answer nor serves
// them.
func brokerWithout(t *testing.T, keys ...kmsg.Key) []string {
	v := kversion.Stable()
	for _, k := range keys {
		v.SetMaxKeyVersion(int16(k), -1)
	}
	return testenv.Brokers(t, kfake.MaxVersions(v))
}

// runUntil runs run until it returns or the deadline passes; it returns
// Run's error, or fails the test at the deadline.
func runUntil(t *testing.T, run func(context.Context) error, deadline time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	select {
	case err := <-done:
		cancel()
		return err
	case <-time.After(deadline):
		cancel()
		<-done
		t.Fatalf("Run still retrying after %v against a broker that cannot serve it", deadline)
		return nil
	}
}

// A broker without the transaction requests cannot host a producer: Run
// stops at start-up, naming them, instead of retrying for ever as if
// Kafka were unreachable.
func TestProducerStopsOnABrokerWithoutTransactions(t *testing.T) {
	brokers := brokerWithout(t, kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.EndTxn)
	file, err := schedule.Parse("schedules.yaml", []byte("jobs:\n  - name: tick\n    schedule: \"@every 1s\"\n    handler: log\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := kjob.NewProducer(kjob.ProducerConfig{
		Brokers: brokers, Redis: testenv.NewRedis(t).Client(), Jobs: file.Jobs, ID: "p1",
		Logger: slog.New(slog.NewTextHandler(testenv.NewLogBuffer(t), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = runUntil(t, p.Run, 30*time.Second)
	for _, want := range []string{"InitProducerID", "AddPartitionsToTxn", "EndTxn"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v, want an error naming %s", err, want)
		}
	}
}

// A broker without the classic group requests cannot host a worker.
func TestWorkerStopsOnABrokerWithoutGroups(t *testing.T) {
	brokers := brokerWithout(t, kmsg.JoinGroup, kmsg.SyncGroup)
	w, err := kjob.NewWorker(kjob.WorkerConfig{
		Brokers: brokers, Redis: testenv.NewRedis(t).Client(),
		Logger: slog.New(slog.NewTextHandler(testenv.NewLogBuffer(t), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = runUntil(t, w.Run, 30*time.Second)
	for _, want := range []string{"JoinGroup", "SyncGroup"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v, want an error naming %s", err, want)
		}
	}
}
