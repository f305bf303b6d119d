package test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// brokerStallAfter is how long the broker may leave a request unanswered
// before the chaos run calls it stalled. The run's faults keep it down
// (restart) for well under a second, and no request to the embedded broker
// takes a second when its loop runs.
const brokerStallAfter = 15 * time.Second

// brokerWatch asks the broker for its API versions once a second, each time
// on a new connection, with a deadline (brokerStallAfter in the chaos run).
// The embedded broker (kfake) answers every request of every client from
// one goroutine, Cluster.run: one request it cannot finish stops all of them. When the
// workers' requests time out together, brokerWatch tells a broker that
// stopped answering (its loop is blocked or busy) from workers that stopped
// asking. A refused connection (the broker restarting) is not a stall.
type brokerWatch struct {
	addr    string
	after   time.Duration
	stalled func(since time.Time) // called once, from the watch goroutine
	stop    chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	longest time.Duration // the longest wait for an answer so far
}

// watchBroker starts watching the broker at addr until the returned watch
// is closed; stalled runs once if the broker leaves a request unanswered
// for after.
func watchBroker(addr string, after time.Duration, stalled func(since time.Time)) *brokerWatch {
	w := &brokerWatch{addr: addr, after: after, stalled: stalled, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *brokerWatch) run() {
	defer close(w.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		start := time.Now()
		err := askAPIVersions(w.addr, w.after)
		waited := time.Since(start)
		w.mu.Lock()
		w.longest = max(w.longest, waited)
		w.mu.Unlock()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && waited >= w.after {
			w.stalled(start)
			return
		}
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

// longestWait is the longest the broker took to answer (or to fail) one
// request so far.
func (w *brokerWatch) longestWait() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest
}

func (w *brokerWatch) close() {
	close(w.stop)
	<-w.done
}

// askAPIVersions sends an ApiVersions v0 request on a new connection and
// reads the answer's header, all within timeout.
func askAPIVersions(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	// size 10: api key 18, version 0, correlation id 1, null client id.
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	if _, err := c.Write(req); err != nil {
		return err
	}
	var hdr [8]byte // size, correlation id
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	if corr := binary.BigEndian.Uint32(hdr[4:]); corr != 1 {
		return errors.New("api versions: answer to another request")
	}
	return nil
}

// TestBrokerWatch: the chaos run's broker watch stays quiet while the
// embedded broker answers and while nothing listens (a broker restarting),
// and reports a stall when one client's request holds kfake's request loop:
// here a control function that blocks, after which the broker answers no
// client, the watch's new connection included.
func TestBrokerWatch(t *testing.T) {
	stalled := make(chan time.Time, 1)
	report := func(since time.Time) { stalled <- since }

	w := watchBroker(freeAddr(t), time.Second, report) // nothing listens there
	time.Sleep(3 * time.Second)
	w.close()
	select {
	case <-stalled:
		t.Fatal("a refused connection was reported as a stall")
	default:
	}

	c := testenv.Cluster(t)
	addr := c.ListenAddrs()[0]
	w = watchBroker(addr, 2*time.Second, report)
	defer w.close()
	time.Sleep(3 * time.Second)
	select {
	case <-stalled:
		t.Fatal("a broker that answers was reported as stalled")
	default:
	}
	if d := w.longestWait(); d > time.Second {
		t.Fatalf("the broker took %v to answer while idle", d)
	}

	release := make(chan struct{})
	defer close(release)
	c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		<-release // one request the loop cannot finish
		return nil, nil, false
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() { _ = cl.Ping(ctx) }() // a Metadata request
	select {
	case since := <-stalled:
		t.Logf("stall reported after %v", time.Since(since).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		t.Fatal("a broker whose request loop is held was not reported as stalled")
	}
}
