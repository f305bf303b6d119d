package preflight_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/preflight"
	"github.com/kjob/kjob/internal/store/access"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// The schedule roles' rows of deploy/SECURITY.md's table (role column
// "producer (schedules)" and "writer (schedules)").
func documentedScheduleACLs(t *testing.T) map[string][]access.Permission {
	t.Helper()
	rows := testenv.KafkaACLRows(t, filepath.Join("..", "..", "..", "deploy", "SECURITY.md"))
	out := map[string][]access.Permission{"producer": rows["producer (schedules)"], "writer": rows["writer (schedules)"]}
	if len(out["producer"]) == 0 || len(out["writer"]) == 0 {
		t.Fatalf("deploy/SECURITY.md: no schedule role rows found: %v", rows)
	}
	return out
}

func TestScheduleGrantsMatchSecurityDoc(t *testing.T) {
	doc := documentedScheduleACLs(t)
	if got := preflight.ScheduleProducerGrants(names.DefaultTopic); !reflect.DeepEqual(got, doc["producer"]) {
		t.Errorf("producer grants:\ncode %v\ndocs %v", got, doc["producer"])
	}
	if got := preflight.ScheduleWriterGrants(names.DefaultTopic); !reflect.DeepEqual(got, doc["writer"]) {
		t.Errorf("writer grants:\ncode %v\ndocs %v", got, doc["writer"])
	}
	// Workers get nothing on the schedules topic or the change log.
	d := names.Deployment{}.WithDefaults()
	for _, p := range access.Worker(d.Topic, d.DeadLetterTopic(), d.ControlTopic(), d.Group()) {
		if p.Name == d.SchedulesTopic() || p.Name == d.ScheduleLogTopic() {
			t.Errorf("the worker role has %v", p)
		}
	}
}

var aclOps = map[string]kmsg.ACLOperation{
	access.Read: kmsg.ACLOperationRead, access.Write: kmsg.ACLOperationWrite, access.Create: kmsg.ACLOperationCreate,
	access.Describe: kmsg.ACLOperationDescribe, access.DescribeConfigs: kmsg.ACLOperationDescribeConfigs,
}

var aclRes = map[string]kmsg.ACLResourceType{
	access.Topic: kmsg.ACLResourceTypeTopic, access.Group: kmsg.ACLResourceTypeGroup, access.TransactionalID: kmsg.ACLResourceTypeTransactionalId,
}

func fakeACLs(ps []access.Permission) []kfake.ACL {
	out := make([]kfake.ACL, 0, len(ps))
	for _, p := range ps {
		out = append(out, kfake.ACL{Resource: aclRes[p.Resource], Name: p.Name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: aclOps[p.Operation], Allow: true})
	}
	return out
}

// aclCluster is a kfake broker with SASL and ACLs enforced, a superuser
// "admin" and the given users (SCRAM-SHA-256, password "pw").
func aclCluster(t *testing.T, users map[string][]access.Permission) []string {
	t.Helper()
	opts := []kfake.Opt{kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-256", "admin", "pw")}
	for u, grants := range users {
		opts = append(opts, kfake.User("SCRAM-SHA-256", u, "pw", fakeACLs(grants)...))
	}
	return testenv.Brokers(t, opts...)
}

func as(user string) []kgo.Opt {
	return []kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: "pw"}.AsSha256Mechanism())}
}

func createTopics(t *testing.T, ctx context.Context, brokers []string, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, as("admin")...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tp := range topics {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
}

// With every documented grant the start-up check passes; without any one
// of them it refuses, naming exactly that grant, as for the producer's and
// the worker's other grants (cmd/internal/cli TestMissingGrantIsNamed).
func TestScheduleGrantMissingIsNamed(t *testing.T) {
	d := names.Deployment{}.WithDefaults()
	topics := []string{d.SchedulesTopic(), d.ScheduleLogTopic(), d.ControlTopic()}
	log := slog.New(slog.DiscardHandler)
	for role, grants := range map[string][]access.Permission{
		"producer": preflight.ScheduleProducerGrants(d.Topic),
		"writer":   preflight.ScheduleWriterGrants(d.Topic),
	} {
		t.Run(role+"/all", func(t *testing.T) {
			brokers := aclCluster(t, map[string][]access.Permission{"u": grants})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			createTopics(t, ctx, brokers, topics...)
			if err := preflight.CheckKafkaAccess(ctx, log, brokers, as("u"), grants); err != nil {
				t.Fatalf("with every grant: %v", err)
			}
		})
		for i, drop := range grants {
			t.Run(role+"/"+drop.String(), func(t *testing.T) {
				rest := append(append([]access.Permission(nil), grants[:i]...), grants[i+1:]...)
				brokers := aclCluster(t, map[string][]access.Permission{"u": rest})
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				// The operator created the topics, except the one whose
				// Create grant is under test.
				var create []string
				for _, tp := range topics {
					if !(drop.Operation == access.Create && drop.Name == tp) {
						create = append(create, tp)
					}
				}
				createTopics(t, ctx, brokers, create...)
				err := preflight.CheckKafkaAccess(ctx, log, brokers, as("u"), grants)
				var me *access.MissingError
				if !errors.Is(err, access.ErrMissing) || !errors.As(err, &me) || !reflect.DeepEqual(me.Missing, []access.Permission{drop}) {
					t.Fatalf("without %v: %v, want exactly it missing", drop, err)
				}
			})
		}
	}
}

// Only the producer's principal may write the schedules topic and the
// change log: a writer (kjobctl, the dashboard, kjob.Schedules) and a
// worker are refused by the broker, while the writer may write its
// requests to the control topic.
func TestScheduleTopicsWritableByTheProducerOnly(t *testing.T) {
	d := names.Deployment{}.WithDefaults()
	worker := access.Worker(d.Topic, d.DeadLetterTopic(), d.ControlTopic(), d.Group())
	brokers := aclCluster(t, map[string][]access.Permission{
		"producer": preflight.ScheduleProducerGrants(d.Topic),
		"writer":   preflight.ScheduleWriterGrants(d.Topic),
		"worker":   worker,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTopics(t, ctx, brokers, d.SchedulesTopic(), d.ScheduleLogTopic(), d.ControlTopic())
	produce := func(user, topic string) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0), kgo.RecordRetries(1)}, as(user)...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("job"), Value: []byte("{}")}).FirstErr()
	}
	for _, tc := range []struct {
		user, topic string
		ok          bool
	}{
		{"producer", d.SchedulesTopic(), true},
		{"producer", d.ScheduleLogTopic(), true},
		{"producer", d.ControlTopic(), true},
		{"writer", d.ControlTopic(), true},
		{"writer", d.SchedulesTopic(), false},
		{"writer", d.ScheduleLogTopic(), false},
		{"worker", d.SchedulesTopic(), false},
		{"worker", d.ScheduleLogTopic(), false},
	} {
		err := produce(tc.user, tc.topic)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s writing %s: %v", tc.user, tc.topic, err)
		case !tc.ok && !errors.Is(err, kerr.TopicAuthorizationFailed):
			t.Errorf("%s writing %s: %v, want TOPIC_AUTHORIZATION_FAILED", tc.user, tc.topic, err)
		}
	}
}
