package partition

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicCheckEvery is how often, while the member owns no partition, the
// Consumer checks that its topic exists (the first check is at once).
const topicCheckEvery = 5 * time.Second

// connWatch is a kgo hook that logs, once per outage, that the brokers
// cannot be reached, and once that they can again: kgo retries on its own
// and says nothing, so without it a worker whose broker is gone logged
// nothing while /readyz said why.
type connWatch struct {
	c    *Consumer
	down atomic.Bool
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (w *connWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		if w.down.CompareAndSwap(false, true) {
			w.c.log.Error("cannot reach a Kafka broker; retrying (nothing is fetched or committed meanwhile)", "broker", meta.Host, "err", err)
		}
		return
	}
	if w.down.CompareAndSwap(true, false) {
		w.c.log.Info("Kafka broker reachable again", "broker", meta.Host)
	}
}

// watchTopic logs once if the topic does not exist while this member owns
// no partition of it (the group then has nothing to assign), and once when
// it appears, until ctx is done.
func (c *Consumer) watchTopic(ctx context.Context) {
	adm := kadm.NewClient(c.cl)
	missing := false
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(topicCheckEvery)
		if len(c.Assigned()) > 0 {
			if missing {
				missing = false
				c.log.Info("the topic exists now")
			}
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		td, err := adm.ListTopics(cctx, c.cfg.Topic)
		cancel()
		if err != nil {
			continue // the connection watch says why
		}
		d, ok := td[c.cfg.Topic]
		switch {
		case (!ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition)) && !missing:
			missing = true
			c.log.Error("the topic does not exist; nothing to consume until it is created (a producer creates the windows topic at start-up)")
		case ok && d.Err == nil && missing:
			missing = false
			c.log.Info("the topic exists now")
		}
	}
}
