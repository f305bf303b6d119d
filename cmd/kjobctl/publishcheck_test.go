package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// publishEnv points kjobctl at brokers, a fresh Redis and a schedules file
// with the job "a".
func publishEnv(t *testing.T, brokers string) {
	t.Helper()
	r := testenv.NewRedis(t)
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(schedules, []byte("jobs:\n  - name: a\n    schedule: \"@every 1m\"\n    handler: log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KJOB_BROKERS", brokers)
	t.Setenv("KJOB_REDIS_URL", r.URL())
	t.Setenv("KJOB_SCHEDULES", schedules)
}

// With no broker listening, trigger and backfill fail at once with an error
// that names the brokers and what to check, as the read commands do. Before,
// the produce retried until --timeout and said only "context deadline
// exceeded".
func TestPublishWithBrokerDownFailsFast(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)) // nothing listens there
	publishEnv(t, addr)
	for _, args := range [][]string{
		{"trigger", "a", "--timeout", "15s"},
		{"backfill", "a", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T00:05:00Z", "--execute", "--timeout", "15s"},
	} {
		code, _, stderr := runCmd(t, args...)
		want := "cannot reach Kafka at " + addr + " (--brokers/KJOB_BROKERS): unable to dial"
		if code != exitError || !strings.Contains(stderr, want) || !strings.Contains(stderr, "check that the brokers are running") ||
			strings.Contains(stderr, "deadline exceeded") {
			t.Errorf("kjobctl %s: exit %d, stderr %q; want exit 1 with %q and what to check", strings.Join(args, " "), code, stderr, want)
		}
	}
}

// On a broker that creates topics on first use (auto.create.topics.enable,
// the default of Apache Kafka), a misspelt --topic is refused as not found
// (exit 3) naming the topic, and no stray topic appears. Before, trigger
// and backfill created a one-partition "kjob.windowz" and published to it.
func TestPublishNeverCreatesATopic(t *testing.T) {
	brokers := testenv.Brokers(t, kfake.AllowAutoTopicCreation(), kfake.SeedTopics(2, "kjob.windows"))
	publishEnv(t, strings.Join(brokers, ","))
	for _, args := range [][]string{
		{"trigger", "a", "--topic", "kjob.windowz", "--timeout", "15s"},
		{"backfill", "a", "--topic", "kjob.windowz", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T00:05:00Z", "--execute", "--timeout", "15s"},
	} {
		code, _, stderr := runCmd(t, args...)
		if code != exitNotFound || !strings.Contains(stderr, "topic kjob.windowz does not exist") || !strings.Contains(stderr, "check --topic/KJOB_TOPIC") {
			t.Errorf("kjobctl %s: exit %d, stderr %q; want exit 3 naming the topic and the flag", strings.Join(args, " "), code, stderr)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("kjob.windowz") {
		t.Errorf("a stray topic kjob.windowz was created: %v", topics.Names())
	}
	// The right topic still works.
	code, out, stderr := runCmd(t, "trigger", "a", "--timeout", "15s")
	if code != exitOK || !strings.HasPrefix(out, "a@") {
		t.Errorf("trigger on kjob.windows: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// trigger --payload has the schedules file's limit (schedule.MaxPayloadBytes),
// refused with the file's words, before anything is dialled. Before, a
// 100 KB payload was published.
func TestTriggerPayloadLimit(t *testing.T) {
	publishEnv(t, "127.0.0.1:1")
	big := `{"data":"` + strings.Repeat("x", 100<<10) + `"}`
	code, _, stderr := runCmd(t, "trigger", "a", "--payload", big)
	want := fmt.Sprintf("kjobctl: trigger: --payload is %d bytes as JSON, more than the limit of 65536; pass a reference to the data instead (the schedules file's limit): usage\n", len(big))
	if code != exitUsage || stderr != want {
		t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr, want)
	}
	// The schedules file says the same of the same payload.
	file := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(file, []byte("jobs:\n  - name: a\n    schedule: \"@every 1m\"\n    handler: log\n    payload: "+big+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd(t, "schedule", "check", file)
	if code != exitError || !strings.Contains(stderr, fmt.Sprintf("jobs[0].payload: is %d bytes as JSON, more than the limit of 65536; pass a reference to the data instead", len(big))) {
		t.Errorf("schedule check: exit %d, stderr %q", code, stderr)
	}
}
