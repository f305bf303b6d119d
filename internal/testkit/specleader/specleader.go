// Package specleader runs the real producer leader for the tests of the
// schedules' clients (kjob.Schedules, kjobctl schedule, the dashboard's
// schedules page), so that they exercise the one writer of the schedules
// topic rather than a stand-in that could drift from it.
//
// The producer leads at once (an elector that needs no Redis), so a test
// needs only a broker.
package specleader

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// always leads from the moment Run starts until its context ends, and
// says when it started leading.
type always struct{ leading chan struct{} }

func (a always) Run(ctx context.Context, lead func(context.Context) error) error {
	close(a.leading)
	err := lead(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Start runs a producer leader of deployment d on brokers until the test
// ends, with opts as its Kafka client options (e.g. SASL), and returns
// once it leads and the deployment's topics exist. Its logs go to the
// test's log buffer.
func Start(tb testing.TB, brokers []string, d names.Deployment, opts ...kgo.Opt) {
	tb.Helper()
	d = d.WithDefaults()
	a := always{leading: make(chan struct{})}
	p, err := producer.New(producer.Config{
		Brokers:    brokers,
		ClientOpts: opts,
		Namespace:  d.Namespace,
		Topic:      d.Topic,
		Replica:    "specleader",
		Elector:    a,
		Logger:     slog.New(slog.NewTextHandler(testenv.NewLogBuffer(tb), nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := testenv.Recv(tb, done, 30*time.Second, "the schedules leader's Run after cancel"); err != nil {
			tb.Errorf("the schedules leader's Run: %v", err)
		}
	})
	testenv.Recv(tb, a.leading, 30*time.Second, "the schedules leader leading")
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	want := []string{d.ControlTopic(), d.SchedulesTopic(), d.ScheduleLogTopic()}
	testenv.Eventually(tb, 30*time.Second, func() bool {
		td, err := adm.ListTopics(ctx, want...)
		if err != nil {
			return false
		}
		for _, tp := range want {
			if !td.Has(tp) || td[tp].Err != nil {
				return false
			}
		}
		return true
	}, "the schedules leader created %v", want)

	// Serving: a probe request (the delete of a job that does not exist)
	// is answered, so the tests of other behaviour start once the leader
	// reads requests (its term has started).
	c, err := specs.NewClient(specs.ClientConfig{Opts: append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...), Deployment: d, Actor: "specleader", Wait: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := c.Submit(ctx, []specs.Edit{{Op: specs.OpDelete, Job: ProbeJob}}, "")
		if errors.Is(err, specs.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the schedules leader does not answer requests within 60s: %v", err)
		}
	}
}

// ProbeJob is the job the probe request of Start names; tests that count
// requests leave its out.
const ProbeJob = "specleader-probe"
