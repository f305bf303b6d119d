//go:build containers

// Package containers runs kjob's end-to-end scenario on real Apache Kafka
// (KRaft) and Redis containers: 2 producer and 3 worker processes built
// from this repository. It needs a Docker engine, so it is behind the
// "containers" build tag and not part of make test:
//
//	make test-containers
//
// It cannot run on machines without Docker (these development machines
// have none); there it fails at the first container start.
package containers_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/kjob/kjob/internal/testenv"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/jobmsg"
)

const (
	kafkaImage = "apache/kafka:4.1.1" // as docker-compose.yml
	redisImage = "redis:7.4"
)

// startKafka runs a single KRaft broker whose client listener is bound to
// the same port on the host, so the address it advertises works from here.
func startKafka(t *testing.T, ctx context.Context) string {
	port := strconv.Itoa(testenv.FreePort(t))
	c, err := testcontainers.Run(ctx, kafkaImage,
		testcontainers.WithEnv(map[string]string{
			"KAFKA_NODE_ID":                                  "1",
			"KAFKA_PROCESS_ROLES":                            "broker,controller",
			"KAFKA_LISTENERS":                                "PLAINTEXT://:" + port + ",CONTROLLER://:9093",
			"KAFKA_ADVERTISED_LISTENERS":                     "PLAINTEXT://127.0.0.1:" + port,
			"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9093",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
		}),
		testcontainers.WithExposedPorts(port+"/tcp"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{network.MustParsePort(port + "/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: port}}}
		}),
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute, wait.ForLog("Kafka Server started")),
	)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("start %s (needs a Docker engine): %v", kafkaImage, err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

func startRedis(t *testing.T, ctx context.Context) string {
	c, err := testcontainers.Run(ctx, redisImage,
		testcontainers.WithCmd("redis-server", "--appendonly", "yes"),
		testcontainers.WithExposedPorts("6379/tcp"),
		testcontainers.WithWaitStrategyAndDeadline(time.Minute, wait.ForLog("Ready to accept connections")),
	)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("start %s (needs a Docker engine): %v", redisImage, err)
	}
	ep, err := c.Endpoint(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func build(t *testing.T, dir string) {
	out, err := exec.Command("go", "build", "-o", dir+"/", "../../cmd/producer", "../../cmd/worker").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

func TestEndToEndOnRealKafkaAndRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	brokers := startKafka(t, ctx)
	redisAddr := startRedis(t, ctx)
	bin := t.TempDir()
	build(t, bin)
	sched := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(sched, []byte("jobs:\n  - name: tick\n    schedule: \"@every 1s\"\n    handler: log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "KJOB_BROKERS="+brokers, "KJOB_REDIS_URL=redis://"+redisAddr+"/0",
		"KJOB_NAMESPACE=tc", "KJOB_PARTITIONS=3", "KJOB_HTTP_ADDR=", "KJOB_SCHEDULES="+sched)
	var procs []*exec.Cmd
	start := func(name string, id int) {
		cmd := exec.Command(filepath.Join(bin, name), "--id", fmt.Sprintf("%s-%d", name, id))
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Signal(os.Interrupt)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	})
	for i := 1; i <= 2; i++ {
		start("producer", i)
	}
	for i := 1; i <= 3; i++ {
		start("worker", i)
	}

	// Let the pipeline run, then check every published window ran once.
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "tc"})
	if err != nil {
		t.Fatal(err)
	}
	var windows []string
	testenv.Eventually(t, 3*time.Minute, func() bool {
		windows = windows[:0]
		for _, r := range testenv.ReadCommitted(t, []string{brokers}, "kjob.windows") {
			m, err := jobmsg.FromRecord(r)
			if err == nil {
				windows = append(windows, m.ID)
			}
		}
		return len(windows) >= 20
	}, "20 windows published on real Kafka")
	seen := map[string]bool{}
	for _, id := range windows {
		if seen[id] {
			t.Errorf("window %s published twice", id)
		}
		seen[id] = true
	}
	last := windows[len(windows)-1]
	testenv.Eventually(t, time.Minute, func() bool {
		st, err := store.State(ctx, last)
		return err == nil && st.Status == dedupe.StatusDone
	}, "the last window done")
	for _, id := range windows {
		st, err := store.State(ctx, id)
		if err != nil {
			t.Errorf("window %s: %v", id, err)
			continue
		}
		if st.Status != dedupe.StatusDone || st.Attempts != 1 {
			t.Errorf("window %s: status %s after %d attempts, want done after 1", id, st.Status, st.Attempts)
		}
	}
}
