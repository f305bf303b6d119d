package configerr_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/base/configerr"
)

func TestMessage(t *testing.T) {
	sentinel := errors.New("no such partition")
	for _, tc := range []struct {
		err       *configerr.Error
		lib, flag string
	}{
		{&configerr.Error{Op: "dedupe", Field: "Config.Namespace", Reason: "is empty; set it"},
			"dedupe: Config.Namespace is empty; set it", "dedupe: --namespace is empty; set it"},
		{&configerr.Error{Op: "dedupe", Field: "Config.Namespace", Value: "a b", Reason: "contains ' '"},
			`dedupe: Config.Namespace = "a b" contains ' '`, "dedupe: --namespace a b contains ' '"},
		{&configerr.Error{Op: "worker", Field: "Config.Grace", Value: -time.Second, Reason: "is negative"},
			"worker: Config.Grace = -1s is negative", "worker: --grace -1s is negative"},
		{&configerr.Error{Op: "replay", Field: "ReplaySpec.Partitions", Value: int32(9), Reason: ": no such partition: topic w has partitions 0-1", Err: sentinel},
			"replay: ReplaySpec.Partitions = 9: no such partition: topic w has partitions 0-1", "replay: --partition 9: no such partition: topic w has partitions 0-1"},
		{&configerr.Error{Op: "lease", Field: "Config.RenewInterval", Value: 3 * time.Second, Reason: "must be less than Config.TTL/2", Related: []string{"Config.TTL"}},
			"lease: Config.RenewInterval = 3s must be less than Config.TTL/2", "lease: --lease-renew 3s must be less than --lease-ttl/2"},
		{&configerr.Error{Op: "operator", Field: "Config.Store", Reason: ", Pauses and Replayer are required", Related: []string{"Pauses", "Replayer"}},
			"operator: Config.Store, Pauses and Replayer are required", "operator: Config.Store, Pauses and Replayer are required"},
	} {
		flags := map[string]string{"Config.Namespace": "--namespace", "Config.Grace": "--grace", "ReplaySpec.Partitions": "--partition",
			"Config.RenewInterval": "--lease-renew", "Config.TTL": "--lease-ttl"}
		if got := tc.err.Error(); got != tc.lib {
			t.Errorf("Error() = %q\nwant %q", got, tc.lib)
		}
		got := tc.err.Message(func(f string) (string, bool) { n, ok := flags[f]; return n, ok })
		if got != tc.flag {
			t.Errorf("Message(flags) = %q\nwant %q", got, tc.flag)
		}
	}
}

// A caller finds the error, and the fields it is about, through wrapping
// and joining; the sentinel it carries matches too.
func TestAsAndFields(t *testing.T) {
	sentinel := errors.New("invalid")
	a := &configerr.Error{Op: "x", Field: "Config.A", Related: []string{"Config.B"}, Err: sentinel}
	b := &configerr.Error{Op: "y", Field: "Config.C"}
	err := fmt.Errorf("start: %w", errors.Join(a, fmt.Errorf("other: %w", b), errors.New("plain")))
	var ce *configerr.Error
	if !errors.As(err, &ce) || ce != a || configerr.As(err) != a {
		t.Fatalf("errors.As found %v", ce)
	}
	if !errors.Is(err, sentinel) {
		t.Fatal("the sentinel does not match")
	}
	if got := configerr.Fields(err); !slices.Equal(got, []string{"Config.A", "Config.B", "Config.C"}) {
		t.Fatalf("Fields = %v", got)
	}
	if configerr.As(errors.New("plain")) != nil || configerr.Fields(nil) != nil {
		t.Fatal("a plain error has a configuration error")
	}
}
