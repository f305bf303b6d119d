package cli

import (
	"io"
	"testing"
	"time"
)

func TestEnvThenFlags(t *testing.T) {
	var s string
	var d time.Duration
	var n int
	f := NewFlags("t", "t")
	f.SetOutput(io.Discard)
	f.String(&s, "brokers", "KJOB_T_BROKERS", "127.0.0.1:9092", "")
	f.Duration(&d, "ttl", "KJOB_T_TTL", 5*time.Second, "")
	f.Int(&n, "parts", "KJOB_T_PARTS", 1, "")
	t.Setenv("KJOB_T_BROKERS", "a:1")
	t.Setenv("KJOB_T_TTL", "2s")
	if err := f.Parse([]string{"--ttl", "3s"}); err != nil {
		t.Fatal(err)
	}
	if s != "a:1" || d != 3*time.Second || n != 1 {
		t.Fatalf("got %q %v %d: env sets, the command line overrides, defaults stay", s, d, n)
	}
}

func TestEnvErrorNamesVariableValueAndForm(t *testing.T) {
	var d time.Duration
	f := NewFlags("t", "t")
	f.SetOutput(io.Discard)
	f.Duration(&d, "ttl", "KJOB_T_TTL", 5*time.Second, "")
	t.Setenv("KJOB_T_TTL", "5x")
	err := f.Parse(nil)
	want := `environment variable KJOB_T_TTL="5x": parse error: want a duration such as "5s" or "1m30s" (flag --ttl)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func TestLoggerRejectsUnknownFormat(t *testing.T) {
	if _, err := Logger(io.Discard, "xml", "info"); err == nil || err.Error() != `--log-format "xml": want text or json` {
		t.Fatalf("err = %v", err)
	}
	if _, err := Logger(io.Discard, "json", "loud"); err == nil || err.Error() != `--log-level "loud": want debug, info, warn or error` {
		t.Fatalf("err = %v", err)
	}
}
