// Package testenv starts the real services kjob's tests run against: an
// embedded Kafka broker (kfake) and a real redis-server, each on a free
// loopback port in the test's temp dir, cleaned up when the test ends; also
// a real three-master Redis Cluster (NewRedisCluster) and a master watched
// by a Sentinel (NewRedisSentinel).
//
// Environment variables point tests at external services instead:
//
//	KJOB_TEST_BROKERS        comma-separated seed brokers of a real Kafka cluster
//	KJOB_TEST_REDIS_URL      redis:// URL of an external Redis (tests flush nothing but
//	                         their own keys; Kill/Restart are unavailable)
//	KJOB_TEST_REQUIRE_REDIS  "1": fail instead of falling back to miniredis when no
//	                         redis-server is on PATH (CI sets this)
//
// When redis-server is not installed and KJOB_TEST_REQUIRE_REDIS is unset,
// Redis falls back to the in-process miniredis and says so in the test log:
// this keeps `make test` working on a machine with only Go installed, but it
// is not what CI accepts.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/testkit/devredis"
)

// Brokers returns seed brokers for a Kafka the test may use: KJOB_TEST_BROKERS
// when set, otherwise a fresh in-process kfake cluster closed at test end.
// Topics are not created: the code under test creates what it needs, as it
// must against a real cluster.
//
// An external cluster must be dedicated to the tests and disposable: so
// that each test starts from an empty cluster, as it does with kfake,
// Brokers deletes every topic (but Kafka's internal ones) and every
// consumer group it finds there before the test runs. Run the packages
// one at a time against it (go test -p 1; make test-external).
func Brokers(tb testing.TB, opts ...kfake.Opt) []string {
	tb.Helper()
	if s := os.Getenv("KJOB_TEST_BROKERS"); s != "" {
		brokers := strings.Split(s, ",")
		resetKafka(tb, brokers)
		return brokers
	}
	c := Cluster(tb, opts...)
	return c.ListenAddrs()
}

// resetKafka deletes every non-internal topic and every group of the
// external cluster at brokers, and waits until they are gone.
func resetKafka(tb testing.TB, brokers []string) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		tb.Fatalf("testenv: KJOB_TEST_BROKERS: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		tb.Fatalf("testenv: KJOB_TEST_BROKERS: list groups: %v", err)
	}
	if names := groups.Groups(); len(names) > 0 {
		if _, err := adm.DeleteGroups(ctx, names...); err != nil {
			tb.Fatalf("testenv: KJOB_TEST_BROKERS: delete groups %v: %v", names, err)
		}
	}
	for {
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			tb.Fatalf("testenv: KJOB_TEST_BROKERS: list topics: %v", err)
		}
		names := topics.Names()
		if len(names) == 0 {
			return
		}
		if _, err := adm.DeleteTopics(ctx, names...); err != nil {
			tb.Fatalf("testenv: KJOB_TEST_BROKERS: delete topics %v: %v", names, err)
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("testenv: KJOB_TEST_BROKERS: topics %v still exist after 60s", names)
		case <-time.After(100 * time.Millisecond): // deletion is asynchronous on a real cluster
		}
	}
}

// Cluster starts an in-process kfake cluster on a free loopback port and
// closes it when the test ends. Use it when a test needs fault injection
// (Cluster.Fault); otherwise prefer Brokers.
func Cluster(tb testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	tb.Helper()
	base := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(FreePort(tb))}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		tb.Fatalf("testenv: start kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Redis is a Redis server owned by one test.
type Redis struct {
	// Addr is host:port.
	Addr string
	// Kind is "redis-server", "external" or "miniredis (fallback)".
	Kind string

	tb      testing.TB
	dir     string
	bin     string
	port    int
	durable bool // append-only file, fsync on every write

	external *redis.Options // KJOB_TEST_REDIS_URL

	mu   sync.Mutex
	cmd  *exec.Cmd
	mini *devredis.Server
}

// URL returns a redis:// URL for the server.
func (r *Redis) URL() string {
	if r.external != nil {
		return os.Getenv("KJOB_TEST_REDIS_URL")
	}
	return "redis://" + r.Addr
}

// Real reports whether this is a real redis-server (started here or external).
func (r *Redis) Real() bool { return r.mini == nil }

// NewRedis starts a real redis-server for the test (see the package doc for
// the fallback rules). The server and its client are closed at test end.
//
// With KJOB_TEST_REDIS_URL the test uses that Redis instead, which must be
// dedicated to the tests and disposable: its database is flushed before
// the test, so each test starts empty as with its own server; Kill and
// Restart skip the test there. Run the packages one at a time against it
// (go test -p 1; make test-external).
func NewRedis(tb testing.TB) *Redis {
	tb.Helper()
	if u := os.Getenv("KJOB_TEST_REDIS_URL"); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			tb.Fatalf("testenv: KJOB_TEST_REDIS_URL=%q: %v", u, err)
		}
		r := &Redis{Addr: opt.Addr, Kind: "external", tb: tb, external: opt}
		c := redis.NewClient(opt)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.FlushDB(ctx).Err(); err != nil {
			tb.Fatalf("testenv: KJOB_TEST_REDIS_URL: flush db %d: %v", opt.DB, err)
		}
		return r
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("KJOB_TEST_REQUIRE_REDIS") == "1" {
			tb.Fatalf("testenv: KJOB_TEST_REQUIRE_REDIS=1 but redis-server is not on PATH; install it (apt-get install -y redis-server)")
		}
		m, err := devredis.Start("")
		if err != nil {
			tb.Fatalf("testenv: miniredis: %v", err)
		}
		tb.Cleanup(m.Close)
		tb.Logf("testenv: redis-server not on PATH; using in-process miniredis (fallback, not a real Redis)")
		return &Redis{Addr: m.Addr(), Kind: "miniredis (fallback)", tb: tb, mini: m}
	}
	r := &Redis{Kind: "redis-server", tb: tb, dir: tb.TempDir(), bin: bin, port: FreePort(tb)}
	r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
	r.start()
	tb.Cleanup(r.Kill)
	return r
}

