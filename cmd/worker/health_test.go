package main

import (
	"context"
	"errors"
	"testing"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/cmd/internal/daemontest"
)

// While start-up waits for Kafka or Redis, /healthz already answers 200
// and /readyz answers 503 saying what it waits for. Before, nothing
// listened until both answered.
func TestHealthServedWhileStartupWaits(t *testing.T) {
	daemontest.HealthServedWhileStartupWaits(t, run, startupArgs(t))
}

// A broker address that can never be dialled is refused at start-up,
// naming the flag, its variable, the value and the form.
func TestRunRefusesBadBrokers(t *testing.T) {
	t.Setenv("KJOB_BROKERS", "nonsense:99999")
	err := run(context.Background(), startupArgs(t))
	want := `--brokers/KJOB_BROKERS=nonsense:99999: broker "nonsense:99999": port "99999" is not a number from 1 to 65535: want host:port, e.g. kafka-1:9092`
	if err == nil || err.Error() != want || !errors.Is(err, cli.ErrUsage) {
		t.Fatalf("run = %v\nwant %s (a usage error)", err, want)
	}
}

// startupArgs are the flags a worker needs besides brokers and Redis.
func startupArgs(t *testing.T) []string { return nil }
