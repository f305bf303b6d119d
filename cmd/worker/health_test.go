package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/testenv"
)

// While start-up waits for Kafka or Redis, /healthz already answers 200
// (a liveness probe must not restart the pod during an outage) and /readyz
// answers 503 saying what it waits for. Before, nothing listened until
// both answered.
func TestHealthServedWhileStartupWaits(t *testing.T) {
	closed := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)) // nothing listens there
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"kafka down", []string{"--brokers", closed, "--redis-url", "redis://" + closed}, "starting: waiting for kafka"},
		{"redis down", []string{"--brokers", strings.Join(testenv.Brokers(t), ","), "--kafka-check-acls=false", "--redis-url", "redis://" + closed}, "starting: waiting for redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			args := append(append(tc.args, startupArgs(t)...), "--http-addr", addr)
			go func() { done <- run(ctx, args) }()
			get := func(path string) (int, string) {
				resp, err := http.Get("http://" + addr + path)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			testenv.Eventually(t, 20*time.Second, func() bool { code, _ := get("/healthz"); return code == 200 }, "/healthz answers 200 while start-up waits")
			testenv.Eventually(t, 20*time.Second, func() bool {
				code, body := get("/readyz")
				return code == 503 && strings.Contains(body, tc.want)
			}, "/readyz answers 503 with %q", tc.want)
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run after cancel: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("run did not return within 20s of cancel")
			}
		})
	}
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
