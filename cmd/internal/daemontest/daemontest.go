// Package daemontest holds the tests the producer and worker binaries
// share: both are kjob processes started the same way (cmd/internal/cli,
// kjob.Worker and kjob.Producer), so their command lines and their health
// during start-up are checked by the same code, once per binary.
package daemontest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// Main is a binary's TestMain: it runs main itself when a test re-executes
// the test binary with KJOB_TEST_RUN_MAIN=1 (see RunMain), so the exit code
// and output of the real binary are checked; otherwise it runs the tests.
func Main(m *testing.M, main func()) {
	if os.Getenv("KJOB_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// RunMain runs the binary's main (through Main) with args and returns its
// exit code, stdout and stderr. Kafka and Redis point at a closed port and
// the HTTP server is off.
func RunMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "KJOB_TEST_RUN_MAIN=1", "KJOB_HTTP_ADDR=", "KJOB_BROKERS=127.0.0.1:1", "KJOB_REDIS_URL=redis://127.0.0.1:1")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("run %s: %v", os.Args[0], err)
	return 0, "", ""
}

// CommandLineMistakesExit2 checks the binary named name: a stray word
// (which used to end flag parsing silently, so "name foo --brokers X" ran
// against the default brokers) is refused with exit 2, naming the word; so
// are unknown flags and values that do not parse, in one line with a hint
// to --help. --help and --version exit 0.
func CommandLineMistakesExit2(t *testing.T, name string) {
	t.Helper()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"foo", "--brokers", "127.0.0.1:2"}, 2, name + `: unexpected argument "foo": ` + name + ` takes no arguments, only flags (run "` + name + ` --help" for the flags)`},
		{[]string{"--brokers", "127.0.0.1:2", "foo"}, 2, `unexpected argument "foo"`},
		{[]string{"--no-such-flag"}, 2, name + `: unknown flag --no-such-flag (run "` + name + ` --help" for the flags)`},
		{[]string{"--replication-factor", "many"}, 2, name + `: --replication-factor "many": want a whole number (run "` + name + ` --help" for the flags)`},
	} {
		code, _, stderr := RunMain(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s %s: exit %d, stderr %q; want exit %d and one line with %q", name, strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}
	code, out, _ := RunMain(t, "--help")
	if code != 0 || !strings.Contains(out, "Usage: "+name+" [flags]") || !strings.Contains(out, "(default 1)") || strings.Contains(out, `(default "1")`) {
		t.Errorf("%s --help: exit %d, stdout:\n%s\nwant exit 0, the usage, integer defaults unquoted", name, code, out)
	}
	code, out, _ = RunMain(t, "--version")
	if code != 0 || !strings.HasPrefix(out, name+" ") || !strings.Contains(out, "go1.") {
		t.Errorf("%s --version: exit %d, stdout %q", name, code, out)
	}
}

// HealthServedWhileStartupWaits checks that while start-up waits for
// Kafka or Redis, /healthz already answers 200 (a liveness probe must not
// restart the pod during an outage) and /readyz answers 503 saying what it
// waits for, and that run returns nil when its context ends meanwhile.
// run is the binary's run(ctx, args); extra are the flags it needs besides
// brokers, Redis and the HTTP address.
func HealthServedWhileStartupWaits(t *testing.T, run func(context.Context, []string) error, extra []string) {
	t.Helper()
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
			args := append(append(tc.args, extra...), "--http-addr", addr)
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
