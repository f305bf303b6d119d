package cli

import (
	"fmt"
	"io"
	"strings"
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

// TestRedisClientKinds checks which client each Redis setting builds: a
// Cluster client for --redis-addrs, even with one address (a configuration
// endpoint), a Sentinel failover client with --redis-master, a plain client
// for a URL.
func TestRedisClientKinds(t *testing.T) {
	for _, tc := range []struct {
		opts RedisOptions
		want string
	}{
		{RedisOptions{URL: "redis://127.0.0.1:6379/0"}, "*redis.Client"},
		{RedisOptions{URL: "redis://127.0.0.1:6379/0", Addrs: "10.0.0.1:6379"}, "*redis.ClusterClient"},
		{RedisOptions{URL: "redis://127.0.0.1:6379/0", Addrs: "10.0.0.1:6379,10.0.0.2:6379"}, "*redis.ClusterClient"},
		{RedisOptions{URL: "redis://127.0.0.1:6379/0", Addrs: "10.0.0.1:26379", MasterName: "m"}, "*redis.Client"},
	} {
		c, err := tc.opts.Client()
		if err != nil {
			t.Fatalf("%+v: %v", tc.opts, err)
		}
		if got := fmt.Sprintf("%T", c); got != tc.want {
			t.Errorf("%+v: client %s, want %s", tc.opts, got, tc.want)
		}
		c.Close()
	}
	_, err := RedisOptions{URL: "redis://127.0.0.1:6379/2", Addrs: "10.0.0.1:6379"}.Client()
	if err == nil || !strings.Contains(err.Error(), "has only db 0") {
		t.Fatalf("db 2 with a cluster: %v", err)
	}
}
