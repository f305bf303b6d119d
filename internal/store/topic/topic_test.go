package topic_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/store/topic"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

func admin(t *testing.T, brokers []string) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func TestEnsureCreatesThenAccepts(t *testing.T) {
	brokers := testenv.Brokers(t)
	adm := admin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	specs := []topic.Spec{
		{Name: "w", Partitions: 3, ReplicationFactor: 1},
		{Name: "s", Partitions: 1, ReplicationFactor: 1, Compacted: true},
	}
	if err := topic.Ensure(ctx, adm, specs...); err != nil {
		t.Fatalf("create: %v", err)
	}
	// A second client: kgo briefly caches metadata answers per client.
	d, err := admin(t, brokers).ListTopics(ctx, "w", "s")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d["w"].Partitions); n != 3 {
		t.Fatalf("w has %d partitions", n)
	}
	if err := topic.Ensure(ctx, adm, specs...); err != nil {
		t.Fatalf("second Ensure on matching topics: %v", err)
	}
}

func TestEnsureRefusesMismatch(t *testing.T) {
	brokers := testenv.Brokers(t)
	adm := admin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "s"); err != nil {
		t.Fatal(err)
	}
	err := topic.Ensure(ctx, adm, topic.Spec{Name: "w", Partitions: 4, ReplicationFactor: 1})
	if !errors.Is(err, topic.ErrMismatch) {
		t.Fatalf("err = %v", err)
	}
	want := "topic w exists but has 2 partitions, configured 4 (set the partitions setting to 2"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	err = topic.Ensure(ctx, adm, topic.Spec{Name: "s", Partitions: 1, ReplicationFactor: 1, Compacted: true})
	if !errors.Is(err, topic.ErrMismatch) || !strings.Contains(err.Error(), "has cleanup.policy=delete, needs compact") {
		t.Fatalf("err = %v", err)
	}
}

func TestSpecValidation(t *testing.T) {
	err := topic.Ensure(context.Background(), nil, topic.Spec{Name: "x", Partitions: 0, ReplicationFactor: 1})
	if ce := configerr.As(err); err == nil || err.Error() != "topic x: Spec.Partitions = 0: must be at least 1" || ce == nil || ce.Field != "Spec.Partitions" {
		t.Fatalf("err = %v, want a *configerr.Error about Spec.Partitions", err)
	}
}

