package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a real Redis Cluster of three masters owned by one test:
// three redis-server processes with cluster mode on, joined and given all
// 16384 slots by `redis-cli --cluster create`. Scripts that touch keys of
// more than one slot fail on it with CROSSSLOT, as on any real cluster.
type RedisCluster struct {
	// Addrs are the nodes' host:port.
	Addrs []string
	tb    testing.TB
	cmds  []*exec.Cmd
}

// NewRedisCluster starts a three-master Redis Cluster on free loopback
// ports, or skips the test when redis-server or redis-cli is not installed
// (fails it when KJOB_TEST_REQUIRE_REDIS=1): there is no fallback for a
// cluster. It is stopped at test end.
func NewRedisCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	server, cli := lookRedisTools(tb)
	c := &RedisCluster{tb: tb}
	tb.Cleanup(c.stop)
	for i := range 3 {
		dir := tb.TempDir()
		port, bus := FreePort(tb), FreePort(tb)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-node-timeout", "5000",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
		if err := cmd.Start(); err != nil {
			tb.Fatalf("testenv: start cluster node %d: %v", i, err)
		}
		c.cmds = append(c.cmds, cmd)
		c.Addrs = append(c.Addrs, addr)
		waitPing(tb, addr, dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, append([]string{"--cluster", "create"}, append(c.Addrs, "--cluster-yes")...)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("testenv: redis-cli --cluster create %v: %v\n%s", c.Addrs, err, out)
	}
	// The nodes learn the slot map by gossip: wait until every node
	// reports the cluster ok.
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range c.Addrs {
		n := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := n.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				n.Close()
				tb.Fatalf("testenv: cluster node %s not ok within 30s: %v %s", addr, err, info)
			}
			time.Sleep(50 * time.Millisecond) // polling the cluster state while gossip converges
		}
		n.Close()
	}
	return c
}

// Client returns a cluster client of the nodes, closed at test end.
func (c *RedisCluster) Client() *redis.ClusterClient {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	c.tb.Cleanup(func() { cl.Close() })
	return cl
}

func (c *RedisCluster) stop() {
	for _, cmd := range c.cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// RedisSentinel is a real Redis master watched by one Sentinel, owned by
// one test: what a client configured with a master name and Sentinel
// addresses talks to.
type RedisSentinel struct {
	// Master is the master's host:port; Sentinel the Sentinel's.
	Master, Sentinel string
	// MasterName is the name the Sentinel monitors the master under.
	MasterName string
	cmds       []*exec.Cmd
}

// NewRedisSentinel starts a redis-server and a Sentinel monitoring it (as
// NewRedisCluster, it skips without redis-server unless
// KJOB_TEST_REQUIRE_REDIS=1), stopped at test end.
func NewRedisSentinel(tb testing.TB) *RedisSentinel {
	tb.Helper()
	server, _ := lookRedisTools(tb)
	s := &RedisSentinel{MasterName: "kjobmaster"}
	tb.Cleanup(func() {
		for _, cmd := range s.cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	dir := tb.TempDir()
	mport := FreePort(tb)
	s.Master = net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))
	m := exec.Command(server, "--port", strconv.Itoa(mport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := m.Start(); err != nil {
		tb.Fatalf("testenv: start master: %v", err)
	}
	s.cmds = append(s.cmds, m)
	waitPing(tb, s.Master, dir)

	sdir := tb.TempDir()
	sport := FreePort(tb)
	s.Sentinel = net.JoinHostPort("127.0.0.1", strconv.Itoa(sport))
	conf := filepath.Join(sdir, "sentinel.conf")
	cfg := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\nsentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 5000\n",
		sport, sdir, filepath.Join(sdir, "sentinel.log"), s.MasterName, mport, s.MasterName)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	sc := exec.Command(server, conf, "--sentinel")
	if err := sc.Start(); err != nil {
		tb.Fatalf("testenv: start sentinel: %v", err)
	}
	s.cmds = append(s.cmds, sc)
	// Wait until the Sentinel knows the master.
	cl := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel})
	defer cl.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addr, err := cl.GetMasterAddrByName(ctx, s.MasterName).Result()
		cancel()
		if err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(mport) {
			return s
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(sdir, "sentinel.log"))
			tb.Fatalf("testenv: sentinel on %s does not know master %s within 15s: %v %v\n%s", s.Sentinel, s.MasterName, addr, err, log)
		}
		time.Sleep(50 * time.Millisecond) // polling while the Sentinel starts
	}
}

// Client returns a failover client (master name + Sentinel), closed at test
// end.
func (s *RedisSentinel) Client(tb testing.TB) *redis.Client {
	cl := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: []string{s.Sentinel}})
	tb.Cleanup(func() { cl.Close() })
	return cl
}

func lookRedisTools(tb testing.TB) (server, cli string) {
	tb.Helper()
	server, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err1 != nil || err2 != nil {
		if os.Getenv("KJOB_TEST_REQUIRE_REDIS") == "1" {
			tb.Fatalf("testenv: KJOB_TEST_REQUIRE_REDIS=1 but redis-server or redis-cli is not on PATH (apt-get install -y redis-server)")
		}
		tb.Skip("testenv: a Redis Cluster or Sentinel needs redis-server and redis-cli (apt-get install -y redis-server); not run")
	}
	return server, cli
}

// waitPing waits until the server at addr answers PING.
func waitPing(tb testing.TB, addr, dir string) {
	tb.Helper()
	if err := awaitPing(addr, dir); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
}
