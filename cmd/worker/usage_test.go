package main

import (
	"os"
	"strings"
	"testing"

	"github.com/kjob/kjob/cmd/internal/daemontest"
)

// TestMain lets a test run this binary's main (daemontest.RunMain).
func TestMain(m *testing.M) { daemontest.Main(m, main) }

// Stray words, unknown flags and values that do not parse exit 2 in one
// line; --help and --version exit 0.
func TestCommandLineMistakesExit2(t *testing.T) { daemontest.CommandLineMistakesExit2(t, "worker") }

// A worker that would run any record's handler and payload, or let the
// http handler call any host, says so at start-up (here it then stops on
// a bad namespace, after the warnings).
func TestTrustWarnings(t *testing.T) {
	_, _, stderr := daemontest.RunMain(t, "--namespace", "a b")
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
	_, _, stderr = daemontest.RunMain(t, "--namespace", "a b", "--signing-keys-dir", keys, "--signatures-required", "--http-allow-hosts", "hooks.example.com")
	if strings.Contains(stderr, "level=WARN") {
		t.Errorf("warnings with signatures required and an allow-list:\n%s", stderr)
	}
	code, _, stderr := daemontest.RunMain(t, "--http-allow-hosts", "http://hooks.example.com")
	if code != 2 || !strings.Contains(stderr, `--http-allow-hosts/KJOB_HTTP_ALLOW_HOSTS=http://hooks.example.com: kjob: WorkerConfig.HTTPAllowHosts = [http://hooks.example.com] entry "http://hooks.example.com": want a host name`) {
		t.Errorf("bad allow-list: exit %d, stderr %q", code, stderr)
	}
}
