package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain runs main itself when a test re-executes this test binary with
// KJOB_TEST_RUN_MAIN=1, so the exit code and output of the real binary are
// checked.
func TestMain(m *testing.M) {
	if os.Getenv("KJOB_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs the binary's main with args and returns its exit code,
// stdout and stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
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

// A stray word used to end flag parsing silently: "worker foo --brokers X"
// ran against the default brokers. It is refused with exit 2, naming the
// word; so are unknown flags and values that do not parse, in one line
// with a hint to --help. --help and --version exit 0.
func TestCommandLineMistakesExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"foo", "--brokers", "127.0.0.1:2"}, 2, `worker: unexpected argument "foo": worker takes no arguments, only flags (run "worker --help" for the flags)`},
		{[]string{"--brokers", "127.0.0.1:2", "foo"}, 2, `unexpected argument "foo"`},
		{[]string{"--no-such-flag"}, 2, `worker: unknown flag --no-such-flag (run "worker --help" for the flags)`},
		{[]string{"--replication-factor", "many"}, 2, `worker: --replication-factor "many": want a whole number (run "worker --help" for the flags)`},
	} {
		code, _, stderr := runMain(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("worker %s: exit %d, stderr %q; want exit %d and one line with %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}
	code, out, _ := runMain(t, "--help")
	if code != 0 || !strings.Contains(out, "Usage: worker [flags]") || !strings.Contains(out, "(default 1)") || strings.Contains(out, `(default "1")`) {
		t.Errorf("worker --help: exit %d, stdout:\n%s\nwant exit 0, the usage, integer defaults unquoted", code, out)
	}
	code, out, _ = runMain(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "worker ") || !strings.Contains(out, "go1.") {
		t.Errorf("worker --version: exit %d, stdout %q", code, out)
	}
}

// A worker that would run any record's handler and payload, or let the
// http handler call any host, says so at start-up (here it then stops on
// a bad namespace, after the warnings).
func TestTrustWarnings(t *testing.T) {
	_, _, stderr := runMain(t, "--namespace", "a b")
	for _, want := range []string{
		"level=WARN msg=\"signatures are not required: any principal that can write to the windows topic can run any registered handler",
		"level=WARN msg=\"the http handler may POST to ANY host: --http-allow-hosts/KJOB_HTTP_ALLOW_HOSTS is empty",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	keys := t.TempDir()
	if err := os.WriteFile(keys+"/k1", []byte(strings.Repeat("s", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, stderr = runMain(t, "--namespace", "a b", "--signing-keys-dir", keys, "--signatures-required", "--http-allow-hosts", "hooks.example.com")
	if strings.Contains(stderr, "level=WARN") {
		t.Errorf("warnings with signatures required and an allow-list:\n%s", stderr)
	}
	code, _, stderr := runMain(t, "--http-allow-hosts", "http://hooks.example.com")
	if code != 2 || !strings.Contains(stderr, `--http-allow-hosts/KJOB_HTTP_ALLOW_HOSTS=http://hooks.example.com: entry "http://hooks.example.com": want a host name`) {
		t.Errorf("bad allow-list: exit %d, stderr %q", code, stderr)
	}
}
