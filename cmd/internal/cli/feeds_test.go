package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/base/configerr"
)

// A flag registered as feeding a config field names itself in an error
// about that field, and the error exits 2 (the value given is wrong); an
// error about a field no flag feeds is left as it is.
func TestConfigErrorNamesTheFlagsThatFeedTheFields(t *testing.T) {
	var ttl, extend time.Duration
	f := NewFlags("t", "t")
	f.SetOutput(io.Discard)
	f.Duration(&ttl, "claim-ttl", "KJOB_T_CLAIM_TTL", 6*time.Second, "").Feeds("C.ClaimTTL")
	f.Duration(&extend, "claim-extend", "KJOB_T_CLAIM_EXTEND", 0, "").Feeds("C.Extend")
	if err := f.Parse([]string{"--claim-extend", "4s"}); err != nil {
		t.Fatal(err)
	}
	ce := &configerr.Error{Op: "kjob", Field: "C.Extend", Value: extend, Reason: "must be less than C.ClaimTTL/2", Related: []string{"C.ClaimTTL"}}
	err := f.ConfigError(fmt.Errorf("wrapped: %w", ce))
	want := "--claim-extend/KJOB_T_CLAIM_EXTEND=4s, --claim-ttl/KJOB_T_CLAIM_TTL=6s: wrapped: kjob: C.Extend = 4s must be less than C.ClaimTTL/2"
	if err == nil || err.Error() != want || !errors.Is(err, ErrUsage) || configerr.As(err) != ce {
		t.Fatalf("ConfigError = %v\nwant %s, a usage error wrapping the *configerr.Error", err, want)
	}
	other := &configerr.Error{Op: "x", Field: "D.Other", Reason: "is bad"}
	if err := f.ConfigError(other); err != other {
		t.Fatalf("ConfigError(unfed field) = %v, want it unchanged", err)
	}
	if err := f.ConfigError(nil); err != nil {
		t.Fatalf("ConfigError(nil) = %v", err)
	}
}

// The process logger shows the flag in place of a config field it feeds.
func TestLoggerNamesFieldsByTheirFlags(t *testing.T) {
	var hosts string
	f := NewFlags("t", "t")
	f.String(&hosts, "http-allow-hosts", "KJOB_T_ALLOW", "", "").Feeds("WorkerConfig.HTTPAllowHosts")
	f.String(&hosts, "allow", "", "", "").Feeds("WorkerConfig.HTTPAllow")
	var b bytes.Buffer
	log := slog.New(f.nameFieldsIn(slog.NewTextHandler(&b, nil))).With("worker", "w1")
	log.Warn("WorkerConfig.HTTPAllowHosts is empty, WorkerConfig.HTTPAllow too; ProducerConfig.Signer unset", "n", 1)
	got := b.String()
	if !strings.Contains(got, `msg="--http-allow-hosts/KJOB_T_ALLOW is empty, --allow too; ProducerConfig.Signer unset" worker=w1 n=1`) {
		t.Fatalf("log line %q: want the fields flags feed named by their flags, the others and the attributes kept", got)
	}
}

// Require refuses a value the command line reads differently from the
// config, after parsing, naming the flag.
func TestRequire(t *testing.T) {
	var g time.Duration
	f := NewFlags("t", "t")
	f.SetOutput(io.Discard)
	f.Duration(&g, "grace", "KJOB_T_GRACE", time.Second, "").Require(func() string {
		if g <= 0 {
			return "must be positive"
		}
		return ""
	})
	err := f.Parse([]string{"--grace", "0s"})
	if err == nil || err.Error() != "--grace/KJOB_T_GRACE=0s: must be positive" || !errors.Is(err, ErrUsage) {
		t.Fatalf("Parse = %v", err)
	}
}
