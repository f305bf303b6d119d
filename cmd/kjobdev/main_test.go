package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBrokerBadListen(t *testing.T) {
	code, _, stderr := runCmd(t, "broker", "--listen", "localhost")
	if code != exitUsage || !strings.Contains(stderr, `--listen "localhost"`) {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
}

// Each command prints its usage and flags for --help, and exits 0.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		args       []string
		flag, head string
	}{
		{[]string{"broker"}, "--group-min-session-timeout", "kjobdev broker"},
		{[]string{"demo"}, "--producers", "kjobdev demo"},
	} {
		code, out, _ := runCmd(t, append(c.args, "--help")...)
		if code != exitOK || !strings.Contains(out, c.flag) || !strings.Contains(out, c.head) {
			t.Errorf("%v --help: code %d\n%s", c.args, code, out)
		}
	}
	if code, _, _ := runCmd(t, "nope"); code != exitUsage {
		t.Errorf("unknown command: code %d", code)
	}
}
