package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/topic"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// Settings that break the guarantee stop the worker at start-up, before it
// connects to anything, with an error naming the flag, its variable, the
// value and the fix. Rules of WorkerConfig are its own (kjob: ...), prefixed
// with the flags that fed the fields; a flag-only rule (grace 0) is the
// flag's.
func TestRunRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"extend not below claim-ttl/2", nil, []string{"--claim-ttl", "15s", "--claim-extend", "20s"},
			"--claim-extend/KJOB_CLAIM_EXTEND=20s, --claim-ttl/KJOB_CLAIM_TTL=15s: kjob: WorkerConfig.ClaimExtendInterval = 20s must be less than WorkerConfig.ClaimTTL/2 (7.5s; ClaimTTL 15s), or claims expire while their handlers run and another worker may run the same window: lower it (0 picks ClaimTTL/3) or raise WorkerConfig.ClaimTTL"},
		{"extend from the environment", map[string]string{"KJOB_CLAIM_EXTEND": "3s"}, nil,
			"--claim-extend/KJOB_CLAIM_EXTEND=3s, --claim-ttl/KJOB_CLAIM_TTL=6s: kjob: WorkerConfig.ClaimExtendInterval = 3s must be less than WorkerConfig.ClaimTTL/2 (3s; ClaimTTL 6s), or claims expire while their handlers run and another worker may run the same window: lower it (0 picks ClaimTTL/3) or raise WorkerConfig.ClaimTTL"},
		{"replication factor wraps int16", map[string]string{"KJOB_REPLICATION_FACTOR": "70000"}, nil,
			"--replication-factor/KJOB_REPLICATION_FACTOR=70000: out of range: want a whole number from 1 to 32767"},
		{"replication factor zero", nil, []string{"--replication-factor", "0"},
			"--replication-factor/KJOB_REPLICATION_FACTOR=0: out of range: want a whole number from 1 to 32767"},
		{"claim ttl too short", nil, []string{"--claim-ttl", "50ms"},
			"--claim-ttl/KJOB_CLAIM_TTL=50ms: kjob: WorkerConfig.ClaimTTL = 50ms is below the minimum 100ms; set at least 100ms (a few seconds in production), or 0 for the default 6s"},
		{"retention below claim ttl", nil, []string{"--retention", "1s"},
			"--retention/KJOB_RETENTION=1s, --claim-ttl/KJOB_CLAIM_TTL=6s: kjob: WorkerConfig.Retention = 1s is shorter than WorkerConfig.ClaimTTL (6s): done markers must outlive claims; set at least the claim TTL (7 days, the default, is customary: it is the replay horizon)"},
		{"heartbeat not below session timeout", nil, []string{"--heartbeat", "6s"},
			"--heartbeat/KJOB_HEARTBEAT=6s, --session-timeout/KJOB_SESSION_TIMEOUT=6s: kjob: WorkerConfig.HeartbeatInterval = 6s must be below WorkerConfig.SessionTimeout (6s): set about a third of the session timeout (2s)"},
		{"library error: namespace", nil, []string{"--namespace", "a b"},
			`--namespace/KJOB_NAMESPACE=a b: kjob: WorkerConfig.Namespace = "a b" contains ' '; use only letters, digits, '_', '.', '-'`},
		{"grace negative", nil, []string{"--grace", "-1s"},
			"--grace/KJOB_GRACE=-1s: must be positive: in-flight handlers get this long to finish on shutdown or revoke before they are abandoned and their windows run again elsewhere; set a duration such as 10s (the default)"},
		// Before, 0 was silently the default 10s.
		{"grace zero", map[string]string{"KJOB_GRACE": "0"}, nil,
			"--grace/KJOB_GRACE=0s: must be positive: in-flight handlers get this long to finish on shutdown or revoke before they are abandoned and their windows run again elsewhere; set a duration such as 10s (the default)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			err := run(context.Background(), tc.args)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("run(%v) = %v\nwant %s", tc.args, err, tc.want)
			}
		})
	}
}

// An existing dead-letter topic with other settings stops the worker with
// an error that names the flag behind the setting that differs (the
// partition count: the fix is another topic, not a replication factor).
func TestRunDeadLetterTopicMismatchNamesTheFlags(t *testing.T) {
	brokers := testenv.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "kjob.windows.dlq"); err != nil {
		t.Fatal(err)
	}
	err = run(ctx, []string{"--brokers", strings.Join(brokers, ","), "--http-addr", "", "--kafka-check-acls=false", "--redis-check-acls=false", "--redis-url", "redis://127.0.0.1:1"})
	want := `--dlq-topic/KJOB_DLQ_TOPIC="": worker: dead-letter topic: topic kjob.windows.dlq exists but has 2 partitions, configured 1`
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, topic.ErrMismatch) {
		t.Fatalf("run = %v\nwant it to start with %s", err, want)
	}
}
