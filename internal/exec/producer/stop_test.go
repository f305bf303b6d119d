package producer_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// TestStopsWhileTheBrokerDoesNotAnswer: the broker stops answering the
// leader's produce requests (a request is sent and never answered, as
// with a broker that hangs or a network that drops packets) and the
// producer is then stopped: Run returns (StopGrace after its context
// ended), although the Kafka client would wait for the answer forever.
func TestStopsWhileTheBrokerDoesNotAnswer(t *testing.T) {
	c := testenv.Cluster(t)
	brokers := c.ListenAddrs()
	js := jobs(t, `jobs:
  - name: s
    schedule: "@every 1s"
    handler: log
`)
	r := startProducer(t, brokers, clock.Real{}, js, alwaysLeader{})
	testenv.Eventually(t, 20*time.Second, func() bool { return len(r.published()) >= 1 }, "first window not published")

	release := make(chan struct{})
	var held atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		held.Add(1)
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	t.Cleanup(func() { close(release) })
	eventuallyOrDump(t, 20*time.Second, func() bool { return held.Load() >= 1 }, "no produce request held")

	start := time.Now()
	r.cancel()
	select {
	case err := <-r.done:
		close(r.done)
		if err != nil {
			t.Errorf("Run = %v after its context ended, want nil", err)
		}
		t.Logf("Run returned %v after its context ended", time.Since(start).Round(time.Millisecond))
	case <-time.After(40 * time.Second):
		t.Fatalf("Run did not return within 40s of its context ending while a produce request hung; goroutines:\n%s", testenv.Goroutines())
	}
}
