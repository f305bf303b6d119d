package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/topic"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// Settings that break leadership or would be mangled on their way to Kafka
// stop the producer at start-up, before it connects to anything, with an
// error naming the flag, its variable, the value and the fix.
func TestRunRefusesBadSettings(t *testing.T) {
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(schedules, []byte("jobs:\n  - name: nightly\n    schedule: \"@daily\"\n    handler: log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"renew not below ttl/2", map[string]string{"KJOB_LEASE_RENEW": "3s"}, nil,
			"--lease-renew/KJOB_LEASE_RENEW=3s, --lease-ttl/KJOB_LEASE_TTL=2s: kjob: ProducerConfig.LeaseRenew = 3s must be less than ProducerConfig.LeaseTTL/2 (1s; LeaseTTL 2s), or the leader cannot renew before its lease expires: lower it or raise ProducerConfig.LeaseTTL"},
		{"renew zero", nil, []string{"--lease-renew", "0s"},
			"--lease-renew/KJOB_LEASE_RENEW=0s: not positive: set a duration below --lease-ttl/2 (1s)"},
		{"ttl too short", nil, []string{"--lease-ttl", "1ms"},
			"--lease-ttl/KJOB_LEASE_TTL=1ms: kjob: ProducerConfig.LeaseTTL = 1ms is too short: set at least 10ms (seconds in production), or 0 for the default 2s"},
		{"replication factor wraps int16", map[string]string{"KJOB_REPLICATION_FACTOR": "70000"}, nil,
			"--replication-factor/KJOB_REPLICATION_FACTOR=70000: out of range: want a whole number from 1 to 32767"},
		{"partitions negative", nil, []string{"--partitions", "-3"},
			"--partitions/KJOB_PARTITIONS=-3: out of range: want a whole number from 1 to 2147483647"},
		{"partitions wrap int32", nil, []string{"--partitions", "4294967297"},
			"--partitions/KJOB_PARTITIONS=4294967297: out of range: want a whole number from 1 to 2147483647"},
		{"transaction timeout too short", nil, []string{"--transaction-timeout", "500ms"},
			"--transaction-timeout/KJOB_TRANSACTION_TIMEOUT=500ms: kjob: ProducerConfig.TransactionTimeout = 500ms is below 1s; set at least 1s, or 0 for the default 10s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KJOB_SCHEDULES", schedules)
			t.Setenv("KJOB_HTTP_ADDR", "")
			t.Setenv("KJOB_KAFKA_CHECK_ACLS", "false")
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

// An existing windows topic with another partition count stops the
// producer with an error that names the flag to change.
func TestRunTopicMismatchNamesTheFlag(t *testing.T) {
	brokers := testenv.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "kjob.windows"); err != nil {
		t.Fatal(err)
	}
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(schedules, []byte("jobs:\n  - name: nightly\n    schedule: \"@daily\"\n    handler: log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = run(ctx, []string{"--brokers", strings.Join(brokers, ","), "--schedules", schedules, "--http-addr", "", "--kafka-check-acls=false", "--redis-check-acls=false",
		"--redis-url", "redis://127.0.0.1:1", "--partitions", "3"})
	want := "--partitions/KJOB_PARTITIONS=3: topic kjob.windows exists but has 2 partitions, configured 3 (set the partitions setting to 2"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, topic.ErrMismatch) {
		t.Fatalf("run = %v\nwant it to start with %s", err, want)
	}
}