// configsOf returns the effective configs the broker reports for name.
func configsOf(t *testing.T, adm *kadm.Client, name string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(name, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", name, err, rc.Err)
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out
}

// A compacted topic is created with segments that roll within the hour
// (a broker never compacts the active segment: with Kafka's defaults a new
// leader would read up to 7 days or 1 GiB of superseded state) and a
// cleaner that runs once a tenth of the log is dirty.
func TestEnsureCreatesCompactedTopicWithShortSegments(t *testing.T) {
	brokers := testenv.Brokers(t)
	adm := admin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := topic.Ensure(ctx, adm, topic.Spec{Name: "s", Partitions: 1, ReplicationFactor: 1, Compacted: true},
		topic.Spec{Name: "w", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	got := configsOf(t, admin(t, brokers), "s")
	for k, want := range map[string]string{"cleanup.policy": "compact", "segment.ms": "3600000", "segment.bytes": "16777216", "min.cleanable.dirty.ratio": "0.1"} {
		if got[k] != want {
			t.Errorf("state topic %s = %q, want %q", k, got[k], want)
		}
	}
	if w := configsOf(t, admin(t, brokers), "w"); w["segment.ms"] == "3600000" || w["cleanup.policy"] == "compact" {
		t.Errorf("a topic that is not compacted got the compacted settings: %v", w)
	}
	// Created by Ensure: nothing to advise.
	advice, err := topic.EnsureWithAdvice(ctx, adm, topic.Spec{Name: "s", Partitions: 1, ReplicationFactor: 1, Compacted: true})
	if err != nil || len(advice) != 0 {
		t.Fatalf("second Ensure: advice %v, err %v", advice, err)
	}
}

// An existing compacted topic with the broker's default segments works
// (start-up goes on: it only makes a takeover slower), but each setting is
// advice naming the value and the command that fixes it.
func TestEnsureAdvisesOnLongSegments(t *testing.T) {
	brokers := testenv.Brokers(t)
	adm := admin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	compact := "compact"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "s"); err != nil {
		t.Fatal(err)
	}
	advice, err := topic.EnsureWithAdvice(ctx, admin(t, brokers), topic.Spec{Name: "s", Partitions: 1, ReplicationFactor: 1, Compacted: true})
	if err != nil {
		t.Fatalf("an existing compacted topic with long segments must still be accepted: %v", err)
	}
	got := map[string]topic.Advice{}
	for _, a := range advice {
		got[a.Config] = a
	}
	for _, k := range []string{"segment.ms", "segment.bytes", "min.cleanable.dirty.ratio"} {
		a, ok := got[k]
		if !ok {
			t.Errorf("no advice about %s: %v", k, advice)
			continue
		}
		if a.Topic != "s" || a.Has == a.Want || !strings.Contains(a.String(), "--entity-name s --add-config "+k+"="+a.Want) {
			t.Errorf("advice %q: want the topic, its value and the kafka-configs fix", a)
		}
	}
	if len(advice) != 3 {
		t.Errorf("advice %v, want exactly the three compaction settings", advice)
	}
}

// With a replication factor of 3, topics are created with
// min.insync.replicas=2; an existing one left at 1 is advice.
func TestEnsureMinInsyncReplicasWithThreeReplicas(t *testing.T) {
	kafka, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	brokers := kafka.ListenAddrs()
	adm := admin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := topic.Ensure(ctx, adm, topic.Spec{Name: "w", Partitions: 2, ReplicationFactor: 3},
		topic.Spec{Name: "s", Partitions: 1, ReplicationFactor: 3, Compacted: true}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"w", "s"} {
		if v := configsOf(t, admin(t, brokers), name)["min.insync.replicas"]; v != "2" {
			t.Errorf("topic %s created with replication factor 3 has min.insync.replicas=%q, want 2", name, v)
		}
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "old"); err != nil {
		t.Fatal(err)
	}
	advice, err := topic.EnsureWithAdvice(ctx, admin(t, brokers), topic.Spec{Name: "old", Partitions: 1, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(advice) != 1 || advice[0].Config != "min.insync.replicas" || advice[0].Has != "1" || advice[0].Want != "2" {
		t.Fatalf("advice %v, want min.insync.replicas 1 -> 2", advice)
	}
	// One replica: min.insync.replicas stays the broker's.
	if err := topic.Ensure(ctx, adm, topic.Spec{Name: "one", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if v := configsOf(t, admin(t, brokers), "one")["min.insync.replicas"]; v != "1" {
		t.Errorf("topic with one replica has min.insync.replicas=%q, want the default 1", v)
	}
}

// A log kept whole is created with retention.ms=-1 and retention.bytes=-1;
// an existing one with a finite retention (the broker's default 7 days,
// or a size limit) is advice naming the value and the fix.
func TestEnsureRetainForever(t *testing.T) {
	brokers := testenv.Brokers(t)
	adm := admin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := topic.Ensure(ctx, adm, topic.Spec{Name: "log", Partitions: 1, ReplicationFactor: 1, RetainForever: true}); err != nil {
		t.Fatal(err)
	}
	got := configsOf(t, admin(t, brokers), "log")
	if got["retention.ms"] != "-1" || got["retention.bytes"] != "-1" {
		t.Errorf("created with retention.ms=%q retention.bytes=%q, want -1 and -1", got["retention.ms"], got["retention.bytes"])
	}
	if advice, err := topic.EnsureWithAdvice(ctx, adm, topic.Spec{Name: "log", Partitions: 1, ReplicationFactor: 1, RetainForever: true}); err != nil || len(advice) != 0 {
		t.Fatalf("created by Ensure: advice %v, err %v", advice, err)
	}
	size := "1073741824"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.bytes": &size}, "old-log"); err != nil {
		t.Fatal(err)
	}
	advice, err := topic.EnsureWithAdvice(ctx, adm, topic.Spec{Name: "old-log", Partitions: 1, ReplicationFactor: 1, RetainForever: true})
	if err != nil {
		t.Fatalf("an existing log with a finite retention must still be accepted: %v", err)
	}
	want := map[string]string{"retention.ms": "604800000", "retention.bytes": size}
	for _, a := range advice {
		if has, ok := want[a.Config]; !ok || a.Has != has || a.Want != "-1" || a.Topic != "old-log" ||
			!strings.Contains(a.String(), "--entity-name old-log --add-config "+a.Config+"=-1") {
			t.Errorf("advice %q: want the topic, its value and the kafka-configs fix", a)
		}
		delete(want, a.Config)
	}
	if len(want) != 0 {
		t.Errorf("no advice about %v in %v", want, advice)
	}
}
