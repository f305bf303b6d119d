package producer_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// A state topic created by hand (or by an older kjob) with the broker's
// default segments (7 days, so a new leader reads a week of uncompacted
// state) still runs, but start-up warns about each setting with its fix.
func TestProducerWarnsAboutLongStateSegments(t *testing.T) {
	brokers := testenv.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	compact := "compact"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "adv.windows.state"); err != nil {
		t.Fatal(err)
	}
	logs := testenv.NewLogBuffer(t)
	r := startProducer(t, brokers, clock.Real{}, jobs(t, everyTen), alwaysLeader{}, func(c *producer.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.Topic, c.StateTopic = "adv.windows", "adv.windows.state"
	})
	testenv.Eventually(t, 30*time.Second, func() bool { return r.p.Status().Leading }, "the producer leads despite the advice")
	out := logs.String()
	for _, k := range []string{"segment.ms", "segment.bytes", "min.cleanable.dirty.ratio"} {
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "config="+k) || !strings.Contains(out, "--entity-name adv.windows.state --add-config "+k+"=") {
			t.Errorf("no start-up warning about %s with its fix in:\n%s", k, out)
		}
	}
}

// A schedule change log created by hand (or by an older kjob) with a
// finite retention still runs, but start-up warns: the broker would
// delete the oldest changes (history, revert).
func TestProducerWarnsAboutFiniteChangeLogRetention(t *testing.T) {
	brokers := testenv.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	week := "604800000"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &week}, "kjob.windows.schedules.log"); err != nil {
		t.Fatal(err)
	}
	logs := testenv.NewLogBuffer(t)
	r := startProducer(t, brokers, clock.Real{}, jobs(t, everyTen), alwaysLeader{}, func(c *producer.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	testenv.Eventually(t, 30*time.Second, func() bool { return r.p.Status().Leading }, "the producer leads despite the advice")
	out := logs.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "topic=kjob.windows.schedules.log") && strings.Contains(line, "config=retention.ms") &&
			strings.Contains(line, "has=604800000") && strings.Contains(line, "--entity-name kjob.windows.schedules.log --add-config retention.ms=-1") {
			return
		}
	}
	t.Errorf("no start-up warning about the change log's retention.ms with its fix in:\n%s", out)
}
