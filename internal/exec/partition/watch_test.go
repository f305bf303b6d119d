package partition

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// lockedBuffer is a log destination tests read while the consumer writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// A consumer whose topic does not exist says so once, and once when it
// appears; one whose broker goes away says so once per outage.
func TestMissingTopicAndGoneBrokerAreLoggedOnce(t *testing.T) {
	c := testenv.Cluster(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	brokers := c.ListenAddrs()
	var logs lockedBuffer
	cfg := baseConfig(t, brokers, "g", "later", "m", func(context.Context, *kgo.Record) error { return nil })
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cons := newConsumer(t, cfg)
	stop := run(t, cons)
	testenv.Eventually(t, 20*time.Second, func() bool { return logs.count("the topic does not exist") == 1 }, "the missing topic is logged")
	createTopic(t, brokers, "later", 1)
	testenv.Eventually(t, 40*time.Second, func() bool { return logs.count("the topic exists now") == 1 }, "its creation is logged")
	if n := logs.count("the topic does not exist"); n != 1 {
		t.Errorf("the missing topic was logged %d times, want once", n)
	}
	c.Close()
	testenv.Eventually(t, 20*time.Second, func() bool { return logs.count("cannot reach a Kafka broker") >= 1 }, "the gone broker is logged")
	time.Sleep(2 * time.Second) // nothing to wait on: proving the outage is not logged again and again
	if n := logs.count("cannot reach a Kafka broker"); n != 1 {
		t.Errorf("the gone broker was logged %d times, want once per outage", n)
	}
	stop()
}
