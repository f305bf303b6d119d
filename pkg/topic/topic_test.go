package topic_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/testenv"
	"github.com/kjob/kjob/pkg/configerr"
	"github.com/kjob/kjob/pkg/topic"
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
