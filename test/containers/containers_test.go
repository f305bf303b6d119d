//go:build containers

// Package containers runs kjob's end-to-end scenario on real Apache Kafka
// (KRaft) and Redis containers, with 2 producer and 3 worker containers
// run from the image the repository's Dockerfile builds, hardened as
// docker-compose.yml runs them (read-only root filesystem, no
// capabilities, no privilege escalation). It needs a local Docker engine
// (the schedules file is bind-mounted), so it is behind the "containers"
// build tag and not part of make test:
//
//	make test-containers
//
// It cannot run on machines without Docker (these development machines
// have none); there it fails at the image build. make vet compiles it.
package containers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	dnetwork "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

const (
	kafkaImage = "apache/kafka:4.1.1" // as docker-compose.yml
	redisImage = "redis:7.4"
)

// logTo copies a container's output to the test log.
type logTo struct {
	t    *testing.T
	name string
}

func (l logTo) Accept(g testcontainers.Log) {
	l.t.Logf("%s: %s", l.name, strings.TrimRight(string(g.Content), "\n"))
}

func (l logTo) Write(p []byte) (int, error) {
	l.t.Logf("%s: %s", l.name, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// buildImage builds the repository's Dockerfile with the Docker engine's
// build API (as testcontainers does; the Dockerfile therefore uses no
// BuildKit-only syntax) and removes the image when the test ends.
func buildImage(t *testing.T, ctx context.Context) string {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		t.Fatalf("docker provider (needs a Docker engine): %v", err)
	}
	tagBytes := make([]byte, 6)
	_, _ = rand.Read(tagBytes)
	tag, err := p.BuildImage(ctx, &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		Context: filepath.Join("..", ".."), Dockerfile: "Dockerfile",
		Repo: "kjob-containers-test", Tag: hex.EncodeToString(tagBytes),
		BuildLogWriter: logTo{t, "docker build"},
	}})
	if err != nil {
		t.Fatalf("build the image from the Dockerfile: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := p.Client().ImageRemove(ctx, tag, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Logf("remove image %s: %v", tag, err)
		}
		_ = p.Close()
	})
	return tag
}

// startKafka runs a single KRaft broker on nw as "kafka:9092" for the
// kjob containers, with a second listener bound to the same port on the
// host, so the address it advertises there works from the test.
func startKafka(t *testing.T, ctx context.Context, nw *testcontainers.DockerNetwork) string {
	port := strconv.Itoa(testenv.FreePort(t))
	c, err := testcontainers.Run(ctx, kafkaImage,
		testcontainers.WithEnv(map[string]string{
			"KAFKA_NODE_ID":                                  "1",
			"KAFKA_PROCESS_ROLES":                            "broker,controller",
			"KAFKA_LISTENERS":                                "INTERNAL://:9092,HOST://:" + port + ",CONTROLLER://:9093",
			"KAFKA_ADVERTISED_LISTENERS":                     "INTERNAL://kafka:9092,HOST://127.0.0.1:" + port,
			"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,HOST:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":               "INTERNAL",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9093",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
			"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                "false",
		}),
		network.WithNetwork([]string{"kafka"}, nw),
		testcontainers.WithExposedPorts(port+"/tcp"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = dnetwork.PortMap{dnetwork.MustParsePort(port + "/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: port}}}
		}),
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute, wait.ForLog("Kafka Server started")),
	)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("start %s: %v", kafkaImage, err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// startRedis runs Redis with AOF on nw as "redis:6379" and returns its
// address on the host.
func startRedis(t *testing.T, ctx context.Context, nw *testcontainers.DockerNetwork) string {
	c, err := testcontainers.Run(ctx, redisImage,
		testcontainers.WithCmd("redis-server", "--appendonly", "yes"),
		network.WithNetwork([]string{"redis"}, nw),
		testcontainers.WithExposedPorts("6379/tcp"),
		testcontainers.WithWaitStrategyAndDeadline(time.Minute, wait.ForLog("Ready to accept connections")),
	)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("start %s: %v", redisImage, err)
	}
	ep, err := c.PortEndpoint(ctx, "6379/tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// startKjob runs /<bin> from image on nw, hardened as in
// docker-compose.yml, and waits until it answers /readyz. It also checks
// that it runs as the image's non-root user and that the image's
// /healthcheck (compose's health check) passes.
func startKjob(t *testing.T, ctx context.Context, image string, nw *testcontainers.DockerNetwork, bin string, n int, env map[string]string, binds ...string) {
	name := fmt.Sprintf("%s-%d", bin, n)
	c, err := testcontainers.Run(ctx, image,
		testcontainers.WithEntrypoint("/"+bin),
		testcontainers.WithCmd("--id", name),
		testcontainers.WithEnv(env),
		network.WithNetwork([]string{name}, nw),
		testcontainers.WithExposedPorts("8080/tcp"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.ReadonlyRootfs = true
			hc.CapDrop = []string{"ALL"}
			hc.SecurityOpt = []string{"no-new-privileges:true"}
			hc.Binds = append(hc.Binds, binds...)
		}),
		testcontainers.WithLogConsumers(logTo{t, name}),
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute, wait.ForHTTP("/readyz").WithPort("8080/tcp")),
	)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("start %s from %s: %v", name, image, err)
	}
	info, err := c.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u := info.Config.User; u == "" || strings.HasPrefix(u, "0") || strings.HasPrefix(u, "root") {
		t.Errorf("%s runs as user %q, want the image's non-root user", name, u)
	}
	code, out, err := c.Exec(ctx, []string{"/healthcheck", "http://127.0.0.1:8080/readyz"})
	if err != nil || code != 0 {
		b, _ := io.ReadAll(out)
		t.Errorf("%s: /healthcheck exited %d (%v): %s", name, code, err, b)
	}
}

func TestEndToEndOnRealKafkaAndRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	image := buildImage(t, ctx)
	nw, err := network.New(ctx)
	if err != nil {
		t.Fatalf("docker network: %v", err)
	}
	testcontainers.CleanupNetwork(t, nw)
	brokers := startKafka(t, ctx, nw)
	redisAddr := startRedis(t, ctx, nw)

	sched := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(sched, []byte("jobs:\n  - name: tick\n    schedule: \"@every 1s\"\n    handler: log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(extra map[string]string) map[string]string {
		m := map[string]string{"KJOB_BROKERS": "kafka:9092", "KJOB_REDIS_URL": "redis://redis:6379/0",
			"KJOB_NAMESPACE": "tc", "KJOB_HTTP_ADDR": ":8080", "KJOB_LOG_FORMAT": "json"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for i := 1; i <= 2; i++ {
		startKjob(t, ctx, image, nw, "producer", i, env(map[string]string{"KJOB_PARTITIONS": "3", "KJOB_SCHEDULES": "/etc/kjob/schedules.yaml"}),
			sched+":/etc/kjob/schedules.yaml:ro")
	}
	for i := 1; i <= 3; i++ {
		startKjob(t, ctx, image, nw, "worker", i, env(nil))
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
		for _, r := range testenv.ReadCommitted(t, []string{brokers}, names.Deployment{Namespace: "tc"}.WindowsTopic()) { // kjob.tc.windows
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
