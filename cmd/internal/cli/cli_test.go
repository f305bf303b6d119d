package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/base/configerr"
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

func TestIntRangeRejectsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		env, args []string
		want      string
	}{
		{[]string{"KJOB_T_RF", "70000"}, nil, "--replication-factor/KJOB_T_RF=70000: out of range: want a whole number from 1 to 32767"},
		{nil, []string{"--replication-factor", "0"}, "--replication-factor/KJOB_T_RF=0: out of range: want a whole number from 1 to 32767"},
		{nil, []string{"--replication-factor", "3"}, ""},
	} {
		var rf int
		f := NewFlags("t", "t")
		f.SetOutput(io.Discard)
		f.IntRange(&rf, "replication-factor", "KJOB_T_RF", 1, 1, 32767, "")
		if tc.env != nil {
			t.Setenv(tc.env[0], tc.env[1])
		}
		err := f.Parse(tc.args)
		if tc.want == "" {
			if err != nil || rf != 3 {
				t.Errorf("Parse(%v) = %v, rf %d; want nil, 3", tc.args, err, rf)
			}
			continue
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(env %v, args %v) = %v\nwant %s", tc.env, tc.args, err, tc.want)
		}
		// ParseInterspersed checks the bounds too.
		if _, err := f.ParseInterspersed(tc.args); err == nil || err.Error() != tc.want {
			t.Errorf("ParseInterspersed(env %v, args %v) = %v\nwant %s", tc.env, tc.args, err, tc.want)
		}
	}
}

func TestErrorfAndWithFlagsNameFlagVariableAndValue(t *testing.T) {
	var ttl, renew time.Duration
	f := NewFlags("t", "t")
	f.SetOutput(io.Discard)
	f.Duration(&ttl, "lease-ttl", "KJOB_T_LEASE_TTL", 5*time.Second, "")
	f.Duration(&renew, "lease-renew", "KJOB_T_LEASE_RENEW", time.Second, "")
	t.Setenv("KJOB_T_LEASE_RENEW", "3s")
	if err := f.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Errorf("lease-renew", "must be less than %s/2", "--lease-ttl").Error(),
		"--lease-renew/KJOB_T_LEASE_RENEW=3s: must be less than --lease-ttl/2"; got != want {
		t.Errorf("Errorf = %q, want %q", got, want)
	}
	lib := &configerr.Error{Op: "lease", Field: "Config.RenewInterval", Value: 3 * time.Second, Reason: "must be less than Config.TTL/2 = 2.5s", Related: []string{"Config.TTL"}}
	err := f.WithFlags(fmt.Errorf("elector: %w", lib), map[string]string{"Config.TTL": "lease-ttl", "Config.RenewInterval": "lease-renew"})
	want := "--lease-renew/KJOB_T_LEASE_RENEW=3s, --lease-ttl/KJOB_T_LEASE_TTL=5s: elector: lease: Config.RenewInterval = 3s must be less than Config.TTL/2 = 2.5s"
	if err == nil || err.Error() != want || !errors.Is(err, lib) {
		t.Errorf("WithFlags = %v\nwant %s (wrapping the library error)", err, want)
	}
	other := &configerr.Error{Op: "lease", Field: "Config.Holder", Reason: "is empty"}
	if err := f.WithFlags(other, map[string]string{"Config.TTL": "lease-ttl"}); err != other {
		t.Errorf("WithFlags of an error naming no mapped field = %v, want it unchanged", err)
	}
	plain := errors.New("lease: Config.TTL is what the text says, but the error has no fields")
	if err := f.WithFlags(plain, map[string]string{"Config.TTL": "lease-ttl"}); err != plain {
		t.Errorf("WithFlags of an untyped error = %v, want it unchanged: text is not parsed", err)
	}
}

// InFlags names the fields of a configuration error by their flags, in
// the error's place, and keeps what it wraps.
func TestInFlags(t *testing.T) {
	sentinel := errors.New("invalid replay")
	lib := &configerr.Error{Op: "replay", Field: "ReplaySpec.Job", Value: "report", Related: []string{"ReplaySpec.Partitions"},
		Reason: ": its windows are on partition 1, not on ReplaySpec.Partitions [0]: invalid replay", Err: sentinel}
	flags := map[string]string{"ReplaySpec.Job": "job", "ReplaySpec.Partitions": "partition"}
	err := InFlags(fmt.Errorf("%w: usage", lib), flags)
	if want := "replay: --job report: its windows are on partition 1, not on --partition [0]: invalid replay: usage"; err.Error() != want {
		t.Errorf("InFlags = %q\nwant %q", err, want)
	}
	if !errors.Is(err, sentinel) || configerr.As(err) != lib {
		t.Errorf("InFlags lost the error it rewords: %#v", err)
	}
	if lib.Error() != `replay: ReplaySpec.Job = "report": its windows are on partition 1, not on ReplaySpec.Partitions [0]: invalid replay` {
		t.Errorf("library text %q", lib.Error())
	}
	unset := &configerr.Error{Op: "replay", Field: "ReplaySpec.Group", Reason: "is empty; name the group"}
	if err := InFlags(unset, map[string]string{"ReplaySpec.Group": "group"}); err.Error() != "replay: --group is empty; name the group" {
		t.Errorf("InFlags of an unset field = %q", err)
	}
	if err := InFlags(unset, map[string]string{"ReplaySpec.Job": "job"}); err != error(unset) {
		t.Errorf("InFlags of an unmapped field = %v, want it unchanged", err)
	}
}