// NewDurableRedis is NewRedis with persistence: the server writes an
// append-only file and fsyncs every write, so Kill followed by Restart loses
// nothing it acknowledged (as a production Redis run with AOF, which kjob
// requires). It needs a redis-server on PATH, and starts one even when
// KJOB_TEST_REDIS_URL is set; without one the test is skipped (fails when
// KJOB_TEST_REQUIRE_REDIS=1): miniredis cannot persist.
func NewDurableRedis(tb testing.TB) *Redis {
	tb.Helper()
	// Even with KJOB_TEST_REDIS_URL the test starts its own server: it
	// must kill and restart it.
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("KJOB_TEST_REQUIRE_REDIS") == "1" {
			tb.Fatalf("testenv: KJOB_TEST_REQUIRE_REDIS=1 but no redis-server to start with persistence (install it: apt-get install -y redis-server)")
		}
		tb.Skip("testenv: needs a redis-server started by the test (to restart it without data loss); none on PATH")
	}
	r := &Redis{Kind: "redis-server (aof)", tb: tb, dir: tb.TempDir(), bin: bin, port: FreePort(tb), durable: true}
	r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
	r.start()
	tb.Cleanup(r.Kill)
	return r
}

// Client returns a new go-redis client for the server, closed at test end.
func (r *Redis) Client() *redis.Client {
	opt := &redis.Options{Addr: r.Addr}
	if r.external != nil {
		o := *r.external // NewClient fills in defaults: one copy per client
		opt = &o
	}
	c := redis.NewClient(opt)
	r.tb.Cleanup(func() { c.Close() })
	return c
}

func (r *Redis) start() {
	r.tb.Helper()
	cmd, err := startRedisServer(r.bin, r.dir, r.port, r.durable)
	if err != nil {
		r.tb.Fatalf("testenv: %v", err)
	}
	r.mu.Lock()
	r.cmd = cmd
	r.mu.Unlock()
}

// startRedisServer starts bin on 127.0.0.1:port with its files in dir
// (persistence only if durable) and waits until it answers PING.
func startRedisServer(bin, dir string, port int, durable bool) (*exec.Cmd, error) {
	aof := []string{"--appendonly", "no"}
	if durable {
		aof = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, aof...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := awaitPing(addr, dir); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return cmd, nil
}

// awaitPing waits up to 10s until the server at addr answers PING; the
// error carries the server's log from dir.
func awaitPing(addr, dir string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return fmt.Errorf("redis-server on %s did not answer within 10s: %w\n%s", addr, err, log)
		}
		time.Sleep(10 * time.Millisecond) // poll interval while the process boots
	}
}

// ExampleRedis starts a Redis for a runnable Example, which has no
// testing.TB: a real redis-server on a free loopback port in a temporary
// directory when one is on PATH, else the labelled in-process miniredis
// fallback (an error instead when KJOB_TEST_REQUIRE_REDIS=1). It tells
// stderr which one it started (an Example compares only stdout). stop
// stops it and removes its directory.
func ExampleRedis() (addr string, stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("KJOB_TEST_REQUIRE_REDIS") == "1" {
			return "", nil, errors.New("testenv: KJOB_TEST_REQUIRE_REDIS=1 but redis-server is not on PATH; install it (apt-get install -y redis-server)")
		}
		m, err := devredis.Start("")
		if err != nil {
			return "", nil, fmt.Errorf("testenv: miniredis: %w", err)
		}
		fmt.Fprintln(os.Stderr, "testenv: redis-server not on PATH; the example uses the in-process miniredis (fallback, not a real Redis)")
		return m.Addr(), m.Close, nil
	}
	dir, err := os.MkdirTemp("", "kjob-example-redis-")
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd, err := startRedisServer(bin, dir, port, false)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("testenv: %w", err)
	}
	fmt.Fprintf(os.Stderr, "testenv: the example uses redis-server on 127.0.0.1:%d\n", port)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}, nil
}

// Kill stops the server abruptly (SIGKILL). Its data is lost, as in a crash
// of a server without persistence, unless it came from NewDurableRedis.
func (r *Redis) Kill() {
	if r.external != nil {
		r.tb.Skip("testenv: this test kills Redis, which it cannot do to the external KJOB_TEST_REDIS_URL; not run")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mini != nil {
		// The fallback stops listening (and loses its data) like a
		// killed server; it cannot be restarted.
		r.mini.Miniredis.Close()
		return
	}
	if r.cmd != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// Restart kills the server (if running) and starts a new one on the same
// port. Only for a redis-server started here.
func (r *Redis) Restart() {
	r.tb.Helper()
	if r.external != nil {
		r.tb.Skip("testenv: this test restarts Redis, which it cannot do to the external KJOB_TEST_REDIS_URL; not run")
	}
	if r.bin == "" {
		r.tb.Fatalf("testenv: Restart needs a redis-server started by testenv (have %s)", r.Kind)
	}
	r.Kill()
	r.start()
}

// String describes the server for logs.
func (r *Redis) String() string { return fmt.Sprintf("%s at %s", r.Kind, r.Addr) }
